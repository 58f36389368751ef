"""SGLang's kit flows on tree core "unicache" (FULL, FULL+MAMBA, FULL+SWA) against its Python core: the same
outcomes.

The backup -> evict -> load-back flow is the kit's (`test_kit_flows._Flow`),
run on both cores through the kit's own fixtures; the lock/evict flow drives
SGLang's cache (insert, lock, partial evictions, host eviction, unlock) and
compares the trees through the kit's inspection interface, which both
cores implement (SGLang's inspector for "python", `inspector` here).
"""

from __future__ import annotations

import unittest
from typing import Any

import pytest
from sglang.srt.mem_cache.base_prefix_cache import EvictParams
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
from sglang.test.kits.unified_radix_cache.config import CONFIGS, CacheConfig, supports_hicache
from sglang.test.kits.unified_radix_cache.fixtures import build_fixture, match_prefix
from sglang.test.kits.unified_radix_cache.load_back import UnifiedRadixCacheLoadBackFixtures
from sglang.test.kits.unified_radix_cache.unified_tree_core_inspection_interface import (
    UnifiedTreeCoreInspectionInterface,
)

from tests.integrations.sglang.test_kit_flows import _Flow, outcomes_by_backend
from tests.integrations.sglang.treecore.inspector import InspectedUnicacheTreeCore

FULL_CFGS = [c for c in CONFIGS if c.components == (ComponentType.FULL,) and c.page_size <= 64]
MAMBA_CFGS = [c for c in CONFIGS if c.components == (ComponentType.FULL, ComponentType.MAMBA)
              and c.page_size <= 64 and supports_hicache(c)]
SWA_CFGS = [c for c in CONFIGS if c.components == (ComponentType.FULL, ComponentType.SWA)
            and c.page_size <= 64 and supports_hicache(c)]


def _core(cache: UnifiedRadixCache) -> UnifiedTreeCoreInspectionInterface:
    core = cache.tree_core
    assert isinstance(core, UnifiedTreeCoreInspectionInterface)
    return core


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("cfg", FULL_CFGS, ids=[c.label for c in FULL_CFGS])
def test_backup_evict_load_back_same_as_python(cfg: CacheConfig, policy: str) -> None:
    outcomes = outcomes_by_backend(_Flow, cfg, policy, ("python", "unicache"))
    assert outcomes["unicache"] == outcomes["python"]
    py = outcomes["python"]
    assert py["started"] and py["device_after_evict"] < py["device_before_evict"]
    assert py["device_after_load"] == py["device_before_evict"]


def _tree(cache: UnifiedRadixCache) -> list[tuple[tuple[int, ...], tuple[tuple[bool, bool, int, int], ...]]]:
    """Every node as (its path's tokens, per component: on device, on host, device locks, host locks), sorted."""
    core = _core(cache)
    comps = cache.tree_components
    root = cache.root_node_handle()
    out = []
    stack: list[tuple[int, tuple[int, ...]]] = [(root, ())]
    while stack:
        nid, prefix = stack.pop()
        for child in core.get_child_node_ids(nid):
            path = prefix + tuple(core.get_node_token_ids(child))
            out.append((path, tuple((core.get_component_device_value(child, ct) is not None,
                                     core.get_component_host_value(child, ct) is not None,
                                     core.get_component_device_lock_ref(child, ct),
                                     core.get_component_host_lock_ref(child, ct)) for ct in comps)))
            stack.append((child, path))
    return sorted(out)


def _sizes(cache: UnifiedRadixCache) -> list[tuple[int, int]]:
    """(evictable, protected) of every component."""
    core = cache.tree_core
    return [(core.component_evictable_size(ct), core.component_protected_size(ct)) for ct in cache.tree_components]


class _LockEvictFlow(UnifiedRadixCacheLoadBackFixtures, unittest.TestCase):
    """Inserts, locks, partial device evictions, host eviction and unlocks on SGLang's cache; snapshots."""

    __test__ = False

    def runTest(self) -> None:
        """Unused: unittest needs a test method to instantiate the case."""

    def run_flow(self, backend: str, policy: str) -> list[Any]:
        cache, allocator, r2t = build_fixture(self.cfg, tree_core_backend=backend)
        self._init_hicache(cache, write_policy=policy)
        ps = self.cfg.page_size
        seqs = [self._make_seq(1000 * (i + 1), 2) for i in range(4)]
        seqs += [seqs[0][:ps] + self._make_seq(50000 + 1000 * i, 1) for i in range(3)]
        for s in seqs:
            self._insert(cache, allocator, r2t, s)
        snaps: list[Any] = [_tree(cache), _sizes(cache)]
        m = match_prefix(cache, seqs[4])
        lock = cache.inc_lock_ref(m.last_device_node)
        snaps += [_tree(cache), _sizes(cache), m.device_prefix_len]
        self._backup_tree(cache)
        for n in (ps, 3 * ps, self.cfg.kv_size):
            cache.evict_for_alloc(EvictParams(num_tokens=n, mamba_num=2 if self.cfg.has_mamba else 0))
            snaps += [_tree(cache), _sizes(cache)]
            cache.sanity_check()
        hosted = match_prefix(cache, seqs[1])
        snaps += [hosted.device_prefix_len, hosted.host_hit_length]
        cache.evict_host(2 * ps)
        snaps += [_tree(cache)]
        cache.dec_lock_ref(m.last_device_node, lock.to_dec_params())
        cache.evict_for_alloc(EvictParams(num_tokens=self.cfg.kv_size,
                                          mamba_num=self.cfg.mamba_cache_size if self.cfg.has_mamba else 0))
        cache.evict_host(self.cfg.kv_size)
        if self.cfg.has_mamba:
            cache.evict_host(self.cfg.mamba_cache_size, ComponentType.MAMBA)
        snaps += [_tree(cache), _sizes(cache)]
        cache.sanity_check()
        core = cache.tree_core
        if isinstance(core, InspectedUnicacheTreeCore):
            assert core.ledger.live_count == 0 and core.ledger.acquired == core.ledger.released
        return snaps


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("cfg", FULL_CFGS, ids=[c.label for c in FULL_CFGS])
def test_lock_and_evict_same_as_python(cfg: CacheConfig, policy: str) -> None:
    outcomes = outcomes_by_backend(_LockEvictFlow, cfg, policy, ("python", "unicache"))
    assert outcomes["unicache"] == outcomes["python"]


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("cfg", MAMBA_CFGS, ids=[c.label for c in MAMBA_CFGS])
def test_mamba_backup_evict_load_back_same_as_python(cfg: CacheConfig, policy: str) -> None:
    outcomes = outcomes_by_backend(_Flow, cfg, policy, ("python", "unicache"))
    assert outcomes["unicache"] == outcomes["python"]
    py = outcomes["python"]
    assert py["started"] and py["device_after_evict"] < py["device_before_evict"]
    assert py["device_after_load"] == py["device_before_evict"] and py["mamba_equal"]


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("cfg", MAMBA_CFGS, ids=[c.label for c in MAMBA_CFGS])
def test_mamba_lock_and_evict_same_as_python(cfg: CacheConfig, policy: str) -> None:
    outcomes = outcomes_by_backend(_LockEvictFlow, cfg, policy, ("python", "unicache"))
    assert outcomes["unicache"] == outcomes["python"]


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("cfg", SWA_CFGS, ids=[c.label for c in SWA_CFGS])
def test_swa_backup_evict_load_back_same_as_python(cfg: CacheConfig, policy: str) -> None:
    outcomes = outcomes_by_backend(_Flow, cfg, policy, ("python", "unicache"))
    assert outcomes["unicache"] == outcomes["python"]
    py = outcomes["python"]
    assert py["started"] and py["device_after_evict"] < py["device_before_evict"]
    assert py["device_after_load"] == py["device_before_evict"]


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("cfg", SWA_CFGS, ids=[c.label for c in SWA_CFGS])
def test_swa_lock_and_evict_same_as_python(cfg: CacheConfig, policy: str) -> None:
    outcomes = outcomes_by_backend(_LockEvictFlow, cfg, policy, ("python", "unicache"))
    assert outcomes["unicache"] == outcomes["python"]

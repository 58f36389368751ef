"""SGLang's own unit-test kit, backup -> evict -> load-back, on the "leases" and "python" cores.

Uses `sglang.test.kits.unified_radix_cache` (fixtures, mixins, configs) as
shipped in the 0.5.23 wheel, with the CPU stand-ins of conftest.py. Each
config runs the same flow on both cores; outcomes (host hit, tokens back on
device, the bytes of the reloaded KV, Mamba state) must be equal, and the
reloaded KV must be the bytes written before eviction.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import pytest
import torch
from sglang.srt.mem_cache.base_prefix_cache import EvictParams
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.test.kits.unified_radix_cache.config import CONFIGS, CacheConfig, supports_hicache
from sglang.test.kits.unified_radix_cache.fixtures import build_fixture, match_prefix
from sglang.test.kits.unified_radix_cache.load_back import UnifiedRadixCacheLoadBackFixtures

from unicache.integrations.sglang.core import LeaseTreeCore


def _flow_configs() -> list[CacheConfig]:
    picked: dict[str, CacheConfig] = {}
    for cfg in CONFIGS:
        if not supports_hicache(cfg) or cfg.enable_mamba_extra_buffer:
            continue
        name = "+".join(c.name for c in cfg.components)
        if cfg.page_size == 1 and name not in picked:
            picked[name] = cfg
    return list(picked.values())


CFGS = _flow_configs()

R = TypeVar("R", covariant=True)
T = TypeVar("T")


class KitFlow(Protocol[R]):
    """A kit flow bound to one config: runs on one tree core and write policy, returns what it saw."""

    cfg: CacheConfig

    def run_flow(self, backend: str, policy: str) -> R: ...

    def doCleanups(self) -> None: ...


def outcomes_by_backend(
    make: Callable[[], KitFlow[T]], cfg: CacheConfig, policy: str, backends: Sequence[str]
) -> dict[str, T]:
    """Run a fresh flow of `make` on each tree core of `backends` (cleaned up after each); outcomes by core."""
    outcomes: dict[str, T] = {}
    for backend in backends:
        flow = make()
        flow.cfg = cfg
        try:
            outcomes[backend] = flow.run_flow(backend, policy)
        finally:
            flow.doCleanups()
    return outcomes


class _Flow(UnifiedRadixCacheLoadBackFixtures, unittest.TestCase):
    """The kit's fixtures bound to one config; `run_flow` is the backup/evict/load-back flow.

    A TestCase only because the kit's mixins use its assertions and cleanups;
    pytest does not collect it (`__test__`), the functions below drive it.
    """

    __test__ = False

    def runTest(self) -> None:
        """Unused: unittest needs a test method to instantiate the case."""

    def run_flow(self, backend: str, policy: str) -> dict[str, Any]:
        cache, allocator, r2t = build_fixture(self.cfg, tree_core_backend=backend)
        self._init_hicache(cache, write_policy=policy)
        chain = self._build_chain_pages(cache, allocator, r2t, 4)
        tokens = self._match_tokens_for_chain(cache, chain)
        before = match_prefix(cache, tokens)
        indices = cache.path_device_indices(before.last_device_node)
        marker = (torch.arange(len(indices)) % 200 + 3).to(torch.bfloat16).view(-1, 1, 1)
        self._fill_full_kv(allocator, indices, marker)
        mamba_before = None
        if self.cfg.has_mamba:
            slot = cache.tree_core.get_component_device_value(chain[-1], ComponentType.MAMBA)
            self._fill_mamba_state(r2t, slot, 7.0)
            mamba_before = self._snapshot_mamba_state(r2t, slot)
        kv_before = self._snapshot_full_kv(allocator, indices)
        self._backup_tree(cache)
        cache.evict_for_alloc(EvictParams(
            num_tokens=self.cfg.kv_size,
            swa_num_tokens=self.cfg.kv_size if self.cfg.has_swa else 0,
            mamba_num=self.cfg.mamba_cache_size if self.cfg.has_mamba else 0))
        evicted = match_prefix(cache, tokens)
        req = self._load_back_through_admission(cache, r2t, tokens)
        started = bool(cache.ongoing_load_back)
        cache.sanity_check()
        self._finish_pending_loads(cache)
        after = match_prefix(cache, tokens)
        reloaded = cache.path_device_indices(after.last_device_node)
        kv_after = self._snapshot_full_kv(allocator, reloaded)
        assert all(torch.equal(a, b) for a, b in zip(kv_before, kv_after)), "reloaded KV differs"
        out: dict[str, Any] = {
            "device_before_evict": int(before.device_prefix_len),
            "device_after_evict": int(evicted.device_prefix_len),
            "host_hit": int(evicted.host_hit_length),
            "mamba_host_hit": int(evicted.mamba_host_hit_length),
            "started": started,
            "device_after_load": int(after.device_prefix_len),
            "kv": [t.tolist() for t in kv_after],
        }
        if mamba_before is not None:
            slot = cache.tree_core.get_component_device_value(after.last_device_node, ComponentType.MAMBA)
            state = self._snapshot_mamba_state(r2t, slot)
            out["mamba_equal"] = torch.equal(state[0], mamba_before[0])
        cache.sanity_check()
        core = cache.tree_core
        if isinstance(core, LeaseTreeCore):
            out["leases"] = (core.ledger.acquired == core.ledger.released, core.ledger.live_count)
        r2t.free(req)
        return out


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("cfg", CFGS, ids=[c.label for c in CFGS])
def test_backup_evict_load_back_same_on_both_cores(cfg: CacheConfig, policy: str) -> None:
    outcomes = outcomes_by_backend(_Flow, cfg, policy, ("python", "leases"))
    leases = outcomes["leases"].pop("leases")
    assert outcomes["leases"] == outcomes["python"]
    py = outcomes["python"]
    assert py["started"] and py["device_after_evict"] < py["device_before_evict"]
    assert py["device_after_load"] == py["device_before_evict"]
    assert py.get("mamba_equal", True)
    if policy == "write_back":
        assert leases == (True, 0)

"""Tree core "unicache" with Mamba: two load-backs on one node for different components, and #36770.

Two load-backs pin one node in two components' pin sets (the Full copy for
a descendant's anchor, the Mamba state for the node's own): acked in either
order, each ack releases only its own lease, and the outcomes equal the
Python core's (under write-back SGLang declines the second, as here). The
#36770 shapes (every cached state pinned when a slot is needed) are served
as the "leases" backend serves them: SGLang's Mamba component is swapped
for `LeaseMambaComponent`, and its lazy early release of a lock's Mamba
part releases exactly that part's lease.
"""

from __future__ import annotations

import unittest
from array import array
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
import torch
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
from sglang.test.kits.unified_radix_cache.config import CONFIGS
from sglang.test.kits.unified_radix_cache.fixtures import build_fixture, match_prefix
from sglang.test.kits.unified_radix_cache.load_back import UnifiedRadixCacheLoadBackFixtures

from tests.integrations.sglang.test_kit_flows import outcomes_by_backend
from tests.integrations.sglang.test_mamba_36770 import _lazy_extra_buffer
from unicache.integrations.sglang.errors import MambaSlotUnavailable
from unicache.integrations.sglang.mamba import LeaseMambaComponent
from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.treecore.receipts import TreeReceipt
from unicache.integrations.sglang.workload import CacheSetup, build_cache

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req

MAMBA_PS1 = next(c for c in CONFIGS if c.label == "FULL_MAMBA_ps1")
MAMBA = ComponentType.MAMBA


class _TwoLoadBacksFlow(UnifiedRadixCacheLoadBackFixtures, unittest.TestCase):
    """Parent P and child C host-only; load-back 1 anchored at C (Full of P and C, Mamba of C), load-back 2
    at P (P's Mamba state); acks in `order`."""

    __test__ = False
    order: tuple[int, int] = (0, 1)

    def runTest(self) -> None:
        """Unused: unittest needs a test method to instantiate the case."""

    def run_flow(self, backend: str, policy: str) -> list[Any]:
        cache, allocator, r2t = build_fixture(self.cfg, tree_core_backend=backend)
        self._init_hicache(cache, write_policy=policy)
        parent = self._make_seq(100, 2)
        child = parent + self._make_seq(300, 2)
        self._insert(cache, allocator, r2t, parent)
        self._insert(cache, allocator, r2t, child)
        self._backup_tree(cache)
        cache.evict_for_alloc(EvictParams(num_tokens=self.cfg.kv_size, mamba_num=self.cfg.mamba_cache_size))
        core = cache.tree_core
        m = match_prefix(cache, child)
        c_node = m.best_match_node
        p_node = match_prefix(cache, parent).best_match_node
        out: list[Any] = [m.device_prefix_len, m.host_hit_length, m.mamba_host_hit_length, c_node != p_node]
        anchors = []
        for anchor in (c_node, p_node):
            host_lock = cache.inc_host_lock_ref(anchor).to_dec_params()
            lock = cache.inc_lock_ref(anchor).to_dec_params()
            kv, comp = core.build_load_back_spec(anchor)
            for xfers in comp.values():
                for x in xfers:
                    if x.device_indices is None:
                        x.device_indices = r2t.mamba_allocator.alloc(len(x.host_indices))
            dev = allocator.alloc(len(kv.host_indices)) if len(kv.host_indices) else torch.empty(0, dtype=torch.int64)
            out.append((len(kv.host_indices), sorted(c.name for c in comp)))
            if len(kv.host_indices) or comp:
                core.commit_load_back(anchor, dev, kv, comp)
                anchors.append((anchor, lock, host_lock))
            else:
                cache.dec_lock_ref(anchor, lock)
                cache.dec_host_lock_ref(anchor, host_lock)
        if isinstance(core, UnicacheTreeCore) and len(anchors) == 2:
            p = core.node(p_node)
            assert core.mamba is not None
            assert core.load_back_pending(p) and core.mamba.host_pinned(p), "one node, two components' pins"
        out.append(_snapshot(cache, child, parent))
        for k in self.order:
            if k < len(anchors):
                anchor, lock, host_lock = anchors[k]
                cache.dec_lock_ref(anchor, lock)
                cache.dec_host_lock_ref(anchor, host_lock)
                core.finish_load_back(anchor)
                out.append(_snapshot(cache, child, parent))
                cache.sanity_check()
        if isinstance(core, UnicacheTreeCore):
            assert core.ledger.live_count == 0 and not core.load_backs
            assert core.mamba is not None and not core.mamba.load_backs
        return out


def _snapshot(cache: UnifiedRadixCache, *seqs: list[int]) -> list[Any]:
    core = cache.tree_core
    out: list[Any] = []
    for s in seqs:
        m = match_prefix(cache, s)
        out.append((m.device_prefix_len, m.host_hit_length, m.mamba_host_hit_length,
                    core.get_component_device_value(m.best_match_node, MAMBA) is not None))
    out.append([(core.component_evictable_size(ct), core.component_protected_size(ct))
                for ct in cache.tree_components])
    return out


def _two_load_backs(order: tuple[int, int]) -> type[_TwoLoadBacksFlow]:
    return type("_Flow", (_TwoLoadBacksFlow,), {"order": order, "__test__": False})


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["child-first", "parent-first"])
@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_two_load_backs_on_one_node_for_different_components(policy: str, order: tuple[int, int]) -> None:
    outcomes = outcomes_by_backend(_two_load_backs(order), MAMBA_PS1, policy, ("python", "unicache"))
    assert outcomes["unicache"] == outcomes["python"]
    steps = outcomes["python"]
    assert steps[3], "parent and child are two nodes"
    assert steps[4] == (steps[1], ["MAMBA"]), "load-back 1: the Full chain and the child's state"
    assert steps[5] == ((0, []) if policy == "write_back" else (0, ["MAMBA"])), "load-back 2: the parent's state"


SLOTS = 8


def _pinned_states() -> tuple[CacheSetup, list[tuple[int, TreeReceipt]], list[torch.Tensor]]:
    """3 cached Mamba states, each locked by a running request; every other slot taken."""
    setup = build_cache(backend="unicache", mamba=True, device_tokens=512, mamba_slots=SLOTS, max_context_len=256)
    cache, alloc, mamba_alloc = setup.cache, setup.allocator, setup.mamba_allocator
    assert mamba_alloc is not None
    locks = []
    for i in range(3):
        key = RadixKey(array("q", [1000 * (i + 1) + t for t in range(16)]))
        cache.insert(InsertParams(key=key, value=alloc.alloc(16), mamba_value=mamba_alloc.alloc(1)))
        node = cache.match_prefix(MatchPrefixParams(key=key)).last_device_node
        receipt = cache.inc_lock_ref(node).to_dec_params()
        assert isinstance(receipt, TreeReceipt)
        locks.append((node, receipt))
    taken = []
    while (slot := mamba_alloc.alloc(1)) is not None:
        taken.append(slot)
    return setup, locks, taken


def _component(setup: CacheSetup) -> LeaseMambaComponent:
    comp = setup.cache.components[MAMBA]
    assert isinstance(comp, LeaseMambaComponent)
    return comp


def test_36770_checkpoint_skips_the_state_and_proceeds() -> None:
    setup, locks, taken = _pinned_states()
    cache = setup.cache
    core = cache.tree_core
    assert isinstance(core, UnicacheTreeCore) and core.mamba is not None
    assert core.mamba.protected == 3 and core.mamba_evictable_size() == 0
    req = cast("Req", SimpleNamespace(rid=99, lock=None, kv=SimpleNamespace(mamba_pool_idx=taken[0][0])))
    params = InsertParams(key=RadixKey(array("q", range(5000, 5016))), value=None)
    assert _component(setup).prepare_for_caching_req(req, params, token_ids_len=16, is_finished=False) == 0
    assert params.mamba_value is None and _component(setup).states_not_cached == 1
    for node, receipt in locks:
        cache.dec_lock_ref(node, receipt)
    cache.sanity_check()
    assert core.mamba.protected == 0 and core.mamba_evictable_size() == 3
    params = InsertParams(key=RadixKey(array("q", range(5000, 5016))), value=None)
    assert _component(setup).prepare_for_caching_req(req, params, token_ids_len=16, is_finished=False) == 16
    assert params.mamba_value is not None, "a freed state makes room again"


def test_36770_copy_on_write_serves_a_miss_and_takes_no_lease() -> None:
    setup, locks, taken = _pinned_states()
    cache, mamba_alloc = setup.cache, setup.mamba_allocator
    core = cache.tree_core
    assert isinstance(core, UnicacheTreeCore) and mamba_alloc is not None
    live = core.ledger.live_count
    kv: Any = SimpleNamespace(holds_mamba=False, mamba_pool_idx=None)
    req = SimpleNamespace(rid=98, extra_key=None, session=None, kv=kv)
    tokens = RadixKey(array("q", [1000 + t for t in range(16)]))
    result = cache.match_prefix(MatchPrefixParams(key=tokens, cow_mamba=True, req=cast("Req", req)))
    assert result.device_prefix_len == 0 and getattr(kv, "mamba_pool_idx") is None
    assert _component(setup).states_not_copied == 1 and core.ledger.live_count == live
    cache.sanity_check()
    mamba_alloc.free(taken.pop())
    again = cache.match_prefix(MatchPrefixParams(key=tokens, cow_mamba=True, req=cast("Req", req)))
    assert again.device_prefix_len == 16 and kv.mamba_pool_idx is not None
    for node, receipt in locks:
        cache.dec_lock_ref(node, receipt)
    assert core.ledger.live_count == 0


def test_36770_lazy_release_frees_the_mamba_lease_then_the_receipt_the_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup, locks, _taken = _pinned_states()
    _lazy_extra_buffer(monkeypatch)
    cache = setup.cache
    core = cache.tree_core
    assert isinstance(core, UnicacheTreeCore) and core.mamba is not None
    node = locks[0][0]
    lock = cache.lock(node)
    assert lock is not None
    receipt = lock.receipt
    assert isinstance(receipt, TreeReceipt)
    req = cast("Req", SimpleNamespace(rid=97, lock=lock, kv=SimpleNamespace(mamba_pool_idx=None)))
    anchor = core.node(node)
    assert core.mamba.device_lock_count(anchor) == 2
    with pytest.raises(MambaSlotUnavailable, match="no Mamba slot"):
        _component(setup)._alloc_mamba_slot(req)
    assert core.mamba.device_lock_count(anchor) == 1, "the request's Mamba lease went early"
    assert receipt.lease_id in core.device_locks and MAMBA in receipt.skipped_lock_components
    cache.sanity_check()
    cache.unlock(lock)
    assert receipt.lease_id not in core.device_locks
    for n, other in locks:
        cache.dec_lock_ref(n, other)
    assert core.ledger.live_count == 0
    cache.sanity_check()


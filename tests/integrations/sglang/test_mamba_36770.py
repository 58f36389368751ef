"""SGLang #36770: a Mamba slot is needed, every cached state is pinned, none is free.

Stock 0.5.23 asserts ``Can not alloc mamba cache`` twice: in
`MambaComponent._alloc_mamba_slot` (checkpointing: `checkpoint` ->
`prepare_for_caching_req`) and in the copy-on-write of `match_prefix`
(`finalize_match_result_in_cache`, ``assert dst_index is not None``). The
lease core's component skips caching (or copying) the state, counts it, and
the request proceeds (the match becomes a miss).
"""

from __future__ import annotations

from array import array
from types import SimpleNamespace
from typing import TYPE_CHECKING, Optional, cast

import pytest
import torch
from sglang.srt.mem_cache.base_prefix_cache import (
    DecLockRefParams,
    InsertParams,
    MatchPrefixParams,
    MatchResult,
)
from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_cache.components import mamba as sglang_mamba
from sglang.srt.mem_cache.unified_cache.components.mamba import MambaComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore
from sglang.srt.runtime_context import get_exec

from unicache.integrations.sglang import mamba as lease_mamba
from unicache.integrations.sglang.core import LeaseTreeCore
from unicache.integrations.sglang.errors import MambaSlotUnavailable
from unicache.integrations.sglang.locks import LockReceipt
from unicache.integrations.sglang.mamba import LeaseMambaComponent
from unicache.integrations.sglang.workload import CacheSetup, build_cache

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.mem_cache.base_prefix_cache import TreeLock

SLOTS = 8


def _pinned_states(
    backend: str,
) -> tuple[CacheSetup, list[tuple[int, DecLockRefParams]], list[torch.Tensor]]:
    """3 cached Mamba states, each locked by a running request; every other slot taken."""
    setup = build_cache(backend=backend, mamba=True, device_tokens=512, mamba_slots=SLOTS,
                        max_context_len=256)
    cache, alloc, mamba_alloc = setup.cache, setup.allocator, setup.mamba_allocator
    assert mamba_alloc is not None
    locks = []
    for i in range(3):
        tokens = [1000 * (i + 1) + t for t in range(16)]
        key = RadixKey(array("q", tokens))
        cache.insert(InsertParams(key=key, value=alloc.alloc(16), mamba_value=mamba_alloc.alloc(1)))
        node = cache.match_prefix(MatchPrefixParams(key=key)).last_device_node
        locks.append((node, cache.inc_lock_ref(node).to_dec_params()))
    taken = []
    while (slot := mamba_alloc.alloc(1)) is not None:
        taken.append(slot)
    assert taken, "the running request needs a slot of its own"
    return setup, locks, taken


def _checkpoint(setup: CacheSetup, own_slot: torch.Tensor) -> tuple[InsertParams, Optional[int]]:
    """Checkpoint an unfinished 16-token request whose Mamba state sits in `own_slot`."""
    core = setup.cache.tree_core
    assert isinstance(core, UnifiedTreeCore)
    comp = core.components_by_type[ComponentType.MAMBA]
    assert isinstance(comp, MambaComponent)
    req = cast("Req", SimpleNamespace(rid=99, lock=None, kv=SimpleNamespace(mamba_pool_idx=own_slot[0])))
    params = InsertParams(key=RadixKey(array("q", range(5000, 5016))), value=None)
    return params, comp.prepare_for_caching_req(req, params, token_ids_len=16, is_finished=False)


def test_stock_core_asserts() -> None:
    setup, _locks, taken = _pinned_states("python")
    with pytest.raises(AssertionError, match="Can not alloc mamba cache"):
        _checkpoint(setup, taken[0])


def test_lease_core_skips_the_state_and_proceeds() -> None:
    setup, locks, taken = _pinned_states("leases")
    cache = setup.cache
    core = cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    assert isinstance(core.components_by_type[ComponentType.MAMBA], LeaseMambaComponent)
    pool = setup.req_to_token
    assert isinstance(pool, HybridReqToTokenPool)
    state_before = pool.mamba_pool.mamba_cache.temporal[:, taken[0]].clone()
    params, cache_len = _checkpoint(setup, taken[0])
    assert cache_len == 0 and params.mamba_value is None
    assert core.mamba_states_not_cached == 1
    assert torch.equal(pool.mamba_pool.mamba_cache.temporal[:, taken[0]], state_before)
    for node, receipt in locks:
        cache.dec_lock_ref(node, receipt)
    cache.sanity_check()
    params, cache_len = _checkpoint(setup, taken[0])
    assert cache_len == 16 and params.mamba_value is not None, "a freed state makes room again"
    assert core.mamba_states_not_cached == 1


def _match_with_copy(setup: CacheSetup, tokens: list[int]) -> tuple[MatchResult, SimpleNamespace]:
    """A new request (no Mamba slot of its own yet) matching `tokens` with copy-on-write."""
    kv = SimpleNamespace(holds_mamba=False, mamba_pool_idx=None)
    req = SimpleNamespace(rid=98, extra_key=None, session=None, kv=kv)
    params = MatchPrefixParams(key=RadixKey(array("q", tokens)), cow_mamba=True, req=cast("Req", req))
    return setup.cache.match_prefix(params), kv


def test_stock_copy_on_write_asserts() -> None:
    setup, _locks, _taken = _pinned_states("python")
    with pytest.raises(AssertionError, match="Can not alloc mamba cache") as raised:
        _match_with_copy(setup, [1000 + t for t in range(16)])
    assert raised.traceback[-1].name == "finalize_match_result_in_cache", "the copy-on-write assertion"


def test_lease_core_serves_the_match_as_a_miss_without_copy() -> None:
    setup, locks, taken = _pinned_states("leases")
    cache, mamba_alloc = setup.cache, setup.mamba_allocator
    core = cache.tree_core
    assert isinstance(core, LeaseTreeCore) and mamba_alloc is not None
    free_before = int(mamba_alloc.available_size())
    counters = {n.id: [(cd.lock_ref, cd.host_lock_ref) for cd in n.component_data]
                for n in core._collect_all_nodes()}
    result, kv = _match_with_copy(setup, [1000 + t for t in range(16)])
    assert core.mamba_states_not_copied == 1
    assert result.device_prefix_len == 0 and result.best_match_node == core.root_node.id
    assert kv.mamba_pool_idx is None and not hasattr(kv, "mamba_cow_src_index"), "nothing copied"
    assert int(mamba_alloc.available_size()) == free_before
    assert counters == {n.id: [(cd.lock_ref, cd.host_lock_ref) for cd in n.component_data]
                        for n in core._collect_all_nodes()}, "the match's own lock went back"
    cache.sanity_check()
    mamba_alloc.free(taken.pop())
    result, kv = _match_with_copy(setup, [1000 + t for t in range(16)])
    assert result.device_prefix_len == 16 and kv.mamba_pool_idx is not None, "a free slot makes the copy again"
    assert core.mamba_states_not_copied == 1
    for node, receipt in locks:
        cache.dec_lock_ref(node, receipt)
    cache.sanity_check()


class _LazyMamba:
    """SGLang's published Mamba settings with `enable_mamba_extra_buffer_lazy` turned on."""

    enable_mamba_extra_buffer_lazy = True

    def __init__(self, real: object) -> None:
        self._real = real

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


def _lazy_extra_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """`get_exec().mamba.enable_mamba_extra_buffer_lazy` on, for SGLang's component and the lease one."""
    bag = SimpleNamespace(mamba=_LazyMamba(get_exec().mamba))
    monkeypatch.setattr(sglang_mamba, "get_exec", lambda: bag)
    monkeypatch.setattr(lease_mamba, "get_exec", lambda: bag)


def _request_holding_a_cow_lock(setup: CacheSetup) -> tuple[Req, TreeLock]:
    """A running request whose lock (its copy-on-write source) sits on a cached state."""
    node = setup.cache.match_prefix(
        MatchPrefixParams(key=RadixKey(array("q", [1000 + t for t in range(16)])))
    ).last_device_node
    lock = setup.cache.lock(node)
    assert lock is not None
    req = SimpleNamespace(rid=97, lock=lock, kv=SimpleNamespace(mamba_pool_idx=None))
    return cast("Req", req), lock


def _mamba(setup: CacheSetup) -> MambaComponent:
    core = setup.cache.tree_core
    assert isinstance(core, UnifiedTreeCore)
    comp = core.components_by_type[ComponentType.MAMBA]
    assert isinstance(comp, MambaComponent)
    return comp


def test_stock_lazy_extra_buffer_allocation_asserts(monkeypatch: pytest.MonkeyPatch) -> None:
    setup, _locks, _taken = _pinned_states("python")
    _lazy_extra_buffer(monkeypatch)
    req, _lock = _request_holding_a_cow_lock(setup)
    with pytest.raises(AssertionError, match="Can not alloc mamba cache"):
        _mamba(setup)._alloc_mamba_slot(req)


def test_lease_lazy_extra_buffer_releases_the_mamba_part_then_raises_typed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SGLang's lazy release runs through the lease core (a derived receipt: the lock's Mamba part)."""
    setup, locks, taken = _pinned_states("leases")
    _lazy_extra_buffer(monkeypatch)
    cache = setup.cache
    core = cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    req, lock = _request_holding_a_cow_lock(setup)
    receipt = lock.receipt
    assert isinstance(receipt, LockReceipt)
    with pytest.raises(MambaSlotUnavailable, match="no Mamba slot"):
        _mamba(setup)._alloc_mamba_slot(req)
    assert receipt.released_early == {ComponentType.MAMBA} and ComponentType.MAMBA in receipt.skipped_lock_components
    assert core.tree_locks[receipt.lock_seq].held, "the KV part still holds the lease"
    cache.sanity_check()
    cache.unlock(lock)
    for node, other in locks:
        cache.dec_lock_ref(node, other)
    assert not core.tree_locks and core.lock_ledger.live_count == 0
    cache.sanity_check()
    assert int(core.mamba_states_not_cached) == 0 and taken

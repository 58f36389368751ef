"""Every pin of tree core "unicache" is a lease: receipts, sizes derived from leases, misuse refused first."""

from __future__ import annotations

from array import array

import pytest
import torch
from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, EvictParams, InsertParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType

from tests.integrations.sglang.treecore.inspector import InspectedUnicacheTreeCore
from unicache.integrations.sglang.treecore.core import LEASE_HISTORY_ENV, UnicacheTreeCore
from unicache.integrations.sglang.treecore.errors import (
    ForeignReceiptError,
    FullPinMissingError,
    MisdirectedReceiptError,
    SpentReceiptError,
    TreeCoreSanityError,
    UnknownNodeError,
)
from unicache.integrations.sglang.treecore.receipts import TreeReceipt
from unicache.integrations.sglang.workload import CacheSetup, build_cache


def _setup(policy: str = "write_back") -> tuple[CacheSetup, UnicacheTreeCore]:
    setup = build_cache(backend="unicache", mamba=False, device_tokens=64, policy=policy, max_context_len=64)
    core = setup.cache.tree_core
    assert isinstance(core, UnicacheTreeCore)
    return setup, core


def _insert(setup: CacheSetup, tokens: list[int]) -> int:
    value = setup.allocator.alloc(len(tokens))
    assert value is not None
    res = setup.cache.insert(InsertParams(key=RadixKey(array("q", tokens)), value=value))
    node: int = res.last_device_node
    return node


def _receipt(result: object) -> TreeReceipt:
    assert isinstance(result, TreeReceipt)
    return result


def _state(core: UnicacheTreeCore) -> tuple[int, int, int, int]:
    return core.evictable_size(), core.protected_size(), core.ledger.live_count, core.ledger.released


def test_a_lock_is_one_lease_and_the_sizes_follow_it() -> None:
    setup, core = _setup()
    a = _insert(setup, list(range(8)))
    b = _insert(setup, list(range(4)) + [90, 91])  # splits a at 4
    assert (core.evictable_size(), core.protected_size()) == (10, 0)
    receipt = _receipt(setup.cache.inc_lock_ref(b))
    assert receipt.to_dec_params() is receipt
    assert receipt.delta == 6 and (core.evictable_size(), core.protected_size()) == (4, 6)
    assert core.ledger.live_count == 1
    lease = core.device_locks[receipt.lease_id]
    parent = core.node(b).parent
    assert parent is not None
    assert lease.owner is receipt
    assert {id(p.holder) for p in lease.pin_sets()} == {id(core.node(b)), id(parent)}  # the path to the root
    assert core.device_lock_count(core.node(b)) == core.device_lock_count(parent) == 1
    setup.cache.dec_lock_ref(b, receipt)
    assert (core.evictable_size(), core.protected_size(), core.ledger.live_count) == (10, 0, 0)
    assert a in [x.id for x in core.nodes()]
    setup.cache.sanity_check()
    setup.cache.release_host_resources()


def test_spent_foreign_and_misdirected_receipts_raise_before_anything_changes() -> None:
    setup, core = _setup()
    a = _insert(setup, list(range(8)))
    b = _insert(setup, [50, 51, 52, 53])
    receipt = _receipt(setup.cache.inc_lock_ref(a))
    host = _receipt(setup.cache.inc_host_lock_ref(a))
    before = _state(core)
    with pytest.raises(ForeignReceiptError, match=rf"FULL device lock on node {a}: receipt .* not issued by this core"):
        setup.cache.dec_lock_ref(a, DecLockRefParams(node_id=a))
    other, other_core = _setup()
    foreign_node = _insert(other, list(range(8)))
    foreign = _receipt(other.cache.inc_lock_ref(foreign_node))
    with pytest.raises(ForeignReceiptError, match="issued by another tree core"):
        core.dec_lock_ref(foreign_node, foreign.to_dec_params())
    with pytest.raises(MisdirectedReceiptError, match=rf"on node {b}: the receipt is anchored on node {a}"):
        setup.cache.dec_lock_ref(b, receipt.to_dec_params())
    with pytest.raises(MisdirectedReceiptError, match="released as a device lock"):
        setup.cache.dec_lock_ref(a, host.to_dec_params())
    assert _state(core) == before
    setup.cache.dec_lock_ref(a, receipt.to_dec_params())
    after = _state(core)
    with pytest.raises(SpentReceiptError,
                       match=rf"FULL device lock #{receipt.lease_id} on node {a}: .*already released"):
        setup.cache.dec_lock_ref(a, receipt.to_dec_params())
    assert _state(core) == after
    setup.cache.dec_host_lock_ref(a, host.to_dec_params())
    with pytest.raises(SpentReceiptError):
        setup.cache.dec_host_lock_ref(a, host.to_dec_params())
    other.cache.dec_lock_ref(foreign_node, foreign.to_dec_params())
    assert core.ledger.live_count == 0 and other_core.ledger.live_count == 0
    for s in (setup, other):
        s.cache.release_host_resources()


def test_a_reset_revokes_every_lease_and_a_late_release_is_refused() -> None:
    setup, core = _setup()
    a = _insert(setup, list(range(8)))
    receipt = _receipt(setup.cache.inc_lock_ref(a))
    core.inc_full_pin(a)
    setup.cache.reset()
    assert core.ledger.live_count == 0 and core.ledger.revoked >= 2
    with pytest.raises(SpentReceiptError, match=rf"device lock #{receipt.lease_id} on node {a}: .*revoked by a reset"):
        setup.cache.dec_lock_ref(a, receipt.to_dec_params())
    with pytest.raises(UnknownNodeError, match=f"node {a} is not a live node"):
        core.dec_full_pin(a)
    root = core.root_node_handle()
    assert root != a and not core.is_backuped(root)
    with pytest.raises(FullPinMissingError, match=f"node {root}"):
        core.dec_full_pin(root)
    setup.cache.release_host_resources()


def test_full_pins_are_leases_on_a_stack_per_node() -> None:
    setup, core = _setup()
    a = _insert(setup, list(range(8)))
    core.inc_full_pin(a)
    core.inc_full_pin(a)
    assert core.protected_size() == 8 and core.ledger.live_count == 2
    setup.cache.evict_for_alloc(EvictParams(num_tokens=8))
    assert core.protected_size() == 8, "pinned values are never evicted"
    core.dec_full_pin(a)
    assert core.protected_size() == 8
    core.dec_full_pin(a)
    assert core.protected_size() == 0 and core.ledger.live_count == 0
    with pytest.raises(FullPinMissingError, match=f"node {a}"):
        core.dec_full_pin(a)
    setup.cache.release_host_resources()


def test_sanity_check_recomputes_sizes_from_values_and_leases() -> None:
    setup = build_cache(backend="unicache", mamba=False, device_tokens=64, max_context_len=64)
    core = setup.cache.tree_core
    assert isinstance(core, UnicacheTreeCore)
    a = _insert(setup, list(range(8)))
    setup.cache.sanity_check()
    inspected = InspectedUnicacheTreeCore.set_component_device_value_raw
    inspected(core, a, ComponentType.FULL, torch.arange(4))  # type: ignore[arg-type]
    with pytest.raises(TreeCoreSanityError, match=rf"node {a}: 4 device values for 8 tokens"):
        setup.cache.sanity_check()
    setup.cache.release_host_resources()


def test_the_flight_recorder_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    _, core = _setup()
    assert core.ledger.history == 0
    monkeypatch.setenv(LEASE_HISTORY_ENV, "64")
    setup, core = _setup()
    a = _insert(setup, list(range(8)))
    setup.cache.dec_lock_ref(a, setup.cache.inc_lock_ref(a).to_dec_params())
    assert core.ledger.history == 64
    kinds = [e.kind.name for e in core.ledger.events()]
    assert kinds[-2:] == ["ACQUIRE", "RELEASE"]
    monkeypatch.setenv(LEASE_HISTORY_ENV, "-1")
    with pytest.raises(ValueError, match=r"UNICACHE_SGLANG_LEASE_HISTORY='-1': must be an int >= 0"):
        _setup()
    setup.cache.release_host_resources()

"""Tree locks as leases: receipts backed by leases, counters a view recomputed from them.

On the real 0.5.23 cache (Full+Mamba chain root -> X -> D, and a Full+SWA
chain with window 8): every lock receipt is a `LockReceipt` with one lease
behind it, standing for SGLang's integer counters; `sanity_check` recomputes every
node's `lock_ref`/`host_lock_ref` from the live leases; a second release of
one receipt raises a typed error naming node and lock before any counter
moves.
"""

from __future__ import annotations

import dataclasses

import pytest
from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams
from sglang.srt.mem_cache.unified_cache.components import ComponentType

from tests.integrations.sglang.chains import (
    D,
    X,
    lease_core,
    lock_counters,
    node_of,
    swa_crash_shape,
    warm_chain,
)
from unicache.integrations.sglang.errors import (
    LeaseSanityError,
    LockReleasedTwiceError,
    UnleasedReceiptError,
    WindowLockHeldError,
)
from unicache.integrations.sglang.locks import LockReceipt

FULL = ComponentType.FULL


def test_lock_receipts_are_leases_and_counters_are_their_view() -> None:
    setup = warm_chain("leases")
    core, cache = lease_core(setup), setup.cache
    d, x = node_of(setup, D), node_of(setup, X)
    idle = lock_counters(core)
    dev = cache.inc_lock_ref(d).to_dec_params()
    host = cache.inc_host_lock_ref(x).to_dec_params()
    core.inc_full_pin(d)
    assert isinstance(dev, LockReceipt) and isinstance(host, LockReceipt)
    assert core.lock_ledger.live_count == 1 + 1 + 1, "one lease per receipt, one for the pin"
    assert core.tree_locks[dev.lock_seq].owner is dev and core.tree_locks[host.lock_seq].owner is host
    expected = core.expected_lock_refs()
    assert expected[(x, int(FULL), False)] == 2 and expected[(d, int(FULL), False)] == 2
    assert expected[(x, int(FULL), True)] == 1 and (d, int(FULL), True) not in expected
    cache.sanity_check()
    core.dec_full_pin(d)
    cache.dec_host_lock_ref(x, host)
    cache.dec_lock_ref(d, dev)
    assert lock_counters(core) == idle and core.lock_ledger.live_count == 0 and not core.tree_locks
    assert core.lock_ledger.released == core.lock_ledger.acquired
    cache.sanity_check()


def test_second_release_of_a_receipt_raises_naming_node_and_lock() -> None:
    setup = warm_chain("leases")
    core, cache = lease_core(setup), setup.cache
    d = node_of(setup, D)
    dev = cache.inc_lock_ref(d).to_dec_params()
    assert isinstance(dev, LockReceipt)
    cache.dec_lock_ref(d, dev)
    before = lock_counters(core)
    with pytest.raises(LockReleasedTwiceError, match=rf"lock #{dev.lock_seq} on node {d} released twice"):
        cache.dec_lock_ref(d, dev)
    assert lock_counters(core) == before, "no counter moved"
    host = cache.inc_host_lock_ref(d).to_dec_params()
    cache.dec_host_lock_ref(d, host)
    with pytest.raises(LockReleasedTwiceError, match=rf"host lock #\d+ on node {d}"):
        cache.dec_host_lock_ref(d, host)
    with pytest.raises(LockReleasedTwiceError, match=rf"Full pin .* on node {d}"):
        core.dec_full_pin(d)
    with pytest.raises(UnleasedReceiptError, match=rf"node {d}"):
        cache.dec_lock_ref(d, DecLockRefParams(node_id=d))
    assert lock_counters(core) == before
    cache.sanity_check()


def test_sanity_check_recomputes_lock_refs_from_live_leases() -> None:
    """A walk that moved a counter without a lease (simulated inside an open gate) is named."""
    setup = warm_chain("leases")
    core, cache = lease_core(setup), setup.cache
    d, x = node_of(setup, D), node_of(setup, X)
    dev = cache.inc_lock_ref(d).to_dec_params()
    cache.sanity_check()
    core.counter_gate.open += 1
    core.node_by_id(x).component_data[FULL].lock_ref += 1
    with pytest.raises(LeaseSanityError, match=rf"node {x} component 0: lock_ref 2, live lock leases say 1"):
        cache.sanity_check()
    core.node_by_id(x).component_data[FULL].lock_ref -= 1
    core.node_by_id(d).component_data[ComponentType.MAMBA].host_lock_ref += 1
    with pytest.raises(LeaseSanityError, match=rf"node {d} component 2: host_lock_ref 1, live lock leases say 0"):
        cache.sanity_check()
    core.node_by_id(d).component_data[ComponentType.MAMBA].host_lock_ref -= 1
    core.counter_gate.open -= 1
    cache.dec_lock_ref(d, dev)
    cache.sanity_check()


def test_a_partial_release_by_a_derived_receipt_is_a_lease_part() -> None:
    """SGLang's lazy Mamba extra buffer (0.5.23 components/mamba.py:539-548), replayed on the receipt."""
    setup = warm_chain("leases")
    core, cache = lease_core(setup), setup.cache
    d = node_of(setup, D)
    idle = lock_counters(core)
    lock = cache.inc_lock_ref(d).to_dec_params()
    assert isinstance(lock, LockReceipt)
    mamba_only = dataclasses.replace(lock, skipped_lock_components=(FULL,))
    cache.dec_lock_ref(d, mamba_only)
    lock.skipped_lock_components += (ComponentType.MAMBA,)
    assert lock.released_early == {ComponentType.MAMBA} and core.tree_locks[lock.lock_seq].held
    assert core.node_by_id(d).component_data[ComponentType.MAMBA].lock_ref == 0
    cache.sanity_check()
    with pytest.raises(LockReleasedTwiceError, match=rf"MAMBA part of lock #{lock.lock_seq} on node {d}"):
        cache.dec_lock_ref(d, mamba_only)
    cache.dec_lock_ref(d, lock)
    assert lock_counters(core) == idle and not core.tree_locks and core.lock_ledger.live_count == 0
    cache.sanity_check()


def test_swa_window_locks_and_early_release_are_leases() -> None:
    setup, (a, b) = swa_crash_shape("leases")
    core, cache = lease_core(setup), setup.cache
    assert core.tree_locks, "in-flight load-backs hold device and host window locks"
    cache.sanity_check()
    d = a[0]
    receipt = cache.inc_lock_ref(d).to_dec_params()
    assert isinstance(receipt, LockReceipt)
    lease = core.tree_locks[receipt.lock_seq]
    assert lease.owner is receipt and not receipt.released_early
    cache.sanity_check()
    with pytest.raises(WindowLockHeldError, match=rf"lock #{receipt.lock_seq} on node {d}"):
        cache.dec_lock_ref(d, receipt, skip_swa=True)
    core.dec_swa_lock_only(d, receipt)
    assert receipt.released_early == {ComponentType.SWA}, "the SWA part went back early"
    assert lease.held, "the Full part still holds the lease"
    cache.sanity_check()
    before = lock_counters(core)
    with pytest.raises(LockReleasedTwiceError, match=rf"SWA part of lock #{receipt.lock_seq} on node {d}"):
        core.dec_swa_lock_only(d, receipt)
    with pytest.raises(LockReleasedTwiceError, match=rf"SWA part of lock #{receipt.lock_seq} on node {d}"):
        cache.dec_lock_ref(d, receipt)
    assert lock_counters(core) == before, "no counter moved"
    cache.dec_lock_ref(d, receipt, skip_swa=True)
    assert core.lock_ledger.get(receipt.lock_seq) is None
    assert receipt.lock_seq not in core.tree_locks
    cache.sanity_check()
    cache.ready_to_load_host_cache()
    cache.loading_check()
    cache.sanity_check()
    assert not core.tree_locks and core.lock_ledger.live_count == 0

"""Lock receipts: what they lock, leaks, pin sets left empty."""

from __future__ import annotations

import pytest

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, dev_full_of, residency
from unicache import Full, Node


def test_lock_records_what_it_locked_and_split_keeps_pins(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=3, mamba=True)
    (a,) = chain(cache, d, SEQ[:8], [8])
    r = cache.lock(a)
    assert r.node is a and r.length == 8
    assert r.full is not None and r.swa is not None and r.mamba is not None
    assert d.serve(SEQ[:4] + [7, 7, 7, 7]) is not None  # splits the locked node at 4
    upper = a.parent
    assert upper is not None and upper.end == 4
    for pins, lease in ((residency(upper).full_pins, r.full), (residency(upper).swa_pins, r.swa)):
        assert pins is not None and lease in pins  # every fragment pinned by the same leases
    mpins = residency(upper).mamba_pins
    assert mpins is not None and r.mamba in mpins
    assert cache.sanity_check().ok
    assert cache.evict_device(Full, 100) == 4  # only the other branch can go
    assert dev_full_of(a) is not None and residency(upper).full_device is not None
    cache.unlock(r)
    for x in cache.nodes():
        assert not residency(x).pinned()
    d.assert_ok()


def test_lock_host_only_node_locks_device_part(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    cache.backup(b)
    d.settle()
    assert cache.evict_device(Full, 4) == 4
    r = cache.lock(b)
    assert r.node is a and r.length == 4
    cache.unlock(r)
    root_lock = cache.lock(cache.root)
    assert root_lock.length == 0 and root_lock.lease_ids() == []
    cache.unlock(root_lock)


@pytest.mark.expect_lease_leaks(2)
def test_dropped_receipt_is_a_leak_that_unpins(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.lock(a)  # lease: ignore[lease-discarded]  (dropped at once: its two leases leak)
    assert cache.ledger.leaked == 2 and not residency(a).pinned()
    assert cache.evict_device(Full, 4) == 4  # nothing left protecting it
    report = cache.sanity_check()
    assert report.ok, report.describe()
    assert cache.lease_coverage() == {}


def _pin_sets(node: Node) -> tuple[object, object, object]:
    return residency(node).full_pins, residency(node).swa_pins, residency(node).mamba_pins


def test_a_pin_set_left_empty_is_dropped(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    r1 = cache.lock(a)
    r2 = cache.lock(a)
    assert all(p is not None for p in _pin_sets(a))
    cache.unlock(r1)
    apins = residency(a).full_pins
    assert apins is not None and r2.full in apins and len(apins) == 1
    cache.unlock(r2)
    assert _pin_sets(a) == (None, None, None)
    d.assert_ok()

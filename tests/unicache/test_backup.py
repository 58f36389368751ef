"""Backups: write-through chains at the hit threshold, and state added to a backed node."""

from __future__ import annotations

import pytest

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, host_full_of, residency
from unicache import Full
from unicache.results import TicketStatus
from unicache.tree.pins import backup_in_flight


def test_write_through_backs_up_chain_at_threshold(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_through", write_through_threshold=2)
    res = d.compute(SEQ[:4])
    assert res is not None and cache.in_flight() == 0  # 1 hit < 2
    assert d.serve(SEQ[:8]) is not None  # [0,4) reaches 2 hits
    assert cache.in_flight() == 1
    d.settle()
    a = cache.match_prefix(SEQ[:4]).device_node
    assert host_full_of(a) is not None
    assert d.serve(SEQ[:8]) is not None  # [4,8) reaches 2 hits
    d.settle()
    b = cache.match_prefix(SEQ[:8]).device_node
    assert host_full_of(b) is not None and cache.counters.backups == 2
    d.assert_ok()


def test_write_through_backs_up_a_mamba_state_added_to_a_backed_node(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache(mamba=True, write_policy="write_through", write_through_threshold=1)
    res = d.compute(SEQ[:4], mamba=False)  # Full only: backed up at once
    assert res is not None and cache.in_flight() == 1
    d.settle()
    a = res.node
    assert host_full_of(a) is not None and (residency(a).mamba_device, residency(a).mamba_host) == (None, None)
    res2 = d.compute(SEQ[:4], 4)  # the same prefix again, now with its Mamba state
    assert res2 is not None and res2.node is a and residency(a).mamba_device is not None
    assert cache.in_flight() == 1 and cache.counters.aux_backups == 1
    assert residency(a).mamba_pins is not None and backup_in_flight(residency(a).mamba_pins)
    assert not backup_in_flight(residency(a).full_pins)  # Full is on host already: only the state moves
    d.settle()
    assert cache.node_info(a).components["Mamba"].host is not None
    assert cache.counters.backups == 2
    d.assert_ok()


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("outcome", ["ok", "failed", "stale"])
def test_a_backup_of_a_node_being_backed_up_joins_that_copy(
    make_cache: MakeCache, policy: str, outcome: str
) -> None:
    cache, d = make_cache(write_policy=policy, write_through_threshold=99)
    (a,) = chain(cache, d, SEQ[:8], [8])
    first = cache.backup(a)
    assert first is not None and d.engine.pending == 1
    host_used = cache.pools.host_pool(Full).alloc.used_count
    second = cache.backup(a)
    third = cache.backup(a)
    assert second is not None and third is not None and len({first, second, third}) == 3
    assert d.engine.pending == 1  # one job: no second copy of the bytes
    assert cache.pools.host_pool(Full).alloc.used_count == host_used  # no second set of host pages
    assert cache.counters.backup_joins == 2 and cache.counters.backups == 3
    assert [t.id for t in cache.live_tickets()] == [first, second, third]
    apins = residency(a).full_pins
    assert apins is not None and len(apins) == 3  # each holds its own lease
    d.assert_ok()
    if outcome == "stale":
        cache.reset()
    d.engine.complete(first, ok=outcome != "failed")
    want = {"ok": TicketStatus.DONE, "failed": TicketStatus.FAILED, "stale": TicketStatus.STALE}[outcome]
    got = {c.ticket: c.status for c in cache.poll()}
    assert got == {first: want, second: want, third: want}
    assert cache.ledger.live_count == 0 and cache.live_tickets() == []
    if outcome == "ok":
        assert host_full_of(a) is not None and cache.counters.backup_duplicate_pages == 0
    if outcome == "failed":
        assert cache.counters.backups_failed == 3
    d.assert_ok()

"""Load-back: refusal when the device is pinned full; joining a copy already in flight."""

from __future__ import annotations

import pytest

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, dev_full_of, host_only_node, residency
from unicache import SWA, Full, Mamba, TicketStatus, UniCache
from unicache.transfer.base import Ack, CopyOp, Tier


def test_load_back_refused_when_device_is_pinned_full(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8)
    a = host_only_node(cache, d, 4)
    assert d.serve([1, 2, 3, 4]) is not None
    other = cache.match_prefix([1, 2, 3, 4]).device_node
    r = cache.lock(other)
    mine = cache.alloc_device(Full, 4)
    assert mine is not None
    refused = cache.load_back(a)
    assert refused is None
    assert cache.counters.load_backs_refused == 1 and cache.ledger.live_count == 1
    cache.free_device(Full, mine)
    cache.unlock(r)
    t = cache.load_back(a)
    assert t is not None
    d.settle()
    t.result()
    d.assert_ok()


def _counting_copies(cache: UniCache) -> dict[str, int]:
    """Count the jobs and rows the pools actually copy (every engine copies through `PoolSet.copy`)."""
    moved = {"copies": 0, "rows": 0, "bytes": 0}
    real = cache.pools.copy

    def copy(op: CopyOp) -> None:
        moved["copies"] += 1
        moved["rows"] += len(op.src)
        src = cache.pools.read(op.component, op.src_tier, op.src)
        moved["bytes"] += src.numel() * src.element_size()
        real(op)

    cache.pools.copy = copy  # type: ignore[method-assign]
    return moved


@pytest.mark.parametrize("ok", [True, False])
def test_three_concurrent_load_backs_of_one_node_move_its_bytes_once(
    make_cache: MakeCache, ok: bool
) -> None:
    cache, d = make_cache(swa_window=4, mamba=True)
    a = host_only_node(cache, d, 8)
    host = residency(a).full_host
    assert residency(a).full_device is None and host is not None
    pages = len(host)
    used = {k: s.used for k, s in cache.pools.stats().items()}
    moved = _counting_copies(cache)
    first, second, third = (cache.load_back(a) for _ in range(3))
    assert first is not None and second is not None and third is not None
    tickets = [first, second, third]
    assert d.engine.held() == [first.id]  # one job; the others joined it
    assert cache.counters.load_back_joins == 2 and cache.counters.load_backs == 3
    grown = {k: s.used - used[k] for k, s in cache.pools.stats().items()}
    assert grown["full.device"] == pages and grown["swa.device"] == pages
    assert grown["mamba.device"] == 1
    for t in tickets:  # each holds its own leases over the node it reads
        assert t.full is not None and t.mamba is not None
        apins = residency(a).full_pins
        assert apins is not None and t.full in apins
    assert cache.sanity_check().ok, cache.sanity_check().describe()
    d.engine.complete(first.id, ok)
    done = cache.poll()
    assert sorted(c.ticket for c in done) == sorted(t.id for t in tickets)
    want = TicketStatus.DONE if ok else TicketStatus.FAILED
    assert [t.result().status for t in tickets] == [want] * 3
    assert cache.ledger.live_count == 0
    if ok:
        assert moved["copies"] == 3 and moved["rows"] == 2 * pages + 1
        row_bytes = sum(
            n * (row := cache.pools.read(c, Tier.DEVICE, [0])).numel() * row.element_size()
            for c, n in ((Full, pages), (SWA, pages), (Mamba, 1))
        )
        assert moved["bytes"] == row_bytes
        assert dev_full_of(a) is not None
        assert cache.counters.load_back_duplicate_pages == 0
    else:
        assert moved["copies"] == 0 and dev_full_of(a) is None
        assert cache.counters.load_backs_failed == 3
    assert {k: s.used for k, s in cache.pools.stats().items()} == {
        k: used[k] + (grown[k] if ok else 0) for k in used
    }
    assert cache.sanity_check().ok
    d.assert_ok()


def test_a_join_after_reset_is_settled_by_the_stale_ack(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    a = host_only_node(cache, d, 4)
    t1 = cache.load_back(a)
    t2 = cache.load_back(a)
    assert t1 is not None and t2 is not None and d.engine.held() == [t1.id]
    cache.reset()
    assert t1.status is TicketStatus.STALE and t2.status is TicketStatus.STALE
    assert cache.deliver(Ack(t2.id, t2.generation)) is None  # a joiner has no job of its own
    assert cache.counters.stale_acks == 1 and cache.pools.stats()["full.device"].quarantined
    d.engine.complete(t1.id)
    done = cache.poll()
    assert [(c.ticket, c.status) for c in done] == [
        (t1.id, TicketStatus.STALE), (t2.id, TicketStatus.STALE)
    ]
    assert all(s.quarantined == 0 for s in cache.pools.stats().values())
    t1.result()
    t2.abandon()
    assert cache.ledger.live_count == 0 and cache.sanity_check().ok


def test_a_load_back_needing_more_than_the_copy_in_flight_does_not_join(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache()
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    cache.backup(b)
    d.settle()
    cache.evict_device(Full, 8)
    assert residency(a).full_device is None and residency(b).full_device is None
    t1 = cache.load_back(a)
    t2 = cache.load_back(b)  # needs b too, which t1's copy does not move
    assert t1 is not None and t2 is not None and d.engine.held() == [t1.id, t2.id]
    assert cache.counters.load_back_joins == 0
    d.settle()
    assert t1.result().ok and t2.result().ok
    assert cache.counters.load_back_duplicate_pages == 4  # a's pages arrived twice, one set freed
    assert cache.sanity_check().ok
    d.assert_ok()

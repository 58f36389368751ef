"""Every refusal, skip and no-op the cache produces carries a typed `Reason`, counted per component."""

from __future__ import annotations

from leases import EventKind
from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, host_only_node, residency
from unicache import SWA, Full, Mamba, UniCache
from unicache.reasons import Reason, ReasonKind


def _last(cache: UniCache) -> Reason:
    r = cache.reasons.last
    assert r is not None
    return r


def test_load_back_of_the_root_is_a_root_no_op(make_cache: MakeCache) -> None:
    cache, _ = make_cache()
    cache.reasons.mark()
    refused = cache.load_back(cache.root)
    assert refused is None
    r = _last(cache)
    assert (r.op, r.kind, r.nodes) == ("load_back", ReasonKind.ROOT, (cache.root.id,))
    assert cache.counters.load_backs_noop == 1 and cache.reasons.counts() == {"load_back:root": 1}


def test_load_back_of_a_device_node_has_nothing_to_move(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    refused = cache.load_back(a)
    assert refused is None
    r = _last(cache)
    assert (r.kind, r.component, r.nodes) == (ReasonKind.NOTHING_TO_MOVE, None, (a.id,))
    assert "nothing to move" in r.summary and cache.counters.load_backs_noop == 1


def test_load_back_without_mamba_state_names_missing_mamba_not_room(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    res = d.compute(SEQ[:4], mamba=False)
    assert res is not None
    a = res.node
    cache.backup(a)
    d.settle()
    cache.evict_device(Full, 64)
    assert residency(a).full_device is None and cache.pools.stats()["full.device"].free == 64
    refused = cache.load_back(a)
    assert refused is None
    r = _last(cache)
    assert (r.op, r.kind, r.component, r.nodes) == ("load_back", ReasonKind.MISSING_STATE, "mamba", (a.id,))
    assert "room" not in r.summary and "no mamba data" in r.summary
    assert cache.counters.load_backs_refused == 1
    assert cache.reasons.counts() == {"load_back:missing_state:mamba": 1}
    assert cache.ledger.live_count == 0


def test_load_back_without_swa_window_names_the_nodes_missing_swa(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    cache.backup(b)
    d.settle()
    cache.evict_device(Full, 64)
    cache.evict_host(SWA, 64)
    assert residency(a).swa_host is None and residency(b).swa_host is None
    refused = cache.load_back(b)
    assert refused is None
    r = _last(cache)
    assert (r.kind, r.component) == (ReasonKind.MISSING_STATE, "swa") and b.id in r.nodes
    assert cache.ledger.live_count == 0


def test_load_back_without_device_room_names_the_component_that_failed(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8)
    a = host_only_node(cache, d, 4)
    mine = cache.alloc_device(Full, 6)
    assert mine is not None
    refused = cache.load_back(a)
    assert refused is None
    r = _last(cache)
    assert (r.kind, r.component, r.nodes, r.needed, r.free) == (ReasonKind.NO_DEVICE_ROOM, "full", (a.id,), 4, 2)
    assert "2 free of 4 needed" in r.summary
    assert cache.counters.load_backs_refused == 1 and cache.ledger.live_count == 0
    cache.free_device(Full, mine)


def test_no_room_names_in_flight_tickets_and_quarantine(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    cache.backup(b)
    d.settle()
    cache.evict_device(Full, 8)
    t = cache.load_back(a)
    assert t is not None
    assert cache.alloc_device(Full, 6) is None
    r = _last(cache)
    assert (r.op, r.tickets, r.free, r.quarantined) == ("alloc_device", (t.id,), 4, 0)
    assert f"in-flight copies of T{t.id}" in r.summary
    cache.reset()
    assert cache.alloc_device(Full, 8) is None
    r = _last(cache)
    assert (r.tickets, r.quarantined, r.free) == ((), 4, 4)
    assert "4 quarantined until stale acks" in r.summary
    d.settle()
    assert not t.result().ok
    got = cache.alloc_device(Full, 8)
    assert got is not None
    cache.free_device(Full, got)


def test_load_back_without_a_mamba_slot_names_mamba(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, mamba_device_slots=1)
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.backup(a)
    d.settle()
    cache.evict_device(Full, 64)
    assert residency(a).mamba_device is None and residency(a).mamba_host is not None
    mine = cache.alloc_device(Mamba, 1)
    assert mine is not None
    refused = cache.load_back(a)
    assert refused is None
    r = _last(cache)
    assert (r.kind, r.component, r.needed, r.free) == (ReasonKind.NO_DEVICE_ROOM, "mamba", 1, 0)
    assert cache.pools.stats()["full.device"].used == 0 and cache.ledger.live_count == 0
    cache.free_device(Mamba, mine)


def test_alloc_device_refusals_are_counted_per_component(make_cache: MakeCache) -> None:
    cache, _ = make_cache(device_tokens=4, mamba=True, mamba_device_slots=1, swa_window=2)
    assert cache.alloc_device(Full, 5) is None
    assert (_last(cache).component, _last(cache).needed) == ("full", 5)
    assert cache.alloc_device(SWA, 5) is None
    assert _last(cache).component == "swa"
    held = cache.alloc_device(Mamba, 1)
    assert held is not None and cache.alloc_device(Mamba, 1) is None
    r = _last(cache)
    assert (r.op, r.kind, r.component, r.free) == ("alloc_device", ReasonKind.NO_DEVICE_ROOM, "mamba", 0)
    c = cache.counters
    assert (c.alloc_refused_full, c.alloc_refused_swa, c.alloc_refused_mamba, c.mamba_skipped) == (1, 1, 1, 1)
    assert cache.reasons.counts() == {
        "alloc_device:no_device_room:full": 1,
        "alloc_device:no_device_room:mamba": 1,
        "alloc_device:no_device_room:swa": 1,
    }
    cache.free_device(Mamba, held)


def test_lock_of_a_host_only_path_notes_host_only(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.backup(a)
    d.settle()
    cache.evict_device(Full, 64)
    r = cache.lock(a)
    assert r.length == 0
    why = _last(cache)
    assert (why.op, why.kind, why.nodes) == ("lock", ReasonKind.HOST_ONLY, (a.id,))
    cache.unlock(r)
    cache.unlock(cache.lock(cache.root))
    assert _last(cache).kind is ReasonKind.ROOT


def test_pinned_eviction_and_reclaim_name_the_leases(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8)
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.backup(a)
    d.settle()
    r = cache.lock(a)
    assert r.full is not None
    mark = cache.reasons.mark()
    assert cache.evict_device(Full, 4) == 0
    pinned = cache.reasons.since(mark)
    assert pinned and all(p.kind is ReasonKind.PINNED and p.op == "evict" for p in pinned)
    assert pinned[0].nodes == (a.id,) and pinned[0].leases == (r.full.id,) and pinned[0].component == "full"
    mark = cache.reasons.mark()
    assert cache.reclaim_host_duplicates(4) == 0
    why = cache.reasons.since(mark)
    assert [(w.op, w.nodes, w.leases) for w in why] == [("reclaim", (a.id,), (r.full.id,))]
    assert cache.counters.reclaim_blocked == 1
    cache.unlock(r)


def test_insert_mamba_duplicate_and_skip_are_noted(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, mamba_device_slots=2)
    assert d.compute(SEQ[:4]) is not None
    res = d.compute(SEQ[:4])
    assert res is not None and res.mamba == "duplicate"
    r = _last(cache)
    assert (r.op, r.kind, r.component, r.nodes) == ("insert", ReasonKind.DUPLICATE, "mamba", (res.node.id,))
    assert cache.counters.mamba_duplicates == 1
    m = cache.match_prefix(SEQ[:4])
    lock = cache.lock(m.device_node)
    mine = cache.alloc_device(Mamba, 1)
    assert mine is not None
    assert d.compute(SEQ[:8], 4, mamba=False) is not None
    fs = cache.alloc_device(Full, 1)
    assert fs is not None
    cache.write_slots(Full, fs, d.oracle.full(SEQ[:9], 8, 9))
    cache.write_slots(Mamba, mine, d.oracle.state(SEQ[:9]))
    out = cache.insert(SEQ[:9], fs, start=8, mamba_slot=mine[0], mamba_donate=False)
    assert out.mamba == "skipped" and cache.counters.mamba_skipped == 1
    r = _last(cache)
    assert (r.op, r.kind, r.component, r.nodes) == ("insert", ReasonKind.NO_DEVICE_ROOM, "mamba", (out.node.id,))
    cache.free_device(Mamba, mine)
    cache.unlock(lock)


def test_duplicate_mamba_and_swa_of_a_load_back_are_counted(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.backup(a)
    d.settle()
    cache.evict_device(Full, 64)
    t = cache.load_back(a)
    assert t is not None and t.mamba_moved and t.swa_tokens == 4
    res = d.compute(SEQ[:4])  # the request recomputed it while the copy was in flight
    assert res is not None and res.node is a and residency(a).mamba_device is not None
    d.settle()
    assert t.result().ok
    c = cache.counters
    assert c.load_back_duplicate_pages == 4 and c.load_back_duplicate_swa_pages == 4
    assert c.load_back_duplicate_mamba == 1 and c.mamba_duplicates == 1
    d.assert_ok()


def test_every_ack_is_recorded_with_its_own_generation(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    t1 = cache.backup(a)
    assert t1 is not None
    ack = d.engine.complete(t1)
    cache.poll()
    cache.deliver(ack)  # again: a duplicate
    r = _last(cache)
    assert (r.kind, r.tickets, r.generation, r.nodes) == (ReasonKind.DUPLICATE_ACK, (t1,), 0, (a.id,))
    (a2,) = chain(cache, d, SEQ[4:8], [4])
    t2 = cache.backup(a2)
    assert t2 is not None
    failed = d.engine.complete(t2, ok=False, detail="dma error")
    cache.poll()
    t3 = cache.backup(a2)
    assert t3 is not None
    cache.reset()
    stale = d.engine.complete(t3)
    cache.poll()
    r = _last(cache)
    assert (r.kind, r.tickets, r.generation, r.nodes) == (ReasonKind.STALE_ACK, (t3,), 0, (a2.id,))
    assert cache.ledger.epoch == 1
    cache.deliver(ack)  # t1's ack once more, now from an older epoch: stale, named by its settled node
    r = _last(cache)
    assert (r.kind, r.tickets, r.generation, r.nodes) == (ReasonKind.STALE_ACK, (t1,), 0, (a.id,))
    acks = [e for e in cache.ledger.events() if e.kind in
            (EventKind.ACK, EventKind.FAILED_TRANSFER, EventKind.DUPLICATE_ACK, EventKind.STALE_ACK)]
    got = [(e.kind, e.ticket, e.generation, e.nodes) for e in acks]
    assert got == [
        (EventKind.ACK, t1, 0, (a.id,)),
        (EventKind.DUPLICATE_ACK, t1, ack.generation, (a.id,)),
        (EventKind.FAILED_TRANSFER, t2, failed.generation, (a2.id,)),
        (EventKind.STALE_ACK, t3, stale.generation, (a2.id,)),
        (EventKind.STALE_ACK, t1, ack.generation, (a.id,)),
    ]
    assert cache.counters.duplicate_acks == 1 and cache.counters.stale_acks == 2


def test_lease_events_carry_their_ticket(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    (a,) = chain(cache, d, SEQ[:4], [4])
    r = cache.lock(a)
    tid = cache.backup(a)
    assert tid is not None and r.full is not None
    lock_lease = r.full.id
    d.settle()
    cache.unlock(r)
    events = [e for e in cache.ledger.events() if e.kind in (EventKind.ACQUIRE, EventKind.RELEASE)]
    lock_events = [e for e in events if e.lease_id == lock_lease]
    backup_events = [e for e in events if e.owner is not None and e.owner.startswith("backup#")]
    assert lock_events and all(e.ticket is None for e in lock_events)
    assert backup_events and all(e.ticket == tid for e in backup_events)

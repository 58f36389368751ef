"""The issue's scenarios 1-8: each is a state a single-pin-id design cannot represent or survive."""

from __future__ import annotations

import gc

import pytest

from leases import DoubleReleaseError, ForeignLeaseError
from tests.unicache.conftest import MakeCache
from tests.unicache.support import Driver, chain, residency
from unicache import (
    SWA,
    Ack,
    DoubleFreeError,
    ForeignObjectError,
    Full,
    InvalidSlotError,
    LoadBackTicket,
    Mamba,
    Node,
    TicketPendingError,
    TicketStatus,
    UniCache,
    UnknownTicketError,
)

SEQ = list(range(100, 116))
CUTS = [4, 8, 12, 16]


def _back_up_all(cache: UniCache, driver: Driver, nodes: list[Node]) -> None:
    for x in nodes:
        cache.backup(x)
    driver.settle()
    for x in nodes:
        assert residency(x).full_host is not None


def _pins(node: Node) -> dict[str, list[int]]:
    r = residency(node)
    return {
        name: pins.ids() if pins is not None else []
        for name, pins in (("Full", r.full_pins), ("SWA", r.swa_pins), ("Mamba", r.mamba_pins))
    }


def _drained(cache: UniCache) -> None:
    assert cache.ledger.live() == []
    for x in cache.nodes():
        assert _pins(x) == {"Full": [], "SWA": [], "Mamba": []}, x


def _host_full(node: Node) -> list[int] | None:
    """Re-read an attribute the type checker narrowed earlier in the test."""
    return residency(node).full_host


def _result(t: LoadBackTicket) -> TicketStatus:
    return t.result().status


# ---------------------------------------------------------------- scenario 1


@pytest.mark.parametrize("ack_order", ["leaf_first", "ancestor_first"])
@pytest.mark.parametrize("shape", ["ancestor_device_mamba_host", "all_evicted"])
def test_scenario1_full_mamba_multipin(make_cache: MakeCache, ack_order: str, shape: str) -> None:
    cache, d = make_cache(mamba=True, mamba_device_slots=8)
    n1, n2, n3, n4 = chain(cache, d, SEQ, CUTS)
    _back_up_all(cache, d, [n1, n2, n3, n4])
    if shape == "all_evicted":
        assert cache.evict_device(Full, 16) == 16
    else:
        cache.match_prefix(SEQ[:8])  # n1, n2 newer than n3, n4
        assert cache.evict_device(Full, 8) == 8  # n4 then n3
        cache.match_prefix(SEQ[:4])  # n1 newer than n2
        assert cache.evict_device(Mamba, 1) == 1  # n2's state: host-only now
        assert residency(n2).full_device is not None and residency(n2).mamba_device is None and residency(n2).mamba_host is not None
    d.assert_ok()

    leaf = cache.load_back(n4)  # ack withheld
    assert leaf is not None
    m = cache.match_prefix(SEQ[:8])
    assert m.anchor is n2 and m.mamba_host
    anc = cache.load_back(n2)  # the production crash: n2 already pinned by the leaf's load-back
    assert anc is not None
    pins = _pins(n2)
    assert leaf.full is not None and leaf.full.id in pins["Full"]
    assert anc.mamba is not None and anc.mamba.id in pins["Mamba"]
    if shape == "all_evicted":
        assert anc.full is not None and anc.full.id in pins["Full"]
        assert len(pins["Full"]) == 2
    else:
        assert anc.full is None  # Full already on device: only the Mamba state moves
    assert cache.sanity_check().ok, cache.sanity_check().describe()

    order = [leaf.id, anc.id] if ack_order == "leaf_first" else [anc.id, leaf.id]
    for tid in order:
        d.engine.complete(tid)
        done = cache.poll()
        assert [c.ticket for c in done] == [tid]
        assert cache.sanity_check().ok, cache.sanity_check().describe()
    assert _result(leaf) is TicketStatus.DONE and _result(anc) is TicketStatus.DONE
    _drained(cache)
    m = cache.match_prefix(SEQ)
    assert m.device_len == 16 and not m.needs_load_back
    assert residency(n2).mamba_device is not None and residency(n4).mamba_device is not None
    d.assert_ok()


# ---------------------------------------------------------------- scenario 2


@pytest.mark.parametrize("ack_order", [0, 1])
def test_scenario2_full_swa_window_overlap(make_cache: MakeCache, ack_order: int) -> None:
    cache, d = make_cache(swa_window=4)
    n1, n2, n3, n4 = chain(cache, d, SEQ, CUTS)
    _back_up_all(cache, d, [n1, n2, n3, n4])
    cache.match_prefix(SEQ[:8])
    assert cache.evict_device(Full, 8) == 8  # n4, n3 demoted (their SWA too)
    cache.match_prefix(SEQ[:4])
    assert cache.evict_device(SWA, 4) == 4  # n2's SWA -> host only
    assert residency(n2).full_device is not None and residency(n2).swa_device is None and residency(n2).swa_host is not None
    d.assert_ok()

    a = cache.load_back(n4)  # Full chain n3..n4 (+ n2 as its device boundary), window n4
    assert a is not None and a.full is not None and a.swa is not None
    b = cache.load_back(n2)  # window of n2 = n2 itself, SWA host-only
    assert b is not None and b.swa is not None and b.full is None
    pins = _pins(n2)
    assert a.full.id in pins["Full"] and b.swa.id in pins["SWA"]
    assert a.swa.id not in pins["SWA"]  # n2 is outside a's window
    assert cache.sanity_check().ok

    for tid in ([a.id, b.id] if ack_order == 0 else [b.id, a.id]):
        d.engine.complete(tid)
        cache.poll()
        assert cache.sanity_check().ok
    assert _result(a) is TicketStatus.DONE and _result(b) is TicketStatus.DONE
    _drained(cache)
    assert cache.match_prefix(SEQ).device_len == 16
    assert cache.match_prefix(SEQ[:8]).device_len == 8
    d.assert_ok()


# ---------------------------------------------------------------- scenario 3


def test_scenario3_same_anchor_twice_then_reset_stale_acks(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, mamba_device_slots=8, device_tokens=48)
    nodes = chain(cache, d, SEQ, CUTS)
    _back_up_all(cache, d, nodes)
    assert cache.evict_device(Full, 16) == 16
    leaf = nodes[-1]
    t1 = cache.load_back(leaf)
    t2 = cache.load_back(leaf)
    assert t1 is not None and t2 is not None and t1.id != t2.id
    assert t1.full is not None and t2.full is not None
    assert set(_pins(leaf)["Full"]) == {t1.full.id, t2.full.id}
    assert set(_pins(leaf)["Mamba"]) == {t1.mamba.id, t2.mamba.id}  # type: ignore[union-attr]
    assert cache.sanity_check().ok
    old_gen = t1.generation

    epoch = cache.reset()
    assert epoch == old_gen + 1
    assert t1.status is TicketStatus.STALE and t2.status is TicketStatus.STALE
    assert cache.ledger.live() == []
    q_before = {k: v.quarantined for k, v in cache.pools.stats().items()}
    # t2 joined t1's copy: one destination, one source read, both quarantined once.
    assert cache.counters.load_back_joins == 1
    assert q_before["full.device"] == 16 and q_before["full.host"] == 16
    d.assert_ok()

    # New epoch: fresh data, and a newer load-back in flight with its own leases.
    other = [7, 8, 9, 10, 11, 12, 13, 14]
    assert d.serve(other) is not None
    onode = cache.match_prefix(other).anchor
    assert cache.backup(onode) is not None
    d.engine.complete(d.engine.held()[-1])
    cache.poll()
    assert cache.evict_device(Full, 8) == 8
    t3 = cache.load_back(onode)
    assert t3 is not None and t3.generation == epoch
    live_before = {lease.id for lease in cache.ledger.live()}

    # The delayed ack of t1 (copy performed now, into quarantined slots) is stale;
    # it settles t2, which rode on the same copy, too.
    d.engine.complete(t1.id)
    done = cache.poll()
    assert [(c.ticket, c.status) for c in done] == [
        (t1.id, TicketStatus.STALE), (t2.id, TicketStatus.STALE)
    ]
    assert cache.counters.stale_acks == 1
    assert {lease.id for lease in cache.ledger.live()} == live_before  # nothing newer released
    assert t3.full is not None and t3.full.held
    assert all(s.quarantined == 0 for s in cache.pools.stats().values())
    assert cache.sanity_check().ok, cache.sanity_check().describe()
    d.assert_ok()

    # A duplicate of the same stale ack: counted, changes nothing.
    assert cache.deliver(Ack(t1.id, old_gen)) is None
    assert cache.counters.stale_acks == 2
    assert _result(t1) is TicketStatus.STALE and _result(t2) is TicketStatus.STALE
    assert cache.ledger.stale >= 4  # the revoked leases of t1 and t2 settled as stale
    d.engine.complete(t3.id)
    cache.poll()
    assert _result(t3) is TicketStatus.DONE
    _drained(cache)
    d.assert_ok()


# ---------------------------------------------------------------- scenario 4


def test_scenario4_reclaim_blocked_by_full_lease_only_until_ack(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back", device_tokens=32)
    n1, n2 = chain(cache, d, SEQ[:8], [4, 8])
    _back_up_all(cache, d, [n1, n2])
    assert cache.evict_device(Full, 8) == 8
    t = cache.load_back(n2)  # reads n1, n2 host pages; in flight
    assert t is not None and t.full is not None
    assert d.compute(SEQ[:4]) is not None  # recompute n1: device + host, still read by t
    n1_host = residency(n1).full_host
    assert residency(n1).full_device is not None and n1_host is not None
    n1_pages = list(n1_host)
    assert cache.reclaim_host_duplicates(100) == 0
    assert residency(n1).full_host == n1_pages
    assert cache.counters.reclaim_blocked >= 1
    assert cache.evict_host(Full, 100) == 0  # host pressure cannot take them either
    d.engine.complete(t.id)  # the copy reads n1's host pages now
    cache.poll()
    assert _result(t) is TicketStatus.DONE
    d.assert_ok()
    assert cache.reclaim_host_duplicates(100) == 8  # the ack settled: both reclaimable
    assert _host_full(n1) is None and _host_full(n2) is None
    d.assert_ok()


@pytest.mark.parametrize("moving", ["mamba", "swa", "both"])
def test_scenario4_reclaim_not_blocked_by_aux_leases(make_cache: MakeCache, moving: str) -> None:
    cache, d = make_cache(write_policy="write_back", swa_window=4, mamba=True)
    (y,) = chain(cache, d, SEQ[:8], [8])
    _back_up_all(cache, d, [y])
    if moving in ("mamba", "both"):
        assert cache.evict_device(Mamba, 1) == 1
    if moving in ("swa", "both"):
        assert cache.evict_device(SWA, 8) == 8  # cascades to Mamba on the node
    assert residency(y).full_device is not None and residency(y).full_host is not None
    t = cache.load_back(y)
    assert t is not None and t.full is None
    assert (t.mamba is not None) and ((t.swa is not None) == (moving != "mamba"))
    assert cache.reclaim_host_duplicates(100) == 8  # only Full pins matter
    assert _host_full(y) is None
    assert residency(y).mamba_host is not None and residency(y).swa_host is not None  # aux host copies kept
    d.engine.complete(t.id)
    cache.poll()
    assert _result(t) is TicketStatus.DONE
    assert cache.match_prefix(SEQ[:8]).device_len == 8
    d.assert_ok()


# ---------------------------------------------------------------- scenario 5


@pytest.mark.parametrize("config", ["full", "full+swa+mamba"])
def test_scenario5_eviction_for_load_back_spares_its_sources_and_path(
    make_cache: MakeCache, config: str
) -> None:
    kw: dict[str, object] = {"device_tokens": 16, "host_tokens": 64}
    if config != "full":
        kw.update(swa_window=8, mamba=True, mamba_device_slots=3)
    cache, d = make_cache(**kw)
    p, ch = chain(cache, d, SEQ[:8], [4, 8])
    _back_up_all(cache, d, [p, ch])
    cache.match_prefix(SEQ[:4])
    assert cache.evict_device(Full, 4) == 4  # ch demoted: p is now the only, oldest, D-leaf
    others = [[50 + i, 60 + i, 70 + i, 80 + i] for i in range(3)]
    for o in others:
        assert d.serve(o) is not None  # newer than p; device now full (16 tokens)
    assert cache.pools.stats()["full.device"].free == 0
    t = cache.load_back(ch)
    assert t is not None and t.full is not None
    assert residency(p).full_device is not None  # the anchor path survived the allocation
    assert t.full in residency(p).full_pins  # type: ignore[operator]
    if config != "full":
        assert residency(p).swa_device is not None  # a window node on device, pinned by the SWA lease
    src = list(residency(ch).full_host or [])
    cache.evict_host(Full, 1000)  # host pressure: the other (demoted) requests may go ...
    assert ch.alive and residency(ch).full_host == src  # ... but never what the load-back reads
    d.engine.complete(t.id)
    cache.poll()
    assert _result(t) is TicketStatus.DONE
    m = cache.match_prefix(SEQ[:8])
    assert m.device_len == 8
    d.assert_ok()


# ---------------------------------------------------------------- scenario 6


def test_scenario6_all_cached_mamba_pinned_skips_donation(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, mamba_device_slots=2)
    assert d.compute(SEQ[:4]) is not None
    m = cache.match_prefix(SEQ[:4])
    r = cache.lock(m.device_node)  # a running request pins the only cached state
    assert r.mamba is not None
    mine = cache.alloc_device(Mamba, 1)  # the running request's own state slot
    assert mine is not None and cache.pools.stats()["mamba.device"].free == 0
    res = d.compute(SEQ[:8], 4, mamba=False)
    assert res is not None
    fs = cache.alloc_device(Full, 1)
    assert fs is not None
    cache.write_slots(Full, fs, d.oracle.full(SEQ[:9], 8, 9))
    cache.write_slots(Mamba, mine, d.oracle.state(SEQ[:9]))
    out = cache.insert(SEQ[:9], fs, start=8, mamba_slot=mine[0], mamba_donate=False)
    assert out.mamba == "skipped" and out.new_tokens == 1
    assert cache.counters.mamba_skipped == 1
    assert residency(out.node).mamba_device is None and residency(out.node).full_device is not None
    cache.free_device(Mamba, mine)
    cache.unlock(r)
    d.assert_ok()


# ---------------------------------------------------------------- scenario 7


def test_scenario7_abort_while_in_flight_settles_at_completion(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4, mamba=True)
    nodes = chain(cache, d, SEQ, CUTS)
    _back_up_all(cache, d, nodes)
    assert cache.evict_device(Full, 16) == 16
    t = cache.load_back(nodes[-1])
    assert t is not None
    tid = t.id
    lease_ids = set(t.lease_ids().values())
    assert len(lease_ids) == 3
    t.abandon()
    del t
    gc.collect()
    assert {lease.id for lease in cache.ledger.live()} == lease_ids  # still held by the cache
    assert cache.evict_host(Full, 1000) == 0
    assert cache.sanity_check().ok
    d.engine.complete(tid)
    done = cache.poll()
    assert [c.status for c in done] == [TicketStatus.DONE]
    assert cache.ledger.leaked == 0
    _drained(cache)
    d.assert_ok()


def test_scenario7_abort_then_reset_then_stale_ack(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    nodes = chain(cache, d, SEQ[:8], [4, 8])
    _back_up_all(cache, d, nodes)
    cache.evict_device(Full, 8)
    t = cache.load_back(nodes[-1])
    assert t is not None
    tid, gen = t.id, t.generation
    t.abandon()
    del t
    cache.reset()
    gc.collect()
    assert cache.ledger.leaked == 0
    d.engine.complete(tid)
    done = cache.poll()
    assert [(c.ticket, c.generation, c.status) for c in done] == [(tid, gen, TicketStatus.STALE)]
    assert all(s.quarantined == 0 and s.used == 0 for s in cache.pools.stats().values())
    d.assert_ok()


# ---------------------------------------------------------------- scenario 8


def test_scenario8_misuse_raises_typed_errors_and_state_stays_sane(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    other, d2 = make_cache(mamba=True, ledger_name="other")
    nodes = chain(cache, d, SEQ[:8], [4, 8])
    leaf = nodes[-1]

    r = cache.lock(leaf)
    cache.unlock(r)
    with pytest.raises(DoubleReleaseError):
        cache.unlock(r)  # lease: ignore[lease-use-after-move]
    assert cache.sanity_check().ok

    r2 = cache.lock(leaf)
    r2_id, r2_full = r2.id, r2.full
    assert r2_full is not None
    with pytest.raises(ForeignLeaseError):
        other.ledger.settle(r2_full)  # lease: ignore[lease-escape]  # a foreign settle of a view, refused on purpose
    with pytest.raises(ForeignObjectError) as foreign:
        other.unlock(r2)
    assert foreign.value.object_id == r2_id and r2_full.held
    assert "'unicache'" in str(foreign.value) and "'other'" in str(foreign.value)
    cache.unlock(r2)  # lease: ignore[lease-use-after-move]
    with pytest.raises(ForeignObjectError):
        other.load_back(leaf)  # lease: ignore[lease-discarded]
    with pytest.raises(ForeignObjectError):
        other.lock(leaf)  # lease: ignore[lease-discarded]

    _back_up_all(cache, d, nodes)
    cache.evict_device(Full, 8)
    t = cache.load_back(leaf)
    assert t is not None
    tid, tgen = t.id, t.generation
    with pytest.raises(TicketPendingError) as pending:
        t.result()
    assert pending.value.ticket_id == tid
    d.settle()
    assert t.result().ok  # lease: ignore[lease-double-release]
    with pytest.raises(DoubleReleaseError):
        t.result()  # lease: ignore[lease-double-release]
    assert cache.deliver(Ack(tid, tgen)) is None  # a duplicate ack is counted, not fatal
    assert cache.counters.duplicate_acks == 1

    with pytest.raises(UnknownTicketError) as unknown:
        cache.deliver(Ack(999, 0))
    assert unknown.value.ticket_id == 999
    with pytest.raises(UnknownTicketError):
        cache.deliver(Ack(tid, cache.epoch + 1))

    lease = cache.ledger.acquire(Full, owner="test")
    lease.release()
    with pytest.raises(DoubleReleaseError):
        lease.release()  # lease: ignore[lease-double-release]

    mine = cache.alloc_device(Full, 2)
    assert mine is not None
    cache.free_device(Full, mine)
    with pytest.raises(DoubleFreeError):
        cache.free_device(Full, mine)
    with pytest.raises(InvalidSlotError):
        cache.insert(SEQ[:2], residency(leaf).full_device[:2])  # type: ignore[index]
    before = cache.pools.stats()
    leaf_pages = residency(leaf).full_device
    assert leaf_pages is not None
    with pytest.raises(InvalidSlotError):
        cache.free_device(Full, leaf_pages[:1])  # tree-owned, not the caller's
    assert cache.pools.stats() == before
    report = cache.sanity_check()
    assert report.ok, report.describe()
    d.assert_ok()
    d2.assert_ok()


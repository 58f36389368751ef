"""`UniCache.time_out`: giving up on an overdue ticket; its slots stay quarantined until the late ack."""

from __future__ import annotations

import threading

import pytest

from leases import WrongThreadError
from tests.unicache.conftest import MakeCache
from tests.unicache.snapshot import CacheSnapshot
from tests.unicache.support import SEQ, chain, dev_full_of, host_full_of, host_only_node
from unicache import (
    Full,
    InvalidArgumentError,
    JobKind,
    TicketNotLiveError,
    TicketStatus,
    UnknownTicketError,
)
from unicache.transfer.base import Ack


def test_a_timed_out_load_back_releases_its_leases_and_quarantines_its_rows(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4, mamba=True)
    a = host_only_node(cache, d, 8)
    t1 = cache.load_back(a)
    t2 = cache.load_back(a)
    assert t1 is not None and t2 is not None and t2.joined == t1.id
    job = d.engine.jobs[t1.id]
    out = cache.time_out(t1.id)
    assert (out.ticket, out.kind, out.joiners) == (t1.id, JobKind.LOAD_BACK, (t2.id,))
    assert out.quarantined_slots == sum(len(op.src) + len(op.dst) for op in job.copies)
    assert t1.status is TicketStatus.TIMED_OUT and t2.status is TicketStatus.TIMED_OUT
    assert cache.ledger.live_count == 0 and cache.in_flight() == 0
    assert dev_full_of(a) is None
    (q,) = cache.quarantine()
    assert q.ticket_id == t1.id and q.timed_out
    assert cache.counters.timed_out_tickets == 2 and cache.counters.timed_out_slots == out.quarantined_slots
    d.assert_ok()
    tid, gen = t1.id, t1.generation
    r1, r2 = t1.result(), t2.result()
    assert r1.status is TicketStatus.TIMED_OUT and not r1.ok and not r2.ok
    # the rows the late copy writes are not handed out meanwhile
    dst = [s for op in job.copies if op.dst_tier.value == "device" and op.component is Full for s in op.dst]
    got = cache.alloc_device(Full, cache.pools.device_pool(Full).alloc.free_count)
    assert got is not None and not set(got) & set(dst)
    cache.free_device(Full, got)
    d.engine.complete(tid)
    done = cache.poll()
    assert [(c.ticket, c.status) for c in done] == [(tid, TicketStatus.TIMED_OUT)]
    assert cache.counters.late_acks == 1 and not cache.quarantine()
    assert all(s.quarantined == 0 for s in cache.pools.stats().values())
    assert dev_full_of(a) is None  # a late ack publishes nothing
    d.assert_ok()
    assert cache.deliver(Ack(tid, gen)) is None  # a duplicate of the late ack
    assert cache.counters.duplicate_acks == 1 and cache.counters.late_acks == 1
    d.assert_ok()


def test_a_timed_out_backup_leaves_the_node_unbacked(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back")
    (a,) = chain(cache, d, SEQ[:8], [8])
    tid = cache.backup(a)
    assert tid is not None
    out = cache.time_out(tid)
    assert out.kind is JobKind.BACKUP and host_full_of(a) is None
    assert cache.ledger.live_count == 0
    assert cache.pools.stats()["full.host"].quarantined == 8 // cache.config.page_size
    d.assert_ok()
    tid2 = cache.backup(a)  # the node can be backed up again, into other host rows
    assert tid2 is not None and tid2 != tid
    d.settle()
    assert host_full_of(a) is not None and cache.counters.late_acks == 1
    assert all(s.quarantined == 0 for s in cache.pools.stats().values())
    d.assert_ok()


def test_an_ack_that_never_comes_leaves_the_rows_quarantined_and_counted(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    (a,) = chain(cache, d, SEQ[:8], [8])
    tid = cache.backup(a)
    assert tid is not None
    out = cache.time_out(tid)
    del d.engine.jobs[tid]  # the engine lost it: no copy, no ack, ever
    cache.poll()
    assert cache.counters.timed_out_slots == out.quarantined_slots
    assert sum(s.quarantined for s in cache.pools.stats().values()) == out.quarantined_slots
    assert [q.timed_out for q in cache.quarantine()] == [True]
    d.assert_ok()


def test_reset_with_timed_out_tickets_keeps_their_quarantine_until_the_late_ack(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    a = host_only_node(cache, d, 8)
    t = cache.load_back(a)
    assert t is not None
    tid = t.id
    cache.time_out(tid)
    t.result()
    cache.reset()
    d.assert_ok()
    assert [q.timed_out for q in cache.quarantine()] == [True]
    d.engine.complete(tid)
    cache.poll()
    assert cache.counters.late_acks == 1 and cache.counters.stale_acks == 0
    assert all(s.quarantined == 0 for s in cache.pools.stats().values())
    d.assert_ok()


def test_time_out_refuses_bad_ids_and_changes_nothing(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    a = host_only_node(cache, d, 8)
    t1 = cache.load_back(a)
    t2 = cache.load_back(a)
    assert t1 is not None and t2 is not None
    before = CacheSnapshot.of(cache)
    with pytest.raises(InvalidArgumentError):
        cache.time_out(True)
    with pytest.raises(UnknownTicketError, match="ticket 999"):
        cache.time_out(999)
    with pytest.raises(TicketNotLiveError, match=f"ticket {t2.id}: joined the copy of ticket {t1.id}"):
        cache.time_out(t2.id)
    with pytest.raises(TicketNotLiveError, match="already settled"):
        cache.time_out(1)
    errors: list[BaseException] = []
    tid = t1.id

    def foreign() -> None:
        try:
            cache.time_out(tid)
        except BaseException as exc:
            errors.append(exc)

    th = threading.Thread(target=foreign)
    th.start()
    th.join()
    assert len(errors) == 1 and isinstance(errors[0], WrongThreadError)
    assert CacheSnapshot.of(cache) == before
    cache.time_out(t1.id)
    with pytest.raises(TicketNotLiveError, match="already timed out"):
        cache.time_out(t1.id)
    t1.result()
    t2.result()
    d.settle()
    d.assert_ok()


def test_a_reset_quarantined_ticket_can_be_timed_out_releasing_its_revoked_leases(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    (a,) = chain(cache, d, SEQ[:8], [8])
    tid = cache.backup(a)
    assert tid is not None
    cache.reset()
    assert not cache.ledger.live()  # revoked, but the record holds them until its ack (or its time-out)
    (q,) = cache.quarantine()
    assert not q.timed_out
    out = cache.time_out(tid)
    assert out.ticket == tid and [x.timed_out for x in cache.quarantine()] == [True]
    assert cache.counters.timed_out_tickets == 1
    d.assert_ok()
    d.settle()
    assert cache.counters.late_acks == 1 and cache.counters.stale_acks == 0 and not cache.quarantine()
    d.assert_ok()

"""Acks: failed copies publish nothing; acks posted from another thread."""

from __future__ import annotations

import threading

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, dev_full_of, host_full_of
from unicache import Full, TicketStatus


def test_failed_copies_publish_nothing(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    tid = cache.backup(a)
    assert tid is not None
    d.engine.complete(tid, ok=False)
    done = cache.poll()
    assert done[0].status is TicketStatus.FAILED and host_full_of(a) is None
    assert cache.counters.backups_failed == 1
    d.assert_ok()
    cache.backup(a)
    d.settle()
    cache.evict_device(Full, 4)
    t = cache.load_back(a)
    assert t is not None
    d.engine.complete(t.id, ok=False)
    cache.poll()
    res = t.result()
    assert res.status is TicketStatus.FAILED and not res.ok and dev_full_of(a) is None
    assert cache.pools.stats()["full.device"].used == 0 and cache.ledger.live() == []
    d.assert_ok()


def test_acks_through_the_inbox_from_another_thread(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    (a,) = chain(cache, d, SEQ[:4], [4])
    tid = cache.backup(a)
    assert tid is not None
    job = d.engine.jobs.pop(tid)
    assert d.engine.pools is not None
    for op in job.copies:
        d.engine.pools.copy(op)
    th = threading.Thread(target=cache.inbox.post, args=(job.ack(),))
    th.start()
    th.join()
    done = cache.poll()
    assert [c.ticket for c in done] == [tid] and host_full_of(a) is not None
    d.assert_ok()

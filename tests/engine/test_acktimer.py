"""`AckTimer`: tickets overdue after `limit` steps, live or quarantined by a reset; joiners go with their copy."""

from __future__ import annotations

from tests.unicache.support import SEQ, Driver, ManualEngine, chain, host_only_node
from unicache import CacheConfig, UniCache
from unicache.engine.acktimer import AckTimer, lost_for_good


def _cache() -> tuple[UniCache, Driver]:
    cache = UniCache(CacheConfig(device_tokens=64, dtype="int32", device="cpu", kv_width=4, debug=True),
                     ManualEngine())
    return cache, Driver(cache)


def test_overdue_counts_from_first_sight_and_skips_joiners() -> None:
    cache, d = _cache()
    a = host_only_node(cache, d, 8)
    t1 = cache.load_back(a)
    t2 = cache.load_back(a)
    assert t1 is not None and t2 is not None and t2.joined == t1.id
    timer = AckTimer(3)
    assert timer.overdue(cache, 10) == [] and timer.overdue(cache, 12) == []
    assert timer.overdue(cache, 13) == [t1.id]
    assert AckTimer(0).overdue(cache, 100) == []
    cache.time_out(t1.id)
    assert timer.overdue(cache, 14) == []
    t1.result()
    t2.result()


def test_reset_quarantined_tickets_are_overdue_too() -> None:
    cache, d = _cache()
    (a,) = chain(cache, d, SEQ[:8], [8])
    tid = cache.backup(a)
    assert tid is not None
    cache.reset()
    assert lost_for_good(cache) == [tid]
    timer = AckTimer(2)
    assert timer.overdue(cache, 1) == [] and timer.overdue(cache, 3) == [tid]
    cache.time_out(tid)
    assert lost_for_good(cache) == [] and timer.overdue(cache, 9) == []
    d.settle()
    assert cache.counters.late_acks == 1

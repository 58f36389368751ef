"""UniCache operations one by one: match, insert, lock, splits, eviction, backup, load-back, reset."""

from __future__ import annotations

import threading
from collections.abc import Collection

import pytest

from leases import EventKind
from tests.unicache.conftest import MakeCache
from tests.unicache.support import Driver, ManualEngine, chain
from unicache import (
    SWA,
    CacheConfig,
    Full,
    InvalidArgumentError,
    InvalidSlotError,
    Mamba,
    Node,
    TicketStatus,
    Tier,
    UniCache,
    UnknownNodeError,
)

SEQ = list(range(200, 232))


def _dev(node: Node) -> list[int] | None:
    return node.dev_full


def _host(node: Node) -> list[int] | None:
    return node.host_full


def _aux(node: Node) -> tuple[list[int] | None, int | None]:
    return node.dev_swa, node.dev_mamba


def _states(node: Node) -> tuple[int | None, int | None]:
    return node.dev_mamba, node.host_mamba


def _alive(node: Node) -> bool:
    return node.alive


def test_match_device_host_and_anchor(make_cache: MakeCache) -> None:
    cache, d = make_cache(load_back_threshold=5)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    m = cache.match_prefix(SEQ[:10])
    assert (m.matched_len, m.device_len, m.anchor_len) == (8, 8, 8)
    assert m.device_node is b and not m.needs_load_back and not m.worth_load_back
    cache.backup(b)
    cache.backup(a)
    d.settle()
    cache.match_prefix(SEQ[:4])
    assert cache.evict_device(Full, 1) == 4
    m = cache.match_prefix(SEQ[:8])
    assert m.device_node is a and m.anchor is b and m.host_len == 4
    assert m.full_host_tokens == 4 and m.needs_load_back and not m.worth_load_back  # < 5
    assert cache.evict_device(Full, 1) == 4
    m = cache.match_prefix(SEQ[:8])
    assert m.device_len == 0 and m.full_host_tokens == 8 and m.worth_load_back
    d.assert_ok()


def test_match_swa_window_and_mamba_end(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=3, mamba=True)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert d.serve(SEQ[:6] + [1, 2]) is not None  # splits a.. b at 6: fragment without Mamba
    m = cache.match_prefix(SEQ[:6])
    frag = m.anchor
    assert frag.end == 4 or frag is a  # the [4, 6) fragment has no Mamba state: back off to a
    assert m.anchor is a and m.anchor_len == 4
    m = cache.match_prefix(SEQ[:8])
    assert m.anchor is b and m.device_node is b
    cache.match_prefix(SEQ[:8])
    assert cache.evict_device(SWA, 1) >= 1  # the oldest SWA holder loses its window pages
    d.assert_ok()
    m = cache.match_prefix(SEQ[:8])
    assert m.device_len < 8 or m.device_node is b


def test_swa_window_tombstone_blocks_anchor(make_cache: MakeCache) -> None:
    # write_through below its threshold: nothing is backed up, so eviction loses SWA
    cache, d = make_cache(swa_window=2, write_policy="write_through", write_through_threshold=99)
    a, b, c = chain(cache, d, SEQ[:6], [2, 4, 6])
    cache.match_prefix(SEQ[:6])
    cache.match_prefix(SEQ[:2])
    cache.match_prefix(SEQ[4:])  # no-op match: different first token
    cache.match_prefix(SEQ[:4])
    # c is the least recently used SWA holder: tombstone it (no host copy: lost)
    assert cache.evict_device(SWA, 2) == 2 and c.dev_swa is None
    m = cache.match_prefix(SEQ[:6])
    assert m.matched_len == 6 and m.anchor is b and m.device_node is b
    d.assert_ok()


def test_insert_split_duplicates_unevict(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    res = d.compute(SEQ[:8])
    assert res is not None and res.new_tokens == 8
    res2 = d.compute(SEQ[:4] + [1, 2, 3, 4])
    assert res2 is not None and res2.new_tokens == 4 and res2.duplicate_pages_freed == 4
    assert cache.counters.splits == 1 and cache.node_count == 4
    res3 = d.compute(SEQ[:8])  # fully cached: every page a duplicate
    assert res3 is not None and res3.new_tokens == 0 and res3.duplicate_pages_freed == 8
    node = res3.node
    cache.backup(node)
    cache.backup(node.parent)  # type: ignore[arg-type]
    d.settle()
    cache.match_prefix(SEQ[:4] + [1, 2, 3, 4])
    assert cache.evict_device(Full, 4) == 4 and _dev(node) is None
    res4 = d.compute(SEQ[:8])
    assert res4 is not None and res4.unevicted_tokens == 4 and _dev(node) is not None
    assert cache.pools.stats()["full.device"].used == 12
    d.assert_ok()


def test_insert_arguments_are_checked(make_cache: MakeCache) -> None:
    cache, d = make_cache(page_size=4, swa_window=4)
    fs = cache.alloc_device(Full, 1)
    ss = cache.alloc_device(SWA, 1)
    assert fs is not None and ss is not None
    with pytest.raises(InvalidArgumentError):
        cache.insert(SEQ[:6], fs, swa_slots=ss)  # not whole pages
    with pytest.raises(InvalidArgumentError):
        cache.insert(SEQ[:8], fs, swa_slots=ss)  # 1 page for 2
    with pytest.raises(InvalidArgumentError):
        cache.insert(SEQ[:4], fs)  # SWA enabled, no SWA pages
    with pytest.raises(InvalidArgumentError):
        cache.insert(SEQ[:4], fs, swa_slots=ss, mamba_slot=0)
    with pytest.raises(InvalidSlotError):
        cache.insert(SEQ[:4], [fs[0] + 1], swa_slots=ss)
    assert cache.lent_slots(Full) == set(fs)  # nothing moved
    cache.free_device(Full, fs)
    cache.free_device(SWA, ss)
    d.assert_ok()


def test_prefix_missing_frees_donated(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    res = d.compute(SEQ[:8], 4)
    assert res is not None and res.prefix_missing
    assert all(s.used == 0 for s in cache.pools.stats().values())
    assert cache.counters.prefix_missing == 1
    d.assert_ok()


def test_mamba_copy_and_duplicate(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, mamba_device_slots=4)
    res = d.compute(SEQ[:4], donate=False)
    assert res is not None and res.mamba == "copied"
    assert cache.pools.stats()["mamba.device"].used == 1
    res2 = d.compute(SEQ[:4])
    assert res2 is not None and res2.mamba == "duplicate"
    assert cache.counters.mamba_duplicates == 1
    d.assert_ok()


def test_write_through_backs_up_chain_at_threshold(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_through", write_through_threshold=2)
    res = d.compute(SEQ[:4])
    assert res is not None and cache.in_flight() == 0  # 1 hit < 2
    assert d.serve(SEQ[:8]) is not None  # [0,4) reaches 2 hits
    assert cache.in_flight() == 1
    d.settle()
    a = cache.match_prefix(SEQ[:4]).device_node
    assert _host(a) is not None
    assert d.serve(SEQ[:8]) is not None  # [4,8) reaches 2 hits
    d.settle()
    b = cache.match_prefix(SEQ[:8]).device_node
    assert _host(b) is not None and cache.counters.backups == 2
    d.assert_ok()


def test_lock_records_what_it_locked_and_split_keeps_pins(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=3, mamba=True)
    (a,) = chain(cache, d, SEQ[:8], [8])
    r = cache.lock(a)
    assert r.node is a and r.length == 8
    assert r.full is not None and r.swa is not None and r.mamba is not None
    assert d.serve(SEQ[:4] + [7, 7, 7, 7]) is not None  # splits the locked node at 4
    upper = a.parent
    assert upper is not None and upper.end == 4
    for pins, lease in ((upper.pins_full, r.full), (upper.pins_swa, r.swa)):
        assert pins is not None and lease in pins  # every fragment pinned by the same leases
    assert upper.pins_mamba is not None and r.mamba in upper.pins_mamba
    assert cache.sanity_check().ok
    assert cache.evict_device(Full, 100) == 4  # only the other branch can go
    assert _dev(a) is not None and upper.dev_full is not None
    cache.unlock(r)
    for x in cache.nodes():
        assert not x.pinned()
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


def test_eviction_leaf_first_lru_and_cascade(make_cache: MakeCache) -> None:
    cache, d = make_cache(
        swa_window=4, mamba=True, write_policy="write_through", write_through_threshold=99
    )
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert d.serve([1, 2, 3, 4]) is not None
    c = cache.match_prefix([1, 2, 3, 4]).device_node
    cache.match_prefix(SEQ[:8])  # a, b newer than c
    assert cache.evict_device(Full, 1) == 4
    assert not c.alive  # unbacked under write_through: dropped with its data
    assert cache.evict_device(Full, 1) == 4 and not b.alive and a.alive  # leaf before parent
    assert a.dev_swa is not None and a.dev_mamba is not None
    assert cache.evict_device(SWA, 1) == 4
    assert _aux(a) == (None, None) and _dev(a) is not None  # SWA eviction cascades to Mamba
    d.assert_ok()


def test_lower_component_pin_blocks_higher_eviction(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.backup(a)
    d.settle()
    assert cache.evict_device(Mamba, 1) == 1
    t = cache.load_back(a)  # moves only the Mamba state: a Mamba lease, no Full lease
    assert t is not None and t.full is None and t.swa is None and t.mamba is not None
    assert cache.evict_device(Full, 4) == 0  # Full eviction would cascade to the pinned state
    assert cache.evict_device(SWA, 4) == 0  # so would SWA eviction
    assert cache.counters.evict_blocked >= 2 and _dev(a) is not None
    d.settle()
    assert t.result().ok
    assert cache.evict_device(Full, 4) == 4
    d.assert_ok()


def test_write_back_eviction_backs_up_then_demotes(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True, swa_window=4)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert cache.evict_device(Full, 8) == 8
    assert _dev(a) is None and _host(a) is not None and b.host_mamba is not None
    assert cache.counters.backups == 2 and cache.counters.dropped_nodes == 0
    d.assert_ok()
    t = cache.load_back(b)
    assert t is not None
    d.settle()
    assert t.result().ok
    d.assert_ok()


def test_host_eviction_takes_unpinned_host_leaves(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back")
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert cache.evict_device(Full, 8) == 8
    assert cache.evict_host(Full, 1) == 4 and not b.alive and a.alive
    assert cache.evict_host(Full, 1) == 4 and not _alive(a)
    assert cache.node_count == 1
    d.assert_ok()


def test_failed_copies_publish_nothing(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    tid = cache.backup(a)
    assert tid is not None
    d.engine.complete(tid, ok=False)
    done = cache.poll()
    assert done[0].status is TicketStatus.FAILED and _host(a) is None
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
    assert res.status is TicketStatus.FAILED and not res.ok and _dev(a) is None
    assert cache.pools.stats()["full.device"].used == 0 and cache.ledger.live() == []
    d.assert_ok()


def test_load_back_refused_when_device_is_pinned_full(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8)
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.backup(a)
    d.settle()
    cache.evict_device(Full, 4)
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


@pytest.mark.parametrize("what", ["load_back", "backup"])
def test_split_under_an_in_flight_copy(make_cache: MakeCache, what: str) -> None:
    cache, d = make_cache(swa_window=4, mamba=True)
    (a,) = chain(cache, d, SEQ[:8], [8])
    if what == "load_back":
        cache.backup(a)
        d.settle()
        cache.evict_device(Full, 8)
        t = cache.load_back(a)
        assert t is not None
        cache.match_prefix(SEQ[:4] + [9, 9])  # splits a at 4 while the copy is in flight
        upper = a.parent
        assert upper is not None and upper.end == 4 and t.full is not None
        assert upper.pins_full is not None and t.full in upper.pins_full
        assert cache.sanity_check().ok
        d.settle()
        assert t.result().ok and _dev(upper) is not None and _dev(a) is not None
    else:
        tid = cache.backup(a)
        assert tid is not None
        cache.match_prefix(SEQ[:4] + [9, 9])
        upper = a.parent
        assert upper is not None and upper.backing == 1
        d.settle()
        assert _host(upper) is not None and _host(a) is not None and upper.backing == 0
    d.assert_ok()


def test_reset_drops_everything_but_request_slots(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    mine = cache.alloc_device(Full, 2)
    assert mine is not None
    cache.reset()
    assert not a.alive and cache.node_count == 1
    with pytest.raises(UnknownNodeError):
        cache.lock(a)  # lease: ignore[lease-discarded]
    stats = cache.pools.stats()
    assert stats["full.device"].used == 2 and stats["mamba.device"].used == 0
    cache.free_device(Full, mine)
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
    assert [c.ticket for c in done] == [tid] and _host(a) is not None
    d.assert_ok()


def test_alloc_device_evicts_on_shortfall(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8, write_policy="write_back")
    chain(cache, d, SEQ[:8], [4, 8])
    got = cache.alloc_device(Full, 6)
    assert got is not None and len(got) == 6
    assert cache.counters.demotions == 2
    assert cache.alloc_device(Full, 3) is None
    cache.free_device(Full, got)
    with pytest.raises(InvalidArgumentError):
        cache.alloc_device(SWA, 1)
    d.assert_ok()


@pytest.mark.expect_lease_leaks(2)
def test_dropped_receipt_is_a_leak_that_unpins(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.lock(a)  # lease: ignore[lease-discarded]  (dropped at once: its two leases leak)
    assert cache.ledger.leaked == 2 and not a.pinned()
    assert cache.evict_device(Full, 4) == 4  # nothing left protecting it
    report = cache.sanity_check()
    assert report.ok, report.describe()
    assert cache.lease_scopes() == {}


def test_path_pages(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert cache.path_pages(b) == (a.dev_full or []) + (b.dev_full or [])
    assert cache.path_pages(b, SWA) == (a.dev_swa or []) + (b.dev_swa or [])
    with pytest.raises(InvalidArgumentError):
        cache.path_pages(b, Full, Tier.HOST)


def test_write_back_backs_up_a_device_only_mamba_state_before_evicting_it(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    dev_state = a.dev_mamba
    assert dev_state is not None and a.host_mamba is None and a.host_full is None
    assert cache.evict_device(Mamba, 1) == 1
    dev_state, host_state = _states(a)
    assert dev_state is None and host_state is not None  # moved, not lost
    assert _host(a) is None and _dev(a) is not None  # Full untouched
    c = cache.counters
    assert (c.aux_lost, c.aux_backups, c.backups, c.mamba_evicted) == (0, 1, 1, 1)
    assert cache.in_flight() == 0 and not a.pinned()  # the sync backup settled
    d.assert_ok()
    m = cache.match_prefix(SEQ[:4])
    assert m.device_len == 0 and m.anchor is a and m.mamba_host and m.worth_load_back
    t = cache.load_back(a)
    assert t is not None and t.full is None and t.mamba is not None
    d.settle()
    assert t.result().ok and a.dev_mamba is not None
    d.assert_ok()  # the restored state holds the oracle's bytes


def test_write_back_swa_eviction_backs_up_swa_and_its_cascaded_mamba(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True, swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    assert cache.evict_device(SWA, 1) == 4
    assert (a.dev_swa, a.dev_mamba) == (None, None)
    assert a.host_swa is not None and a.host_mamba is not None and a.host_full is None
    assert cache.counters.aux_lost == 0 and cache.counters.aux_backups == 1
    d.assert_ok()


def test_write_back_full_demotion_backs_up_a_state_the_host_copy_lacks(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True)
    assert d.compute(SEQ[:4], mamba=False) is not None
    (a,) = cache.root.children.values()
    assert cache.backup(a) is not None
    d.settle()
    assert a.host_full is not None and a.host_mamba is None
    assert d.compute(SEQ[:4], 4) is not None  # the state arrives after the Full backup
    assert a.dev_mamba is not None and a.host_mamba is None
    assert cache.evict_device(Full, 4) == 4
    assert _dev(a) is None and _states(a)[0] is None and _states(a)[1] is not None
    assert cache.counters.aux_lost == 0 and cache.counters.demotions == 1
    d.assert_ok()


def test_write_back_state_is_lost_when_the_host_cannot_take_it(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True, mamba_host_slots=1, history=64)
    (a,) = chain(cache, d, SEQ[:4], [4])
    (x,) = chain(cache, d, [1, 2, 3, 4], [4])
    assert cache.evict_device(Mamba, 1) == 1 and a.host_mamba is not None  # a is older
    t = cache.load_back(a)  # in flight: its Mamba lease pins the only host state
    assert t is not None and t.mamba is not None
    assert cache.evict_device(Mamba, 1) == 1  # x: no host room can be made
    c = cache.counters
    assert x.dev_mamba is None and x.host_mamba is None
    assert (c.aux_lost, c.backups_refused, c.aux_backups) == (1, 1, 1)
    blocked = [e for e in cache.ledger.events() if e.kind is EventKind.EVICT_BLOCKED]
    assert blocked and blocked[-1].nodes == (a.id,) and blocked[-1].component == "Mamba"
    assert f"{t.mamba.id}" in blocked[-1].detail and "tier host" in blocked[-1].detail
    d.settle()
    assert t.result().ok
    d.assert_ok()


def test_write_back_async_aux_backup_completes_on_a_later_eviction(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True, sync_write_back=False)
    (a,) = chain(cache, d, SEQ[:4], [4])
    assert cache.evict_device(Mamba, 1) == 0  # backup submitted, not waited for
    assert cache.in_flight() == 1 and a.dev_mamba is not None and a.pins_mamba
    assert cache.evict_device(Mamba, 1) == 0  # still pinned by the backup's lease
    d.settle()
    assert a.host_mamba is not None
    assert cache.evict_device(Mamba, 1) == 1 and cache.counters.aux_lost == 0
    d.assert_ok()


class _FailingFlush(ManualEngine):
    """Every flushed job fails (write_back eviction's synchronous backups)."""

    def flush(self, tickets: Collection[int] | None = None) -> None:
        for ticket in list(self.jobs if tickets is None else tickets):
            if ticket in self.jobs:
                self.complete(ticket, ok=False)


def test_write_back_victim_whose_backup_fails_is_dropped() -> None:
    cache = UniCache(
        CacheConfig(device_tokens=64, dtype="int32", device="cpu", kv_width=4, mamba=True),
        _FailingFlush(),
    )
    d = Driver(cache)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert cache.evict_device(Full, 4) == 4  # b's backup failed: b is dropped, not kept
    c = cache.counters
    assert not b.alive and a.alive and a.dev_full is not None
    assert (c.backups_failed, c.dropped_nodes) == (1, 1)
    d.assert_ok()


def test_pinned_eviction_candidates_are_recorded(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True, history=64)
    (a,) = chain(cache, d, SEQ[:4], [4])
    r = cache.lock(a)
    assert cache.evict_device(Full, 4) == 0 and cache.evict_device(Mamba, 1) == 0
    events = [e for e in cache.ledger.events() if e.kind is EventKind.EVICT_BLOCKED]
    assert [(e.nodes, e.component) for e in events] == [((a.id,), "Full"), ((a.id,), "Mamba")]
    assert r.full is not None and r.mamba is not None
    assert str(r.full.id) in events[0].detail and "tier device" in events[0].detail
    assert cache.counters.evict_blocked == 2
    cache.unlock(r)
    d.assert_ok()


def _pin_sets(node: Node) -> tuple[object, object, object]:
    return node.pins_full, node.pins_swa, node.pins_mamba


def test_a_pin_set_left_empty_is_dropped(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    r1 = cache.lock(a)
    r2 = cache.lock(a)
    assert all(p is not None for p in _pin_sets(a))
    cache.unlock(r1)
    assert a.pins_full is not None and r2.full in a.pins_full and len(a.pins_full) == 1
    cache.unlock(r2)
    assert _pin_sets(a) == (None, None, None)
    d.assert_ok()


def test_host_pages_are_compact_and_read_as_lists(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    assert cache.backup(a) is not None
    d.settle()
    assert a.host_pages is not None and a.host_pages.typecode == "i"
    assert a.host_full == a.host_pages.tolist() and isinstance(a.host_full, list)
    assert a.host_swa is not None and a.host_swa == list(a.host_swa_pages or [])
    assert cache.path_pages(a, Full, Tier.HOST) == a.host_full
    d.assert_ok()

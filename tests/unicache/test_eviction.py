"""Device eviction: leaf-first LRU, cascades, pins, write_back backups (Full and aux), events."""

from __future__ import annotations

from collections.abc import Collection

from leases import EventKind
from tests.unicache.conftest import MakeCache
from tests.unicache.support import (
    SEQ,
    Driver,
    ManualEngine,
    chain,
    dev_aux_of,
    dev_full_of,
    host_full_of,
    states_of,
)
from unicache import SWA, CacheConfig, Full, Mamba, UniCache
from tests.unicache.support import residency


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
    assert residency(a).swa_device is not None and residency(a).mamba_device is not None
    assert cache.evict_device(SWA, 1) == 4
    assert dev_aux_of(a) == (None, None) and dev_full_of(a) is not None  # SWA eviction cascades to Mamba
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
    assert cache.counters.evict_blocked >= 2 and dev_full_of(a) is not None
    d.settle()
    assert t.result().ok
    assert cache.evict_device(Full, 4) == 4
    d.assert_ok()


def test_write_back_eviction_backs_up_then_demotes(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True, swa_window=4)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert cache.evict_device(Full, 8) == 8
    assert dev_full_of(a) is None and host_full_of(a) is not None and residency(b).mamba_host is not None
    assert cache.counters.backups == 2 and cache.counters.dropped_nodes == 0
    d.assert_ok()
    t = cache.load_back(b)
    assert t is not None
    d.settle()
    assert t.result().ok
    d.assert_ok()


def test_write_back_backs_up_a_device_only_mamba_state_before_evicting_it(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    dev_state = residency(a).mamba_device
    assert dev_state is not None and residency(a).mamba_host is None and residency(a).full_host is None
    assert cache.evict_device(Mamba, 1) == 1
    dev_state, host_state = states_of(a)
    assert dev_state is None and host_state is not None  # moved, not lost
    assert host_full_of(a) is None and dev_full_of(a) is not None  # Full untouched
    c = cache.counters
    assert (c.aux_lost, c.aux_backups, c.backups, c.mamba_evicted) == (0, 1, 1, 1)
    assert cache.in_flight() == 0 and not residency(a).pinned()  # the sync backup settled
    d.assert_ok()
    m = cache.match_prefix(SEQ[:4])
    assert m.device_len == 0 and m.anchor is a and m.mamba_host and m.worth_load_back
    t = cache.load_back(a)
    assert t is not None and t.full is None and t.mamba is not None
    d.settle()
    assert t.result().ok and residency(a).mamba_device is not None
    d.assert_ok()  # the restored state holds the oracle's bytes


def test_write_back_swa_eviction_backs_up_swa_and_its_cascaded_mamba(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True, swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    assert cache.evict_device(SWA, 1) == 4
    assert (residency(a).swa_device, residency(a).mamba_device) == (None, None)
    assert residency(a).swa_host is not None and residency(a).mamba_host is not None and residency(a).full_host is None
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
    assert residency(a).full_host is not None and residency(a).mamba_host is None
    assert d.compute(SEQ[:4], 4) is not None  # the state arrives after the Full backup
    assert residency(a).mamba_device is not None and residency(a).mamba_host is None
    assert cache.evict_device(Full, 4) == 4
    assert dev_full_of(a) is None and states_of(a)[0] is None and states_of(a)[1] is not None
    assert cache.counters.aux_lost == 0 and cache.counters.demotions == 1
    d.assert_ok()


def test_write_back_state_is_lost_when_the_host_cannot_take_it(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back", mamba=True, mamba_host_slots=1, history=64)
    (a,) = chain(cache, d, SEQ[:4], [4])
    (x,) = chain(cache, d, [1, 2, 3, 4], [4])
    assert cache.evict_device(Mamba, 1) == 1 and residency(a).mamba_host is not None  # a is older
    t = cache.load_back(a)  # in flight: its Mamba lease pins the only host state
    assert t is not None and t.mamba is not None
    assert cache.evict_device(Mamba, 1) == 1  # x: no host room can be made
    c = cache.counters
    assert residency(x).mamba_device is None and residency(x).mamba_host is None
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
    assert cache.in_flight() == 1 and residency(a).mamba_device is not None and residency(a).mamba_pins
    assert cache.evict_device(Mamba, 1) == 0  # still pinned by the backup's lease
    d.settle()
    assert residency(a).mamba_host is not None
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
    assert not b.alive and a.alive and residency(a).full_device is not None
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

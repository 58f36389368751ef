"""Metric families of a cache: read from its counters, checked against them; the watchdog on a withheld ack."""

from __future__ import annotations

import pytest

from leases import LeaseWatchdog
from tests.unicache.support import Driver, ManualEngine, host_only_node
from unicache import CacheConfig, UniCache
from unicache.errors import UnknownTicketError
from unicache.metrics import Family, cache_families


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _cache(clock: FakeClock) -> tuple[UniCache, Driver]:
    config = CacheConfig(device_tokens=64, dtype="int32", device="cpu", kv_width=4, mamba_width=4, mamba=True)
    cache = UniCache(config, ManualEngine(), clock=clock)
    return cache, Driver(cache)


def _by_name(fams: list[Family]) -> dict[str, Family]:
    names = [f.name for f in fams]
    assert len(names) == len(set(names)), names
    return {f.name: f for f in fams}


def test_families_follow_the_counters_and_naming_rules() -> None:
    clock = FakeClock()
    cache, d = _cache(clock)
    node = host_only_node(cache, d, 8)
    ticket = cache.load_back(node)
    assert ticket is not None
    fams = _by_name(cache_families(cache))
    for fam in fams.values():
        assert fam.name.startswith("unicache_") and not fam.name.endswith("_total")
        for labels, _ in fam.samples:
            assert len(labels) == len(fam.labelnames)
    ledger = cache.ledger
    name = ledger.name
    assert fams["unicache_leases_acquired"].value(name) == ledger.acquired
    assert fams["unicache_leases_released"].value(name) == ledger.released
    live = fams["unicache_leases_live"]
    assert sum(v for _, v in live.samples) == ledger.live_count > 0
    assert live.value(name, "full", "load_back") == 1
    assert fams["unicache_operations"].value("load_back") == cache.counters.load_backs == 1
    assert fams["unicache_transfers_in_flight"].value() == 1
    used = fams["unicache_pool_used_rows"]
    for pool, stats in cache.pools.stats().items():
        comp, _, tier = pool.partition(".")
        assert used.value(comp, tier) == stats.used
    d.settle()
    ticket.result()
    fams = _by_name(cache_families(cache))
    assert fams["unicache_acks"].value("ok") == cache.counters.acks >= 1
    assert fams["unicache_transfers_in_flight"].value() == 0
    hold = {s.labels: s for s in fams["unicache_lease_hold_seconds"].histograms}
    assert hold[(name, "full")].buckets[-1] == (float("inf"), ledger.hold_times()["Full"].count)


def test_refusals_and_misuse_errors_are_counted() -> None:
    cache, d = _cache(FakeClock())
    refused = cache.load_back(cache.root)
    assert refused is None
    with pytest.raises(UnknownTicketError):
        cache.time_out(12345)
    fams = _by_name(cache_families(cache))
    assert fams["unicache_refusals"].value("load_back", "root", "none") == 1
    assert fams["unicache_errors"].value("UnknownTicketError") >= 1


def test_a_withheld_ack_is_reported_by_the_watchdog_and_stays_held() -> None:
    clock = FakeClock()
    cache, d = _cache(clock)
    node = host_only_node(cache, d, 8)
    ticket = cache.load_back(node)
    assert ticket is not None
    engine = d.engine
    engine.withhold(ticket.id)
    lines: list[str] = []
    dog = LeaseWatchdog(cache.ledger, 30.0, log=lines.append)
    engine.flush()
    cache.poll()
    assert dog.check() == []
    clock.now += 31.0
    engine.flush()
    cache.poll()
    overdue = dog.check()
    assert {e.component for e in overdue} == {"Full", "Mamba"}
    assert all(e.owner_kind == "load_back" and f"#{ticket.id}" in e.owner for e in overdue)
    assert all(node.id in e.nodes for e in overdue) and len(lines) == len(overdue)
    assert all(f"nodes {node.id}" in line and "held 31.000s" in line for line in lines)
    assert cache.ledger.live_count == len(overdue)
    fams = _by_name(cache_families(cache, watchdog=dog))
    over = fams["unicache_leases_overdue"]
    assert over.value(cache.ledger.name, "full") == 1 and over.value(cache.ledger.name, "mamba") == 1
    assert fams["unicache_oldest_lease_age_seconds"].samples[0][1] == pytest.approx(31.0)
    engine.release(ticket.id)
    d.settle()
    ticket.result()
    assert dog.check() == [] and dog.reported == len(lines)
    assert cache.ledger.hold_times()["Full"].total >= 31.0
    d.assert_ok()

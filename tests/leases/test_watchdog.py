"""`LeaseWatchdog` and the ledger clock: ages, hold times, overdue reports, never a forced release."""

from __future__ import annotations

import pytest

from leases import HoldTimes, LeaseLedger, LeaseWatchdog, PinSet, WatchdogError
from leases.holdtimes import BUCKETS


class Full: ...


class Mamba: ...


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Node:
    def __init__(self, ident: int) -> None:
        self.id = ident


def test_ages_and_hold_times_come_from_the_injected_clock() -> None:
    clock = FakeClock()
    ledger = LeaseLedger("t", clock=clock)
    first = ledger.acquire(Full, owner="lock#1")
    clock.now += 2.0
    second = ledger.acquire(Mamba, owner="lock#2")
    assert (first.acquired_at, second.acquired_at) == (100.0, 102.0)
    assert ledger.oldest() is first
    assert [lease.id for lease in ledger.held_since(101.0)] == [first.id]
    clock.now += 0.25
    first.release()
    assert ledger.oldest() is second
    second.release()
    full = ledger.hold_times()["Full"]
    assert full.count == 1 and full.total == pytest.approx(2.25)
    assert dict(full.cumulative())[5.0] == 1 and dict(full.cumulative())[1.0] == 0
    assert ledger.hold_times()["Mamba"].total == pytest.approx(0.25)
    assert ledger.oldest() is None


def test_a_ledger_without_a_clock_keeps_no_hold_times() -> None:
    ledger = LeaseLedger("t")
    lease = ledger.acquire(Full, owner="x")
    assert lease.acquired_at == 0.0
    lease.release()
    assert ledger.hold_times() == {}


def test_hold_times_bucket_like_prometheus() -> None:
    times = HoldTimes()
    for seconds in (0.0, 0.001, 0.002, 400.0):
        times.observe(seconds)
    cumulative = dict(times.cumulative())
    assert cumulative[0.001] == 2 and cumulative[0.005] == 3 and cumulative[BUCKETS[-1]] == 3
    assert cumulative[float("inf")] == 4 == times.count


def test_the_watchdog_reports_each_overdue_lease_once_and_never_releases_it() -> None:
    clock = FakeClock()
    ledger = LeaseLedger("cache-0", clock=clock)
    lines: list[str] = []
    dog = LeaseWatchdog(ledger, 5.0, log=lines.append)
    pins = PinSet(Full, holder=Node(7))
    held = ledger.acquire(Full, owner="load_back#3@7", pins=[pins])
    clock.now += 4.0
    young = ledger.acquire(Full, owner="lock#9")
    assert dog.check() == [] and lines == []
    clock.now += 1.5
    (entry,) = dog.check()
    assert (entry.lease_id, entry.component, entry.owner, entry.nodes) == (held.id, "Full", "load_back#3@7", (7,))
    assert entry.age == pytest.approx(5.5)
    assert len(lines) == 1
    for word in (f"lease #{held.id}", "Full", "owner load_back#3@7", "nodes 7", "held 5.500s", "limit of 5s"):
        assert word in lines[0]
    clock.now += 10.0
    assert [e.lease_id for e in dog.check()] == [held.id, young.id]
    assert len(lines) == 2 and dog.reported == 2
    assert held.held and held in pins
    held.release()
    assert [e.lease_id for e in dog.check()] == [young.id] and dog.reported == 2
    young.release()
    assert dog.check() == [] and dog.last == []


@pytest.mark.parametrize("limit", [0, -1.0, float("nan"), float("inf"), True, "5"])
def test_an_unusable_age_limit_is_refused(limit: object) -> None:
    with pytest.raises(WatchdogError, match="age limit"):
        LeaseWatchdog(LeaseLedger("t", clock=FakeClock()), limit)  # type: ignore[arg-type]


def test_a_watchdog_needs_a_clock() -> None:
    with pytest.raises(WatchdogError, match="no clock"):
        LeaseWatchdog(LeaseLedger("t"), 5.0)

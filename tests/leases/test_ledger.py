"""LeaseLedger: epochs, counters, settle outcomes, the event ring, strict checks."""

from __future__ import annotations

import gc

import pytest

from leases import (
    EventKind,
    ForeignLeaseError,
    LeaseLeakError,
    LeaseLedger,
    PinSet,
    Settle,
    StaleLeaseError,
)
from tests.leases.markers import Full, Mamba


def test_advance_epoch_revokes_and_owner_release_is_stale(ledger: LeaseLedger) -> None:
    pins = PinSet(Full, holder=3)
    old = ledger.acquire(Full, owner="load-back #1", pins=[pins])
    assert ledger.advance_epoch() == 1
    assert old not in pins and len(pins) == 0
    assert old.outcome is Settle.REVOKED and not old.held
    assert ledger.live() == [] and ledger.get(old.id) is None
    new = ledger.acquire(Full, owner="load-back #2", pins=[pins])
    assert new.generation == 1
    assert old.release().outcome is Settle.STALE
    assert new in pins, "a stale release must not touch a newer lease"
    assert ledger.stale == 1 and ledger.revoked == 1
    new.release()
    assert ledger.counters() == {
        "acquired": 2, "released": 1, "revoked": 1, "stale": 1, "leaked": 0, "live": 0, "epoch": 1,
    }


def test_revoked_lease_cannot_pin(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="x")
    ledger.advance_epoch()
    with pytest.raises(StaleLeaseError, match=f"lease #{lease.id}"):
        ledger.pin(lease, PinSet(Full))
    lease.release()


def test_settle_refuses_a_foreign_lease() -> None:
    mine, theirs = LeaseLedger("cache-0"), LeaseLedger("cache-1")
    lease = theirs.acquire(Full, owner="req-9")
    with pytest.raises(ForeignLeaseError) as err:
        mine.settle(lease)
    assert "cache-0" in str(err.value) and "cache-1" in str(err.value) and f"#{lease.id}" in str(err.value)  # lease: ignore[lease-use-after-move]
    assert lease.held, "the refused lease is untouched"  # lease: ignore[lease-use-after-move]
    with pytest.raises(ForeignLeaseError):
        mine.pin(lease, PinSet(Full))  # lease: ignore[lease-use-after-move]
    assert theirs.settle(lease) is Settle.RELEASED  # lease: ignore[lease-use-after-move]


def test_settle_outcomes() -> None:
    led = LeaseLedger("l")
    a, b = led.acquire(Full, owner="a"), led.acquire(Mamba, owner="b")
    assert led.settle(a) is Settle.RELEASED
    led.advance_epoch()
    assert led.settle(b) is Settle.STALE


def test_live_registry_and_lookup(ledger: LeaseLedger) -> None:
    a = ledger.acquire(Full, owner="a")
    b = ledger.acquire(Mamba, owner="b")
    assert ledger.live() == [a, b] and ledger.get(b.id) is b and ledger.get(999) is None
    a_id = a.id
    a.release()
    assert ledger.live() == [b] and ledger.get(a_id) is None
    b.release()


def test_ticket_events_are_the_events_naming_a_ticket_newest_first() -> None:
    led = LeaseLedger("tickets", history=8)
    for i in range(6):
        led.record(EventKind.ACK, nodes=[i], ticket=i % 2, detail=f"e{i}")
    picked = led.ticket_events(1)
    assert [e.detail for e in picked] == ["e5", "e3", "e1"]
    assert picked == [e for e in reversed(led.events()) if e.ticket == 1]
    assert led.ticket_events(9) == [] and LeaseLedger("off", history=0).ticket_events(1) == []


def test_event_ring_is_bounded_and_sequenced() -> None:
    led = LeaseLedger("ring", history=5)
    pins = PinSet(Full, holder=42)
    led.step = 7
    for i in range(4):
        led.acquire(Full, owner=f"o{i}", pins=[pins]).release()
    events = led.events()
    assert len(events) == 5
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and seqs[-1] == 8
    last = events[-1]
    assert last.kind is EventKind.RELEASE and last.owner == "o3" and last.step == 7
    acquire = events[-2]
    assert acquire.kind is EventKind.ACQUIRE and acquire.nodes == (42,) and acquire.component == "Full"
    led.record(EventKind.EVICT_BLOCKED, nodes=[42], detail="pinned by Full", ticket=3)
    assert led.events(last=1)[0].ticket == 3
    assert led.events()[-1].to_json()["kind"] == "evict-blocked"


def test_history_zero_records_nothing() -> None:
    led = LeaseLedger("cheap", history=0)
    led.acquire(Full, owner="x").release()
    led.record(EventKind.NOTE, detail="x")
    assert led.events() == []


def test_history_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="history"):
        LeaseLedger("bad", history=-1)


@pytest.mark.expect_lease_leaks(2)
def test_leak_leaves_pins_and_is_recorded_with_site() -> None:
    led = LeaseLedger("leaky", debug=True)
    pins = PinSet(Full, holder=5)
    with pytest.warns(ResourceWarning, match="leaked"):
        led.acquire(Full, owner="forgotten", pins=[pins])  # lease: ignore[lease-discarded]
        gc.collect()
    assert len(pins) == 0 and list(pins) == []
    assert led.leaked == 1 and led.live_count == 0
    (leak,) = led.check()
    assert leak.owner == "forgotten" and leak.site is not None and "test_ledger.py" in leak.site
    assert led.check() == [], "check reports each leak once"
    assert [e.kind for e in led.events()][-1] is EventKind.LEAK
    strict = LeaseLedger("strict", strict=True, debug=True)
    with pytest.warns(ResourceWarning):
        strict.acquire(Mamba, owner="lost")  # lease: ignore[lease-discarded]
        gc.collect()
    with pytest.raises(LeaseLeakError) as err:
        strict.check()
    assert "lost" in str(err.value) and "test_ledger.py" in str(err.value)
    assert len(err.value.leaks) == 1


@pytest.mark.expect_lease_leaks(1)
def test_dropping_a_revoked_lease_is_a_leak() -> None:
    led = LeaseLedger("l")
    lease = led.acquire(Full, owner="x")
    led.advance_epoch()
    with pytest.warns(ResourceWarning):
        del lease  # lease: ignore[lease-leak]
        gc.collect()
    assert led.leaked == 1 and led.leaked_while_held == 0 and led.released == 0

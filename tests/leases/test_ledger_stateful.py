"""A hypothesis state machine over the ledger against a plain-dict model."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from leases import DoubleReleaseError, Held, Lease, LeaseLedger, PinSet, Settle
from tests.leases.markers import Full, Mamba

COMPONENTS: tuple[type[Any], ...] = (Full, Mamba)
HOLDERS = 4


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ledger = LeaseLedger("machine", debug=True, history=64)
        self.pins: dict[type[Any], list[PinSet[Any]]] = {
            c: [PinSet(c, holder=h) for h in range(HOLDERS)] for c in COMPONENTS
        }
        self.held: list[tuple[Lease[Any, Held], frozenset[int]]] = []
        self.revoked_unreleased: list[Lease[Any, Held]] = []
        self.done: list[Lease[Any, Any]] = []
        self.expect = {"acquired": 0, "released": 0, "revoked": 0, "stale": 0, "leaked": 0}

    @rule(component=st.sampled_from(COMPONENTS), holders=st.frozensets(st.integers(0, HOLDERS - 1)))
    def acquire(self, component: type[Any], holders: frozenset[int]) -> None:
        pins = [self.pins[component][h] for h in sorted(holders)]
        lease = self.ledger.acquire(component, owner=f"op-{self.expect['acquired']}", pins=pins)
        self.expect["acquired"] += 1
        self.held.append((lease, holders))

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        lease, _ = self.held.pop(data.draw(st.integers(0, len(self.held) - 1)))
        done = lease.release()
        assert done.outcome is Settle.RELEASED
        self.expect["released"] += 1
        self.done.append(done)

    @precondition(lambda self: self.revoked_unreleased)
    @rule()
    def release_revoked(self) -> None:
        lease = self.revoked_unreleased.pop()
        done = lease.release()
        assert done.outcome is Settle.STALE
        self.expect["stale"] += 1
        self.done.append(done)

    @precondition(lambda self: self.done)
    @rule(data=st.data())
    def double_release(self, data: st.DataObject) -> None:
        lease = data.draw(st.sampled_from(self.done))
        before = self.ledger.counters()
        with pytest.raises(DoubleReleaseError, match=f"lease #{lease.id}"):
            lease.release()  # lease: ignore[lease-not-owned]  # a released lease, released again on purpose
        assert self.ledger.counters() == before

    @rule()
    def advance_epoch(self) -> None:
        self.expect["revoked"] += len(self.held)
        self.revoked_unreleased.extend(lease for lease, _ in self.held)
        self.held.clear()
        self.ledger.advance_epoch()

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def drop_owner(self, data: st.DataObject) -> None:
        self.held.pop(data.draw(st.integers(0, len(self.held) - 1)))  # lease: ignore[lease-discarded]  # the leak under test
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        self.expect["leaked"] += 1

    @invariant()
    def pin_sets_equal_live_leases_naming_them(self) -> None:
        for component in COMPONENTS:
            for h, pins in enumerate(self.pins[component]):
                expected = {
                    lease.id for lease, holders in self.held
                    if lease.component is component and h in holders
                }
                assert set(pins.ids()) == expected
                assert len(pins) == len(expected) and bool(pins) == bool(expected)

    @invariant()
    def counters_add_up(self) -> None:
        led = self.ledger
        assert led.acquired == self.expect["acquired"]
        assert led.released == self.expect["released"]
        assert led.revoked == self.expect["revoked"]
        assert led.stale == self.expect["stale"]
        assert led.leaked == self.expect["leaked"]
        assert led.live_count == len(self.held)
        assert led.acquired == led.live_count + led.released + led.revoked + led.leaked_while_held

    @invariant()
    def nothing_live_from_an_old_epoch(self) -> None:
        assert all(lease.generation == self.ledger.epoch for lease in self.ledger.live())
        assert {lease.id for lease in self.ledger.live()} == {lease.id for lease, _ in self.held}

    def teardown(self) -> None:
        for lease, _ in self.held:
            lease.release()
        self.held.clear()
        for lease in self.revoked_unreleased:
            lease.release()
        self.revoked_unreleased.clear()


TestLedgerMachine = pytest.mark.allow_lease_leaks(LedgerMachine.TestCase)
LedgerMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)

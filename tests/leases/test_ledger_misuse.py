"""Misuse of the lease runtime is refused with a typed error before anything is issued or changed.

Each refusal leaves the ledger's counters, live registry, leaks and flight
recorder, and every pin set involved, exactly as they were; the next lease
gets the id the refused call would have taken; and nothing is reported from
a finalizer (no `ResourceWarning`, no unraisable exception).
"""

from __future__ import annotations

import gc
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from leases import (
    ComponentMismatchError,
    DuplicatePinError,
    ForeignLeaseError,
    Lease,
    LeaseArgumentError,
    LeaseError,
    LeaseLedger,
    PinSet,
)
from tests.leases.markers import Full, Mamba


def _state(ledger: LeaseLedger, sets: tuple[PinSet[Any], ...]) -> tuple[object, ...]:
    return (ledger.counters(), ledger.events(), [x.id for x in ledger.live()], ledger.leaks(),
            [p.ids() for p in sets])


@contextmanager
def refused(ledger: LeaseLedger, error: type[Exception], *parts: str,
            sets: tuple[PinSet[Any], ...] = ()) -> Iterator[None]:
    """The block raises `error` naming every one of `parts`, and changes nothing."""
    before = _state(ledger, sets)
    unraisable: list[object] = []
    hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(error) as err:
                yield
            gc.collect()
    finally:
        sys.unraisablehook = hook
    assert unraisable == []
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    for part in parts:
        assert part in str(err.value), (part, str(err.value))
    assert isinstance(err.value, LeaseError) or error is TypeError
    assert _state(ledger, sets) == before
    probe = ledger.acquire(Full, owner="probe")
    assert probe.id == before[0]["acquired"] + 1, "a refused call takes no lease id"  # type: ignore[index]
    probe.release()


def test_a_component_that_is_not_a_class_is_refused(ledger: LeaseLedger) -> None:
    with refused(ledger, LeaseArgumentError, "component", "'Full'", "str"):
        ledger.acquire("Full", owner="req-1")  # type: ignore[arg-type]  # lease: ignore[lease-discarded]
    pins = PinSet(Full, holder="n1")
    with refused(ledger, LeaseArgumentError, "component", "'Full'", sets=(pins,)):
        ledger.acquire("Full", owner="req-1", pins=[pins])  # type: ignore[arg-type]  # lease: ignore[lease-discarded]
    with refused(ledger, LeaseArgumentError, "component", "Full object"):
        ledger.acquire(Full(), owner="req-1")  # type: ignore[arg-type]  # lease: ignore[lease-discarded]


def test_an_owner_of_none_is_refused(ledger: LeaseLedger) -> None:
    with refused(ledger, LeaseArgumentError, "owner=None", "Full"):
        ledger.acquire(Full, owner=None)  # lease: ignore[lease-discarded]


def test_pins_must_be_an_iterable_of_pin_sets(ledger: LeaseLedger) -> None:
    lone = PinSet(Full, holder="n1")
    with refused(ledger, LeaseArgumentError, "pins=", "PinSet", "pass pins=[the_set]", sets=(lone,)):
        ledger.acquire(Full, owner="req-1", pins=lone)  # type: ignore[arg-type]  # lease: ignore[lease-discarded]
    held = ledger.acquire(Full, owner="req-0", pins=[lone])
    with refused(ledger, LeaseArgumentError, "pass pins=[the_set]", sets=(lone,)):
        ledger.acquire(Full, owner="req-1", pins=lone)  # type: ignore[arg-type]  # lease: ignore[lease-discarded]
    with refused(ledger, LeaseArgumentError, "pins[0]", "not a PinSet", sets=(lone,)):
        ledger.acquire(Full, owner="req-1", pins=list(lone))  # type: ignore[arg-type]  # lease: ignore[lease-discarded]
    for bad in (None, "n1", 7):
        with refused(ledger, LeaseArgumentError, "iterable of PinSet", repr(bad)):
            ledger.acquire(Full, owner="req-1", pins=bad)  # type: ignore[arg-type]  # lease: ignore[lease-discarded]
    held.release()


def test_a_bad_member_of_pins_is_refused_and_earlier_sets_are_left_as_they_were(ledger: LeaseLedger) -> None:
    a, b = PinSet(Full, holder="a"), PinSet(Full, holder="b")
    keep = ledger.acquire(Full, owner="keep", pins=(a,))
    with refused(ledger, LeaseArgumentError, "pins[2]", "'node-3'", "not a PinSet", sets=(a, b)):
        ledger.acquire(Full, owner="req-1", pins=(a, b, "node-3"))  # type: ignore[arg-type]  # lease: ignore[lease-discarded]
    assert keep in a and not b
    keep.release()


def test_a_pin_set_of_another_component_is_refused(ledger: LeaseLedger) -> None:
    full, mamba = PinSet(Full, holder="a"), PinSet(Mamba, holder="a")
    with refused(ledger, ComponentMismatchError, "pins[1]", "a pin set of Mamba, not Full", "'req-1'",
                 sets=(full, mamba)):
        ledger.acquire(Full, owner="req-1", pins=[full, mamba])  # type: ignore[list-item]  # lease: ignore[lease-discarded]
    assert issubclass(ComponentMismatchError, TypeError)


def test_a_pin_set_listed_twice_is_refused(ledger: LeaseLedger) -> None:
    a, b = PinSet(Full, holder="a"), PinSet(Full, holder="b")
    with refused(ledger, DuplicatePinError, "pins[2]", "more than once", sets=(a, b)):
        ledger.acquire(Full, owner="req-1", pins=(a, b, a))  # lease: ignore[lease-discarded]
    assert issubclass(DuplicatePinError, ValueError)


def test_a_pin_set_holding_another_ledgers_lease_of_the_same_id_is_refused() -> None:
    mine, theirs = LeaseLedger("cache-0"), LeaseLedger("cache-1")
    shared = PinSet(Full, holder="n1")
    first = theirs.acquire(Full, owner="theirs-1", pins=[shared])
    second = theirs.acquire(Full, owner="theirs-2", pins=[shared])
    with refused(mine, ForeignLeaseError, "pins[0]", "lease #1 of another ledger", "'cache-0'", sets=(shared,)):
        mine.acquire(Full, owner="mine", pins=[shared])  # lease: ignore[lease-discarded]
    assert first in shared, "the other ledger's lease keeps its pin"
    other = mine.acquire(Full, owner="other")  # #2 of cache-0 (the probe took #1), as is `second`
    assert other.id == second.id
    with refused(mine, ForeignLeaseError, f"#{other.id}", "another ledger", sets=(shared,)):
        mine.pin(other, shared)
    assert second in shared and other.pin_sets() == ()
    other.release()
    first.release()
    second.release()


def test_a_bad_stacklevel_is_refused_in_debug_mode(ledger: LeaseLedger) -> None:
    for bad in (0, -1):
        with refused(ledger, LeaseArgumentError, "stacklevel", repr(bad)):
            ledger.acquire(Full, owner="req-1", stacklevel=bad)  # lease: ignore[lease-discarded]
    # Interpreted, the ledger raises LeaseArgumentError; compiled, the signature's int check raises a TypeError first.
    with refused(ledger, TypeError):
        ledger.acquire(Full, owner="req-1", stacklevel="1")  # type: ignore[arg-type]  # lease: ignore[lease-discarded]


def test_settle_pin_and_unpin_refuse_what_is_not_a_lease(ledger: LeaseLedger) -> None:
    pins = PinSet(Full, holder="n1")
    for bad in ("lease #1", None, pins):
        with refused(ledger, LeaseArgumentError, "settle() takes a Lease", repr(bad), sets=(pins,)):
            ledger.settle(bad)  # type: ignore[arg-type]
        with refused(ledger, LeaseArgumentError, "pin() takes a Lease", sets=(pins,)):
            ledger.pin(bad, pins)  # type: ignore[arg-type]
        with refused(ledger, LeaseArgumentError, "unpin() takes a Lease", sets=(pins,)):
            ledger.unpin(bad, pins)  # type: ignore[arg-type]


def test_pin_and_unpin_refuse_what_is_not_a_pin_set(ledger: LeaseLedger) -> None:
    pins = PinSet(Full, holder="n1")
    lease = ledger.acquire(Full, owner="req-1", pins=[pins])
    for bad in ("n1", None, [pins]):
        with refused(ledger, LeaseArgumentError, "takes a PinSet", f"#{lease.id}", repr(bad), sets=(pins,)):
            ledger.pin(lease, bad)  # type: ignore[arg-type]
        with refused(ledger, LeaseArgumentError, "takes a PinSet", f"#{lease.id}", sets=(pins,)):
            ledger.unpin(lease, bad)  # type: ignore[arg-type]
    assert lease.pin_sets() == (pins,)
    lease.release()


def test_a_pin_set_needs_a_component_class() -> None:
    for bad in ("Full", Full(), None):
        with pytest.raises(LeaseArgumentError, match="PinSet\\(component=...\\)") as err:
            PinSet(bad)  # type: ignore[call-overload]
        assert repr(bad) in str(err.value)


def test_a_lease_constructed_directly_is_refused_silently(ledger: LeaseLedger) -> None:
    with refused(ledger, TypeError, "LeaseLedger.acquire"):
        Lease()  # lease: ignore[lease-discarded]

"""`LeaseWatchdog`: reports the leases of a ledger held longer than an age limit, never releases them.

A lease held for minutes is how a lost ack, a stuck copy or a request that
never unlocks shows itself first. The watchdog reads ages with the ledger's
own clock (``LeaseLedger(clock=...)``: tests inject a fake one), logs each
overdue lease once (lease, component, owner, nodes, age) on the
``leases.watchdog`` logger, counts the reports, and lists what is overdue
now. Releasing stays the owner's job: forcing a release under an in-flight
copy is the bug leases exist to prevent.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leases.borrow import Borrowed
from leases.lease import Lease
from leases.ledger import LeaseLedger
from leases.state import Held

LOGGER = logging.getLogger("leases.watchdog")


class WatchdogError(ValueError):
    """A watchdog was configured with an unusable age limit or a ledger without a clock."""


@dataclass(frozen=True, slots=True)
class OverdueLease:
    """A live lease held past the limit, as seen at one check."""

    lease_id: int
    component: str
    owner: str
    owner_kind: str
    generation: int
    nodes: tuple[object, ...]
    age: float
    ledger: str

    def describe(self) -> str:
        nodes = ",".join(str(n) for n in self.nodes) or "none"
        return (f"lease #{self.lease_id} ({self.component}, owner {self.owner}, nodes {nodes}, "
                f"generation {self.generation}, ledger {self.ledger!r}) held {self.age:.3f}s")

    def to_json(self) -> dict[str, object]:
        return {"lease": self.lease_id, "component": self.component.lower(), "owner": self.owner,
                "owner_kind": self.owner_kind, "generation": self.generation, "nodes": list(self.nodes),
                "age_seconds": round(self.age, 6), "ledger": self.ledger}


def owner_kind(owner: object) -> str:
    """A bounded label for who holds a lease: the owner's `kind` (an enum's value or a string), else its type."""
    kind = getattr(owner, "kind", None)
    value = getattr(kind, "value", kind)
    if isinstance(value, str):
        return value
    return "text" if isinstance(owner, str) else type(owner).__name__


def _holder(holder: object) -> object:
    ident = getattr(holder, "id", None)
    return ident if type(ident) is int else str(holder)


def overdue_entry(lease: Borrowed[Lease[Any, Held]], now: float) -> OverdueLease:
    """What a report says about `lease` at clock reading `now`."""
    return OverdueLease(
        lease.id, lease.component.__name__, str(lease.owner), owner_kind(lease.owner), lease.generation,
        tuple(_holder(p.holder) for p in lease.pin_sets()), now - lease.acquired_at, lease.ledger.name)


class LeaseWatchdog:
    """Checks one ledger for leases held longer than `max_age` seconds (its clock's seconds).

    `check()` returns every lease overdue now, oldest first, and logs the ones
    not reported before (a warning each, through `log`, default the
    ``leases.watchdog`` logger); `reported` counts those log lines. A lease
    that is released stops being listed; a lease is reported once however
    many checks see it.
    """

    __slots__ = ("ledger", "max_age", "reported", "_seen", "_log", "_last")

    def __init__(self, ledger: LeaseLedger, max_age: float, *,
                 log: Callable[[str], None] | None = None) -> None:
        if isinstance(max_age, bool) or not isinstance(max_age, (int, float)) \
                or not math.isfinite(max_age) or max_age <= 0:
            raise WatchdogError(f"lease watchdog of ledger {ledger.name!r}: the age limit must be a finite "
                                f"number of seconds > 0, got {max_age!r}")
        if ledger.clock is None:
            raise WatchdogError(f"lease watchdog of ledger {ledger.name!r}: the ledger has no clock to age "
                                f"leases with (LeaseLedger(clock=...))")
        self.ledger = ledger
        self.max_age = float(max_age)
        self.reported = 0
        self._seen: set[int] = set()
        self._log = log if log is not None else LOGGER.warning
        self._last: list[OverdueLease] = []

    def check(self) -> list[OverdueLease]:
        """The leases held longer than the limit now; the new ones are logged."""
        clock = self.ledger.clock
        assert clock is not None
        now = clock()
        overdue = [overdue_entry(lease, now) for lease in self.ledger.held_since(now - self.max_age)]
        ids = {entry.lease_id for entry in overdue}
        for entry in overdue:
            if entry.lease_id not in self._seen:
                self.reported += 1
                self._log(f"lease watchdog: {entry.describe()}, past the limit of {self.max_age:g}s "
                          f"(not released: its owner still holds it)")
        self._seen = ids
        self._last = overdue
        return overdue

    @property
    def last(self) -> list[OverdueLease]:
        """What the latest `check()` found (empty before the first)."""
        return list(self._last)

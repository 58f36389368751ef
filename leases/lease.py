"""`Lease[C, S]`: a generation-tagged capability token for one component."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Generic, TypeVar, final

from leases.errors import DoubleReleaseError, LeaseInfo, StaleLeaseError
from leases.linear import consumes, self_checked
from leases.state import Held, Released, S, Settle

if TYPE_CHECKING:
    from leases.ledger import LeaseLedger
    from leases.pinset import PinSet

C = TypeVar("C")

_REVOKED = Settle.REVOKED
_STALE = Settle.STALE


@final
class Lease(Generic[C, S]):
    """A live (`Held`) or consumed (`Released`) claim on holders for one component.

    Issued only by `LeaseLedger.acquire`. The state parameter is phantom: the
    object is the same before and after `release()`, only its static type moves
    from `Lease[C, Held]` to `Lease[C, Released]`, which has no `release`.
    Pin sets refer to leases weakly, so a lease whose last strong reference
    dies while held is a leak: it drops out of its pin sets and the ledger
    records it (see `LeaseLedger`).

    Every field is written by the issuing ledger and only read elsewhere:
    `pinned` is the tuple of pin sets the lease sits in while held (None when
    none; read it through `pin_sets()`), `outcome` how it stopped being held,
    `acquired_at` the ledger clock's reading at acquisition (0.0 when the
    ledger has no clock).
    """

    __slots__ = (
        "id",
        "generation",
        "component",
        "owner",
        "site",
        "ledger",
        "outcome",
        "pinned",
        "acquired_at",
        "__weakref__",
    )

    id: int
    generation: int
    component: type[C]
    owner: object
    site: str | None
    ledger: LeaseLedger
    outcome: Settle | None
    pinned: tuple[PinSet[C], ...] | None
    acquired_at: float

    def __init__(self) -> None:
        raise TypeError("leases are issued by LeaseLedger.acquire(), not constructed")

    @property
    def held(self) -> bool:
        """Whether the lease is live: acquired, not released, revoked or leaked."""
        return self.outcome is None

    @property
    def pin_count(self) -> int:
        """How many pin sets this lease currently sits in."""
        pins = self.pinned
        return len(pins) if pins is not None else 0

    def pin_sets(self) -> tuple[PinSet[C], ...]:
        """The pin sets this lease sits in now (empty once settled): its holders are what it covers."""
        pins = self.pinned
        return pins if pins is not None else ()

    def info(self) -> LeaseInfo:
        """An immutable snapshot of who this lease is, for errors and reports."""
        return LeaseInfo(
            self.id,
            self.component.__name__,
            str(self.owner),
            self.generation,
            self.ledger.name,
            self.site,
        )

    def describe(self) -> str:
        return self.info().describe()

    def __repr__(self) -> str:
        state = "held" if self.outcome is None else self.outcome.value
        return (
            f"<Lease #{self.id} {self.component.__name__} gen={self.generation} "
            f"owner={str(self.owner)!r} {state}>"
        )

    def ensure_current(self) -> None:
        """Raise `StaleLeaseError` unless the lease is held in the ledger's current epoch."""
        if self.outcome is None:
            return
        if self.outcome is _REVOKED or self.outcome is _STALE:
            raise StaleLeaseError(
                f"{self.describe()} was revoked when ledger {self.ledger.name!r} advanced "
                f"to epoch {self.ledger.epoch}",
                lease=self.info(),
            )
        raise DoubleReleaseError(
            f"{self.describe()} is no longer held ({self.outcome.value})", lease=self.info()
        )

    @consumes
    @self_checked
    def release(self: Lease[C, Held]) -> Lease[C, Released]:
        """Give the lease back; it leaves every pin set. Returns it typed `Released`.

        A lease revoked by `LeaseLedger.advance_epoch` still has to be released
        by its owner: that release succeeds, sets `outcome` to `Settle.STALE`
        and counts a stale settle; it never frees anything newer. Releasing
        twice raises `DoubleReleaseError`; releasing from a thread other than
        the ledger's raises `WrongThreadError`. The ledger does the work
        (`LeaseLedger.settle`).
        """
        self.ledger.settle(self)
        return self  # type: ignore[return-value]  # the phantom state changes, the object does not

    def __del__(self) -> None:
        try:
            outcome = self.outcome
        except AttributeError:  # never issued: `Lease()` raised in __init__
            return
        if (outcome is None or outcome is _REVOKED) and not sys.is_finalizing():
            self.ledger.report_leak(self)

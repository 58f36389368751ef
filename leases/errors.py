"""Typed errors of the lease runtime; every message names the lease it is about."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_raised: dict[str, int] = {}


def count_raised(error_type: type[BaseException]) -> None:
    """Count one typed error of `error_type` (its constructor calls this: errors are raised where built)."""
    name = error_type.__name__
    _raised[name] = _raised.get(name, 0) + 1


def raised_counts() -> dict[str, int]:
    """Typed errors built so far in this process by class name (LeaseError and unicache's CacheError kinds).

    Counted on the error path only: what metrics export as misuse errors.
    """
    return dict(_raised)


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """An immutable snapshot of a lease's identity, safe to keep after the lease dies."""

    id: int
    component: str
    owner: str
    generation: int
    ledger: str
    site: str | None

    def describe(self) -> str:
        where = f", acquired at {self.site}" if self.site else ""
        return (
            f"lease #{self.id} (component {self.component}, owner {self.owner!r}, "
            f"generation {self.generation}, ledger {self.ledger!r}{where})"
        )


class LeaseError(Exception):
    """Base of every error the lease runtime raises.

    `lease` is the snapshot of the lease involved, when there is one. Every
    instance built is counted by class (`raised_counts`).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> LeaseError:
        count_raised(cls)
        return super().__new__(cls, *args)

    def __init__(self, message: str, *, lease: LeaseInfo | None = None) -> None:
        super().__init__(message)
        self.lease = lease


class DoubleReleaseError(LeaseError):
    """A lease, or an instance of a `@linear` class, was consumed a second time."""


class StaleLeaseError(LeaseError):
    """A lease revoked by an epoch advance was used as if it were still current."""


class ForeignLeaseError(LeaseError):
    """A lease was handed to a ledger (or a pin set of it) that did not issue it."""


class WrongThreadError(LeaseError):
    """A ledger operation ran on a thread other than the ledger's owner thread."""


class ComponentMismatchError(LeaseError, TypeError):
    """A lease of one component was put into a pin set of another."""


class LeaseArgumentError(LeaseError, TypeError):
    """A lease-runtime call got an argument of the wrong kind; nothing was issued or changed.

    A component that is not a marker class, an owner of None, `pins` that is
    not an iterable of `PinSet`, or something other than a lease handed to
    `settle`, `pin` or `unpin`.
    """


class DuplicatePinError(LeaseError, ValueError):
    """One pin set was listed twice in a single `acquire`; nothing was issued."""


class LeaseLeakError(LeaseError):
    """Strict mode: leases died while held; `leaks` lists each with its site."""

    def __init__(self, message: str, leaks: tuple[LeaseInfo, ...]) -> None:
        super().__init__(message, lease=leaks[0] if leaks else None)
        self.leaks = leaks

"""`PinSet[C]`: the holder-side weak set of live leases of one component."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

from leases.state import Held

if TYPE_CHECKING:
    from leases.lease import Lease

C = TypeVar("C")


class PinSet(Generic[C]):
    """The leases of component `C` that currently pin one holder (a tree node).

    Weak: a pin set never keeps a lease alive and never owns one. Leases enter
    through `LeaseLedger.acquire(..., pins=...)` or `LeaseLedger.pin` and leave
    when released, revoked or leaked. Storage is allocated on the first pin, so
    an empty set costs only this object; a holder that is rarely pinned can keep
    `None` in its slot and create the set on first use. Iteration works on a
    snapshot, so it is safe to release leases while iterating.
    """

    __slots__ = ("component", "holder", "_refs")

    component: type[C]
    holder: object
    _refs: dict[int, weakref.ref[Lease[C, Held]]] | None

    def __init__(self, component: type[C], holder: object = None) -> None:
        self.component = component
        self.holder = holder
        self._refs = None

    def __contains__(self, lease: object) -> bool:
        refs = self._refs
        if refs is None:
            return False
        ref = refs.get(getattr(lease, "id", -1))
        return ref is not None and ref() is lease and getattr(lease, "outcome", 0) is None

    def __iter__(self) -> Iterator[Lease[C, Held]]:
        refs = self._refs
        if not refs:
            return iter(())
        return iter([lease for r in list(refs.values()) if (lease := r()) is not None and lease.outcome is None])

    def __len__(self) -> int:
        refs = self._refs
        if not refs:
            return 0
        return sum(1 for r in list(refs.values()) if (lease := r()) is not None and lease.outcome is None)

    def __bool__(self) -> bool:
        refs = self._refs
        if not refs:
            return False
        for r in list(refs.values()):
            lease = r()
            if lease is not None and lease.outcome is None:
                return True
        return False

    def ids(self) -> list[int]:
        """Ids of the live leases in this set, in pin order."""
        return [lease.id for lease in self]

    def __repr__(self) -> str:
        ids = ", ".join(f"#{i}" for i in self.ids())
        return f"PinSet[{self.component.__name__}]({{{ids}}}, holder={self.holder!r})"

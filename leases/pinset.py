"""`PinSet[C]`: the holder-side weak set of live leases of one component."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Generic, TypeVar, cast, overload

from typing_extensions import TypeVar as DefaultTypeVar

from leases.state import Held

if TYPE_CHECKING:
    from leases.lease import Lease

C = TypeVar("C")
H = DefaultTypeVar("H", covariant=True, default=object)


class PinSet(Generic[C, H]):
    """The leases of component `C` that currently pin one holder of type `H` (a tree node).

    `PinSet[C]` leaves the holder type open (`object`); an engine types its
    holders (`PinSet[Full, Node]`) so that whatever walks from a lease to the
    holders it covers (`Lease.pin_sets()`, then `holder`) gets them typed.

    Weak: a pin set never keeps a lease alive and never owns one. Leases enter
    through `LeaseLedger.acquire(..., pins=...)` or `LeaseLedger.pin` and leave
    when released, revoked or leaked. Storage is allocated on the first pin, so
    an empty set costs only this object; a holder that is rarely pinned can keep
    `None` in its slot and create the set on first use. Iteration works on a
    snapshot, so it is safe to release leases while iterating.
    """

    __slots__ = ("component", "_holder", "_refs")

    component: type[C]
    _holder: H
    _refs: dict[int, weakref.ref[Lease[C, Held]]] | None

    @overload
    def __init__(self: PinSet[C, None], component: type[C]) -> None: ...
    @overload
    def __init__(self, component: type[C], holder: H) -> None: ...
    def __init__(self, component: type[C], holder: object = None) -> None:
        self.component = component
        self._holder = cast(H, holder)
        self._refs = None

    @property
    def holder(self) -> H:
        """What this set pins (fixed at creation)."""
        return self._holder

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

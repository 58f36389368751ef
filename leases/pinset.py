"""`PinSet[C]`: the holder-side weak set of live leases of one component."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from typing_extensions import TypeVar as DefaultTypeVar

from leases.borrow import Borrowed
from leases.errors import LeaseArgumentError
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

    A pin set serves one ledger at a time: lease ids are unique per ledger, and
    `link` refuses a lease whose id the set already holds.
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
        if not isinstance(component, type):
            raise LeaseArgumentError(
                f"PinSet(component=...): a component is a marker class, got {component!r} "
                f"({type(component).__name__})"
            )
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

    def has(self, lease_id: int) -> bool:
        """Whether a held lease with this id sits in this set."""
        refs = self._refs
        if refs is None:
            return False
        ref = refs.get(lease_id)
        lease = ref() if ref is not None else None
        return lease is not None and lease.outcome is None

    def __iter__(self) -> Iterator[Borrowed[Lease[C, Held]]]:
        """The held leases in this set (a snapshot; their owners keep them)."""
        refs = self._refs
        if not refs:
            return iter(())
        out: list[Borrowed[Lease[C, Held]]] = []
        for r in list(refs.values()):
            lease = r()
            if lease is not None and lease.outcome is None:
                out.append(lease)
        return iter(out)

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

    @staticmethod
    def link(pins: tuple[object, ...], component: type[Any], lease_id: int, ref: weakref.ref[Any]) -> object:
        """Enter one lease into every set of `pins`, all or none; the ledger's half of acquire and pin.

        Returns None once every set holds `ref` under `lease_id`. Otherwise
        nothing is entered (sets already done are rolled back) and the first
        offending member of `pins` is returned for the ledger to report: not
        a `PinSet`, a set of another component, a set listed twice, or a set
        already holding `lease_id` (a lease of another ledger).
        """
        p: object = None
        try:
            for p in pins:
                if p.component is not component:  # type: ignore[attr-defined]
                    break
                refs = p._refs  # type: ignore[attr-defined]
                if refs is None:
                    p._refs = {lease_id: ref}  # type: ignore[attr-defined]
                elif lease_id in refs:
                    break
                else:
                    refs[lease_id] = ref
            else:
                return None
        except AttributeError:  # not a PinSet: only pin sets have both `component` and `_refs`
            pass
        PinSet._withdraw(pins, lease_id, ref)
        return p

    @staticmethod
    def unlink(pins: tuple[PinSet[Any, Any], ...], lease_id: int) -> None:
        """Take lease `lease_id` out of every set of `pins`: what release, revoke, leak and unpin share.

        Every set a lease sits in has storage (`link` allocated it).
        """
        for p in pins:
            try:
                del p._refs[lease_id]  # type: ignore[union-attr]
            except KeyError:  # dropped already (a set listed by an unpinned or forgotten lease)
                pass

    @staticmethod
    def _withdraw(pins: tuple[object, ...], lease_id: int, ref: weakref.ref[Any]) -> None:
        """Undo a `link` that stopped part-way: drop `ref` wherever it went in."""
        PinSet.unlink(
            tuple(p for p in pins
                  if isinstance(p, PinSet) and p._refs is not None and p._refs.get(lease_id) is ref),
            lease_id,
        )

    def forget(self, lease_id: int) -> bool:
        """Fault injection: drop lease `lease_id` from this set behind its ledger's back.

        The lease still lists the set, which breaks the runtime's invariant on
        purpose: `unicache simulate --inject pinset` uses it to prove that the
        invariant checks catch a dropped pin. Nothing else may call it.
        Returns whether the id was there.
        """
        refs = self._refs
        return refs is not None and refs.pop(lease_id, None) is not None

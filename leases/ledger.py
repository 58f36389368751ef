"""`LeaseLedger`: issues leases, keeps the live registry, epochs, counters and the event ring."""

from __future__ import annotations

import sys
import threading
from bisect import bisect_left
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, NamedTuple, TypeVar

from leases.borrow import Borrowed
from leases.errors import (
    ComponentMismatchError,
    DoubleReleaseError,
    DuplicatePinError,
    ForeignLeaseError,
    LeaseArgumentError,
    LeaseError,
    LeaseInfo,
    LeaseLeakError,
    StaleLeaseError,
    WrongThreadError,
)
from leases.events import EventKind, LeaseEvent
from leases.holdtimes import BUCKETS, HoldTimes
from leases.lease import Lease
from leases.pinset import PinSet
from leases.state import Held, Settle

C = TypeVar("C")

_get_ident: Final = threading.get_ident
_new_lease: Final = Lease.__new__
_weakref: Final = weakref.ref
_link: Final = PinSet.link
_unlink: Final = PinSet.unlink
_LEASE: Final = Lease
_NO_PINS: Final[tuple[()]] = ()
_ACQUIRE: Final = EventKind.ACQUIRE
_RELEASE: Final = EventKind.RELEASE
_STALE_EVENT: Final = EventKind.STALE
_RELEASED: Final = Settle.RELEASED
_REVOKED: Final = Settle.REVOKED
_STALE: Final = Settle.STALE
_HOLD_BUCKETS: Final = BUCKETS
_bucket: Final = bisect_left
"""Module constants are `Final`: mypyc keeps them in C statics instead of looking them up per use."""

_leak_listeners: list[Callable[[LeaseInfo], None]] = []


def add_leak_listener(listener: Callable[[LeaseInfo], None]) -> None:
    """Call `listener` with every leak of every ledger, from whichever thread finds it."""
    _leak_listeners.append(listener)


def remove_leak_listener(listener: Callable[[LeaseInfo], None]) -> None:
    _leak_listeners.remove(listener)


class _PendingLeak(NamedTuple):
    info: LeaseInfo
    lease_id: int
    pins: tuple[PinSet[Any], ...] | None
    was_revoked: bool


# (seq, step, kind, lease id, component (class or name), owner, generation,
#  pin sets or node ids, ticket, detail): built cheaply, decoded by events().
_Record = tuple[int, int, EventKind, "int | None", "type[Any] | str | None", "str | None", int,
                tuple[object, ...], "int | None", str]


class LeaseLedger:
    """Issues leases of every component for one cache, and accounts for each of them.

    Epochs: `advance_epoch()` revokes every held lease at once (a cache reset).
    Revoked leases leave their pin sets immediately and stop counting as live;
    their owners still release them, and that release returns normally with
    `outcome == Settle.STALE`. Counters always satisfy
    `acquired == live + released + revoked + leaked_while_held`.

    Threads: a ledger belongs to the thread that created it (`bind_thread()`
    moves it). acquire, release, settle, pin, unpin, advance_epoch and check
    raise `WrongThreadError` anywhere else. Other threads may read immutable
    lease fields and post to a `Mailbox`; a lease that dies on another thread
    is recorded there and accounted on the owner thread's next ledger call.

    Leaks: a lease whose last strong reference dies while held (or revoked and
    not yet released) emits a `ResourceWarning` at once and is accounted on the
    next ledger call: it leaves its pin sets, counts in `leaked`, and is listed
    by `check()`, which raises `LeaseLeakError` in strict mode.

    `debug=True` records each lease's acquisition site; `history` bounds the
    event ring (0 turns it off: the cheapest setting).

    `clock` (seconds, monotonic: `time.monotonic`, or a fake one in tests)
    stamps each lease's `acquired_at` and adds its hold time to a per-component
    `HoldTimes` at release; it is what `oldest()`, `held_since()` and a
    watchdog measure ages with. Without one, leases carry 0.0 and no hold
    time is kept (the cheapest setting).
    """

    def __init__(
        self,
        name: str,
        *,
        strict: bool = False,
        debug: bool = False,
        history: int = 1024,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if history < 0:
            raise ValueError(f"ledger {name!r}: history must be >= 0, got {history}")
        self.name = name
        self.strict = strict
        self.debug = debug
        self.history = history
        self.epoch = 0
        self.step = 0
        self.revoked = 0
        self.stale = 0
        self._leaked = 0
        self._leaked_revoked = 0
        self._next_id = 1
        self._seq = 0
        self._live: dict[int, weakref.ref[Lease[Any, Held]]] = {}
        self._pending_leaks: deque[_PendingLeak] = deque()
        self._leaks: list[LeaseInfo] = []
        self._unchecked: list[LeaseInfo] = []
        self._log: deque[_Record] | None = deque(maxlen=history) if history else None
        self._thread_id = _get_ident()
        self.clock = clock
        self._hold_times: dict[type[Any], HoldTimes] = {}

    def __repr__(self) -> str:
        return (
            f"<LeaseLedger {self.name!r} epoch={self.epoch} live={len(self._live)} "
            f"acquired={self.acquired} released={self.released}>"
        )

    def _wrong_thread(self, what: str) -> WrongThreadError:
        return WrongThreadError(
            f"ledger {self.name!r}: {what} called on thread {_get_ident()}, but the ledger "
            f"belongs to thread {self._thread_id}; post work to a Mailbox drained there"
        )

    def bind_thread(self) -> None:
        """Make the calling thread the ledger's owner thread."""
        self._thread_id = _get_ident()

    @property
    def owner_thread(self) -> int:
        return self._thread_id

    def check_thread(self, what: str) -> None:
        """Raise `WrongThreadError` naming `what` unless called on the ledger's owner thread."""
        if _get_ident() != self._thread_id:
            raise self._wrong_thread(what)

    def acquire(
        self,
        component: type[C],
        *,
        owner: object,
        pins: Iterable[PinSet[C]] = (),
        stacklevel: int = 1,
    ) -> Lease[C, Held]:
        """Issue a held lease of `component` for `owner`, pinning every set in `pins`.

        `owner` is anything whose `str()` describes the holder of the lease
        (keep it cheap: a string). `stacklevel` picks the frame recorded as the
        acquisition site in debug mode (1 = the caller of `acquire`).

        Misuse is refused before anything is issued or changed: a component
        that is not a class, an owner of None or a bad `stacklevel` raise
        `LeaseArgumentError`, and so does `pins` that is not an iterable of
        `PinSet` (a single pin set included); a set of another component
        raises `ComponentMismatchError`, one listed twice `DuplicatePinError`,
        one holding a lease of another ledger `ForeignLeaseError`.
        """
        if _get_ident() != self._thread_id:
            raise self._wrong_thread("acquire")
        if owner is None:
            raise LeaseArgumentError(
                f"ledger {self.name!r}: acquire({_name(component)}, owner=None): every lease "
                f"needs an owner that describes who holds it"
            )
        if pins is _NO_PINS:
            pinned: tuple[PinSet[C], ...] = _NO_PINS
        elif type(pins) is tuple:
            pinned = pins
        else:
            pinned = self._pin_tuple(component, pins)
        if self.debug:
            if type(stacklevel) is not int or stacklevel < 1:
                raise LeaseArgumentError(
                    f"ledger {self.name!r}: acquire(stacklevel=...) takes an int >= 1, "
                    f"got {stacklevel!r}"
                )
            site: str | None = _site(stacklevel)
        else:
            site = None
        # Not issued yet: a refusal below drops it half-built (it has no outcome, so __del__ skips it).
        lease: Lease[C, Held] = _new_lease(Lease)  # lease: ignore[lease-leak]
        lease_id = self._next_id
        ref = _weakref(lease)
        if pinned:
            bad = _link(pinned, component, lease_id, ref)
            if bad is not None:
                raise self._refusal(component, owner, pinned, bad)
            lease.pinned = pinned
        else:
            if type(component) is not type and not isinstance(component, type):
                raise self._not_a_component(component)
            lease.pinned = None
        if self._pending_leaks:
            self._drain_leaks()
        self._next_id = lease_id + 1
        lease.id = lease_id
        lease.generation = self.epoch
        lease.component = component
        lease.owner = owner
        lease.site = site
        lease.ledger = self
        lease.outcome = None
        clock = self.clock
        lease.acquired_at = clock() if clock is not None else 0.0
        self._live[lease_id] = ref
        if self._log is not None:
            self._log_lease(_ACQUIRE, lease, pinned)
        return lease

    def _not_a_component(self, component: object) -> LeaseArgumentError:
        return LeaseArgumentError(
            f"ledger {self.name!r}: acquire(component=...) takes a marker class, "
            f"got {component!r} ({type(component).__name__})"
        )

    def _pin_tuple(self, component: object, pins: object) -> tuple[PinSet[Any], ...]:
        """`acquire`'s `pins` as a tuple, refusing a lone pin set, a string or a non-iterable."""
        if isinstance(pins, (PinSet, str, bytes)) or not isinstance(pins, Iterable):
            hint = "; pass pins=[the_set]" if isinstance(pins, PinSet) else ""
            raise LeaseArgumentError(
                f"ledger {self.name!r}: acquire({_name(component)}, pins=...) takes an iterable "
                f"of PinSet, got {pins!r} ({type(pins).__name__}){hint}"
            )
        return tuple(pins)

    def _refusal(
        self, component: object, owner: object, pins: tuple[object, ...], bad: object
    ) -> LeaseError:
        """The typed error for the member of `pins` that `PinSet.link` turned down."""
        if not isinstance(component, type):
            return self._not_a_component(component)
        where = (f"ledger {self.name!r}: acquire({component.__name__}, owner={str(owner)!r}, "
                 f"pins=...): pins[{_index(pins, bad)}]")
        if not isinstance(bad, PinSet):
            return LeaseArgumentError(f"{where} is {bad!r} ({type(bad).__name__}), not a PinSet")
        if bad.component is not component:
            return ComponentMismatchError(
                f"{where} is {bad!r}, a pin set of {bad.component.__name__}, not {component.__name__}"
            )
        if sum(1 for p in pins if p is bad) > 1:
            return DuplicatePinError(f"{where} is {bad!r}, which pins lists more than once")
        return ForeignLeaseError(
            f"{where} is {bad!r}, which already holds a lease #{self._next_id} of another "
            f"ledger; a pin set serves one ledger"
        )

    def settle(self, lease: Lease[C, Held]) -> Settle:  # lease: ignore[lease-leak]
        """Release `lease` through this ledger, refusing one it did not issue.

        Returns `Settle.RELEASED`, or `Settle.STALE` when the lease had been
        revoked by an epoch advance (see `Lease.release`, which calls this).
        """
        if type(lease) is not _LEASE:
            raise self._not_a_lease("settle", lease)
        if lease.ledger is not self:
            raise ForeignLeaseError(
                f"{lease.describe()} was handed to ledger {self.name!r}, which did not issue it",
                lease=lease.info(),
            )
        if _get_ident() != self._thread_id:
            raise WrongThreadError(
                f"{lease.describe()} released on thread {_get_ident()}, but ledger "
                f"{self.name!r} belongs to thread {self._thread_id}; deliver the "
                f"release through a Mailbox drained on the owner thread",
                lease=lease.info(),
            )
        outcome = lease.outcome
        if outcome is None:
            lease_id = lease.id
            pins = lease.pinned
            if pins is not None:
                _unlink(pins, lease_id)
                lease.pinned = None
            del self._live[lease_id]
            lease.outcome = _RELEASED
            clock = self.clock
            if clock is not None:
                held = clock() - lease.acquired_at
                times = self._hold_times.get(lease.component)
                if times is None:
                    times = self._hold_times[lease.component] = HoldTimes()
                times.counts[_bucket(_HOLD_BUCKETS, held)] += 1
                times.total += held
                times.count += 1
            if self._log is not None:
                self._log_lease(_RELEASE, lease, pins or ())
            return _RELEASED
        if outcome is _REVOKED:
            lease.outcome = _STALE
            self.stale += 1
            if self._log is not None:
                self._log_lease(_STALE_EVENT, lease, ())
            return _STALE
        raise DoubleReleaseError(
            f"{lease.describe()} was already settled ({outcome.value}); "
            f"a lease is released exactly once",
            lease=lease.info(),
        )

    def hold_times(self) -> dict[str, HoldTimes]:
        """Hold times of the leases released so far, by component name (empty without a clock)."""
        return {component.__name__: times for component, times in list(self._hold_times.items())}

    def oldest(self) -> Borrowed[Lease[Any, Held]] | None:
        """The live lease acquired first (the longest held), or None.

        Safe to call from another thread (a metrics scrape): it reads a copy of the registry.
        """
        for ref in list(self._live.values()):
            lease = ref()
            if lease is not None and lease.outcome is None:
                return lease
        return None

    def held_since(self, instant: float) -> list[Borrowed[Lease[Any, Held]]]:
        """The live leases acquired at or before `instant` by the ledger's clock, oldest first.

        Reads the registry in acquisition order and stops at the first younger
        lease, so the cost is the number returned (the clock is monotonic).
        Safe from another thread, as `oldest`.
        """
        out: list[Borrowed[Lease[Any, Held]]] = []
        for ref in list(self._live.values()):
            lease = ref()
            if lease is None or lease.outcome is not None:
                continue
            if lease.acquired_at > instant:
                break
            out.append(lease)
        return out

    def _not_a_lease(self, what: str, given: object) -> LeaseArgumentError:
        return LeaseArgumentError(
            f"ledger {self.name!r}: {what}() takes a Lease, got {given!r} ({type(given).__name__})"
        )

    def pin(self, lease: Borrowed[Lease[C, Held]], pins: PinSet[C]) -> None:
        """Add a held, current lease of this ledger to one more pin set (idempotent)."""
        self._check_usable(lease, "pin")
        if not isinstance(pins, PinSet):
            raise LeaseArgumentError(
                f"ledger {self.name!r}: pin({lease.describe()}, pins=...) takes a PinSet, "
                f"got {pins!r} ({type(pins).__name__})",
                lease=lease.info(),
            )
        if pins.component is not lease.component:
            raise ComponentMismatchError(
                f"{lease.describe()} cannot pin {pins!r}, a pin set of "
                f"{pins.component.__name__}",
                lease=lease.info(),
            )
        held = lease.pinned
        if held is not None and any(p is pins for p in held):
            return
        if _link((pins,), lease.component, lease.id, self._live[lease.id]) is not None:
            raise ForeignLeaseError(
                f"{lease.describe()} cannot pin {pins!r}: it already holds a lease "
                f"#{lease.id} of another ledger; a pin set serves one ledger",
                lease=lease.info(),
            )
        lease.pinned = (pins,) if held is None else held + (pins,)
        if self._log is not None:
            self._log_lease(EventKind.PIN, lease, (pins,))

    def unpin(self, lease: Borrowed[Lease[C, Held]], pins: PinSet[C]) -> None:
        """Take a held lease out of one pin set without releasing it (no-op if absent)."""
        self._check_usable(lease, "unpin")
        if not isinstance(pins, PinSet):
            raise LeaseArgumentError(
                f"ledger {self.name!r}: unpin({lease.describe()}, pins=...) takes a PinSet, "
                f"got {pins!r} ({type(pins).__name__})",
                lease=lease.info(),
            )
        held = lease.pinned
        if held is None or not any(p is pins for p in held):
            return
        _unlink((pins,), lease.id)
        lease.pinned = tuple(p for p in held if p is not pins) or None
        if self._log is not None:
            self._log_lease(EventKind.UNPIN, lease, (pins,))

    def _check_usable(self, lease: Borrowed[Lease[Any, Held]], what: str) -> None:
        if _get_ident() != self._thread_id:
            raise self._wrong_thread(what)
        if type(lease) is not _LEASE:
            raise self._not_a_lease(what, lease)
        if lease.ledger is not self:
            raise ForeignLeaseError(
                f"{lease.describe()} was handed to ledger {self.name!r} ({what}), "
                f"which did not issue it",
                lease=lease.info(),
            )
        if lease.outcome is not None:
            if lease.outcome is _REVOKED or lease.outcome is Settle.STALE:
                raise StaleLeaseError(
                    f"{lease.describe()} was revoked at an epoch advance (ledger epoch "
                    f"{self.epoch}); it cannot {what}",
                    lease=lease.info(),
                )
            lease.ensure_current()

    def advance_epoch(self) -> int:
        """Revoke every held lease (they leave all pin sets) and start a new epoch."""
        if _get_ident() != self._thread_id:
            raise self._wrong_thread("advance_epoch")
        if self._pending_leaks:
            self._drain_leaks()
        for ref in list(self._live.values()):
            lease = ref()
            if lease is None:
                continue
            pins = lease.pinned
            if pins is not None:
                _unlink(pins, lease.id)
                lease.pinned = None
            lease.outcome = _REVOKED
            self.revoked += 1
            if self._log is not None:
                self._log_lease(EventKind.REVOKE, lease, ())
        self._live.clear()
        self.epoch += 1
        if self._log is not None:
            self.record(EventKind.EPOCH, detail=f"epoch {self.epoch}")
        return self.epoch

    def live(self) -> list[Borrowed[Lease[Any, Held]]]:
        """Every held lease of the current epoch, in acquisition order (their owners keep them)."""
        if self._pending_leaks and _get_ident() == self._thread_id:
            self._drain_leaks()
        out: list[Borrowed[Lease[Any, Held]]] = []
        for ref in list(self._live.values()):
            lease = ref()
            if lease is not None and lease.outcome is None:
                out.append(lease)
        return out

    def get(self, lease_id: int) -> Borrowed[Lease[Any, Held]] | None:
        """The live lease with this id, or None."""
        ref = self._live.get(lease_id)
        lease = ref() if ref is not None else None
        return lease if lease is not None and lease.outcome is None else None

    @property
    def acquired(self) -> int:
        """Leases issued so far (ids are never reused, so this is the last id)."""
        return self._next_id - 1

    @property
    def released(self) -> int:
        """Leases released while current (derived from the other counters)."""
        return self.acquired - self.live_count - self.revoked - self.leaked_while_held

    @property
    def live_count(self) -> int:
        if self._pending_leaks and _get_ident() == self._thread_id:
            self._drain_leaks()
        return len(self._live)

    @property
    def leaked(self) -> int:
        """Leases whose last reference died while held or revoked-but-unreleased."""
        if self._pending_leaks and _get_ident() == self._thread_id:
            self._drain_leaks()
        return self._leaked

    @property
    def leaked_while_held(self) -> int:
        """The part of `leaked` that was still live (not revoked) when it died."""
        return self.leaked - self._leaked_revoked

    def leaks(self) -> list[LeaseInfo]:
        """Every leak recorded so far, oldest first."""
        if self._pending_leaks and _get_ident() == self._thread_id:
            self._drain_leaks()
        return list(self._leaks)

    def check(self) -> list[LeaseInfo]:
        """Account pending leaks; return those not reported by an earlier check.

        In strict mode raise `LeaseLeakError` listing each with its site instead.
        """
        if _get_ident() != self._thread_id:
            raise self._wrong_thread("check")
        self._drain_leaks()
        new, self._unchecked = self._unchecked, []
        if new and self.strict:
            lines = "\n".join(f"  - {info.describe()}" for info in new)
            raise LeaseLeakError(
                f"ledger {self.name!r}: {len(new)} lease(s) leaked (died while held):\n{lines}",
                tuple(new),
            )
        return new

    def report_leak(self, lease: Lease[Any, Any]) -> None:
        """Queue the leak of `lease`, dying held or revoked: `Lease.__del__` calls this, on any thread.

        Warns at once; the owner thread accounts the leak on its next ledger call.
        """
        info = lease.info()
        self._pending_leaks.append(
            _PendingLeak(info, lease.id, lease.pinned, lease.outcome is _REVOKED)
        )
        warnings.warn(
            f"{info.describe()} leaked: its last reference died while it was held",
            ResourceWarning,
            source=lease,
            stacklevel=2,
        )
        for listener in list(_leak_listeners):
            listener(info)

    def _drain_leaks(self) -> None:
        pending = self._pending_leaks
        while pending:
            leak = pending.popleft()
            if not leak.was_revoked:
                self._live.pop(leak.lease_id, None)
            if leak.pins is not None:
                _unlink(leak.pins, leak.lease_id)
            self._leaked += 1
            self._leaked_revoked += leak.was_revoked
            self._leaks.append(leak.info)
            self._unchecked.append(leak.info)
            if self._log is not None:
                info = leak.info
                self._seq += 1
                self._log.append(
                    (self._seq, self.step, EventKind.LEAK, info.id, info.component,
                     info.owner, info.generation,
                     tuple(_label(p.holder) for p in leak.pins) if leak.pins else (), None,
                     f"acquired at {info.site}" if info.site else "")
                )

    def _log_lease(
        self, kind: EventKind, lease: Lease[Any, Any], pins: tuple[PinSet[Any], ...]
    ) -> None:
        log = self._log
        assert log is not None
        self._seq += 1
        owner = lease.owner
        ticket = getattr(owner, "ticket_id", None)
        log.append(
            (self._seq, self.step, kind, lease.id, lease.component,
             owner if type(owner) is str else str(owner), lease.generation,
             pins or (), ticket if type(ticket) is int else None, "")
        )

    def record(
        self,
        kind: EventKind,
        *,
        detail: str = "",
        nodes: Iterable[object] = (),
        ticket: int | None = None,
        component: str | None = None,
        lease_id: int | None = None,
        owner: str | None = None,
        generation: int | None = None,
    ) -> None:
        """Append an engine event (ack, failed transfer, blocked eviction, stale ack, ...).

        `generation` is the one the event is about (an ack's own); the
        current epoch when not given.
        """
        log = self._log
        if log is None:
            return
        self._seq += 1
        log.append(
            (self._seq, self.step, kind, lease_id, component, owner,
             self.epoch if generation is None else generation, tuple(nodes), ticket, detail)
        )

    def events(self, *, last: int | None = None) -> list[LeaseEvent]:
        """The event ring, oldest first (only the newest `last` when given)."""
        log = self._log
        if log is None:
            return []
        records = list(log)
        if last is not None:
            records = records[-last:] if last > 0 else []
        return [
            LeaseEvent(seq, step, kind, lease_id,
                       component if component is None or isinstance(component, str)
                       else component.__name__,
                       owner, generation, _holders(nodes), ticket, detail)
            for (seq, step, kind, lease_id, component, owner, generation, nodes, ticket, detail)
            in records
        ]

    def ticket_events(self, ticket: int) -> list[LeaseEvent]:
        """The ring's events that name `ticket`, newest first (filtered before they are built)."""
        return list(self.iter_ticket_events(ticket))

    def iter_ticket_events(self, ticket: int) -> Iterator[LeaseEvent]:
        """`ticket_events` lazily: the ring is scanned newest first only as far as the caller reads.

        Do not record events while iterating (the ring is a deque).
        """
        log = self._log
        if log is None:
            return
        for (seq, step, kind, lease_id, component, owner, generation, nodes, tid, detail) in reversed(log):
            if tid == ticket:
                yield LeaseEvent(seq, step, kind, lease_id,
                                 component if component is None or isinstance(component, str)
                                 else component.__name__,
                                 owner, generation, _holders(nodes), tid, detail)

    def counters(self) -> dict[str, int]:
        """Every counter, by name."""
        return {
            "acquired": self.acquired,
            "released": self.released,
            "revoked": self.revoked,
            "stale": self.stale,
            "leaked": self.leaked,
            "live": self.live_count,
            "epoch": self.epoch,
        }


def _name(component: object) -> str:
    """A component's name for a message, even when what was given is not a class."""
    return component.__name__ if isinstance(component, type) else repr(component)


def _index(pins: tuple[object, ...], member: object) -> int:
    """Where `member` (by identity; its second place when listed twice) sits in `pins`."""
    places = [i for i, p in enumerate(pins) if p is member]
    return places[1] if len(places) > 1 else places[0]


def _holders(nodes: tuple[object, ...]) -> tuple[object, ...]:
    """Pin sets stored by lease events become their holders' labels; engine nodes stay as given."""
    return tuple(_label(n.holder) if isinstance(n, PinSet) else n for n in nodes)


def _label(holder: object) -> object:
    """How an event names a holder: its integer `id` when it has one (a tree node), else itself."""
    ident = getattr(holder, "id", None)
    return ident if type(ident) is int else holder


_OWN_FRAMES = 0 if __file__.endswith((".so", ".pyd")) else 2
"""Frames of `_site` and `acquire` below the caller's: none when mypyc compiled this module."""


def _site(stacklevel: int) -> str:
    frame = sys._getframe(stacklevel - 1 + _OWN_FRAMES)
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno}:{code.co_name}"

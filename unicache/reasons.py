"""Why the cache refused or did nothing: typed reasons for every refusal, skip and no-op.

An operation that returns "nothing" (`load_back` → None, `alloc_device` →
None, a lock of a host-only path, a pinned eviction or reclaim candidate, a
skipped Mamba copy, a stale or duplicate ack) notes a `Reason` on the
cache's `ReasonLog`: `cache.reasons.last` is the newest one, and
`cache.reasons.counts()` counts them per operation, kind and component
(`"load_back:missing_state:mamba"`) for reports. A reason names what to look
at next: the component, the nodes, the leases or tickets that block.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from unicache.markers import component_name
from unicache.transfer.base import Tier

if TYPE_CHECKING:
    from unicache.pools.allocator import SlotAllocator
    from unicache.tickets import Ticket


class ReasonKind(enum.Enum):
    """The cause of a refusal or no-op."""

    ROOT = "root"
    """The operation names the root: there is nothing to move or lock."""
    NOTHING_TO_MOVE = "nothing_to_move"
    """Everything the operation would move is already where it is needed."""
    MISSING_STATE = "missing_state"
    """A component's data is on neither tier (evicted, or never inserted)."""
    NO_DEVICE_ROOM = "no_device_room"
    """Device slots could not be allocated even after eviction."""
    HOST_ONLY = "host_only"
    """Nothing below the root is on device: a lock covers no tokens."""
    PINNED = "pinned"
    """An eviction or reclaim candidate is pinned by live leases."""
    DUPLICATE = "duplicate"
    """The data was already there: the extra copy's slots were freed."""
    STALE_ACK = "stale_ack"
    """An ack of an older epoch (its ticket was dropped by a reset)."""
    DUPLICATE_ACK = "duplicate_ack"
    """An ack of a ticket that has already settled."""


@dataclass(frozen=True, slots=True)
class Reason:
    """One refusal or no-op: what, why, for which component, nodes, leases and tickets.

    `needed` / `free` are slot counts for `NO_DEVICE_ROOM`, `quarantined` the
    rows a reset holds until stale acks and `tickets` the live tickets whose
    copies hold rows of that pool; `leases` are the lease ids that pin a
    `PINNED` candidate; `tickets` of an ack reason name the ack's ticket.
    """

    op: str
    kind: ReasonKind
    component: str | None = None
    nodes: tuple[int, ...] = ()
    needed: int = 0
    free: int = 0
    leases: tuple[int, ...] = ()
    tickets: tuple[int, ...] = ()
    generation: int | None = None
    quarantined: int = 0

    @property
    def key(self) -> str:
        """The counting key: `op:kind[:component]`."""
        base = f"{self.op}:{self.kind.value}"
        return base if self.component is None else f"{base}:{self.component}"

    @property
    def summary(self) -> str:
        """One line a user can act on."""
        return _summary(self)

    def to_json(self) -> dict[str, object]:
        return {
            "op": self.op,
            "kind": self.kind.value,
            "component": self.component,
            "nodes": list(self.nodes),
            "needed": self.needed,
            "free": self.free,
            "leases": list(self.leases),
            "tickets": list(self.tickets),
            "generation": self.generation,
            "quarantined": self.quarantined,
            "summary": self.summary,
        }


def _ids(prefix: str, ids: tuple[int, ...]) -> str:
    return ", ".join(f"{prefix}{i}" for i in ids)


def _summary(r: Reason) -> str:
    comp = r.component or "every component"
    nodes = _ids("#", r.nodes)
    k = r.kind
    if k is ReasonKind.ROOT:
        return f"{r.op}: the root holds no data; nothing to do"
    if k is ReasonKind.NOTHING_TO_MOVE:
        return f"{r.op}: {nodes} already on device for every component; nothing to move"
    if k is ReasonKind.MISSING_STATE:
        return (f"{r.op}: no {comp} data on device or host for {nodes}; it cannot be loaded back "
                f"(recompute it, or load back a shallower node)")
    if k is ReasonKind.NO_DEVICE_ROOM:
        where = f" for {nodes}" if nodes else ""
        held = []
        if r.quarantined:
            held.append(f"{r.quarantined} quarantined until stale acks")
        if r.tickets:
            held.append(f"rows under in-flight copies of {_ids('T', r.tickets)}")
        held.append("the rest pinned by leases")
        return (f"{r.op}: {comp} device pool has {r.free} free of {r.needed} needed{where} after eviction; "
                f"{', '.join(held)}")
    if k is ReasonKind.HOST_ONLY:
        return f"{r.op}: nothing of {nodes} is on device; the lock covers 0 tokens (load back first)"
    if k is ReasonKind.PINNED:
        return f"{r.op}: {comp} of {nodes} pinned by leases {_ids('L', r.leases)}; skipped"
    if k is ReasonKind.DUPLICATE:
        return f"{r.op}: {comp} of {nodes} was already present; {r.free} duplicate slot(s) freed"
    tickets = _ids("T", r.tickets)
    if k is ReasonKind.STALE_ACK:
        return f"{r.op}: {tickets} generation {r.generation} is older than the epoch; ack ignored"
    return f"{r.op}: {tickets} generation {r.generation} already settled; ack ignored"


def no_room(
    op: str, marker: type, device: SlotAllocator, live: Iterable[Ticket], needed: int, nodes: tuple[int, ...]
) -> Reason:
    """A `NO_DEVICE_ROOM` reason for `marker`'s device pool: its free and quarantined rows, and the
    live tickets whose copies hold rows of it (what is left is pinned by leases)."""
    tickets = tuple(
        t.id for t in live
        if t.job is not None and any(
            c.component is marker and Tier.DEVICE in (c.src_tier, c.dst_tier) for c in t.job.copies
        )
    )
    return Reason(op, ReasonKind.NO_DEVICE_ROOM, component_name(marker), nodes, needed, device.free_count,
                  tickets=tickets, quarantined=device.quarantined_count)


class ReasonLog:
    """The newest reasons (a small ring), and counts per key; `note` is cheap.

    `mark()` then `since(mark)` lists the reasons one call produced (the
    REPL shows them per command), as long as the ring still holds them.
    """

    __slots__ = ("last", "_counts", "_ring", "_seq")

    last: Reason | None
    _counts: dict[str, int]
    _ring: deque[tuple[int, Reason]]
    _seq: int

    def __init__(self, keep: int = 256) -> None:
        self.last = None
        self._counts = {}
        self._ring = deque(maxlen=keep)
        self._seq = 0

    def note(self, reason: Reason) -> None:
        self.last = reason
        key = reason.key
        self._counts[key] = self._counts.get(key, 0) + 1
        self._seq += 1
        self._ring.append((self._seq, reason))

    def mark(self) -> int:
        """A position to pass to `since`; also forgets `last`."""
        self.last = None
        return self._seq

    def since(self, mark: int) -> list[Reason]:
        """Reasons noted after `mark`, oldest first (those still in the ring)."""
        return [r for seq, r in self._ring if seq > mark]

    def counts(self) -> dict[str, int]:
        """Counts per `op:kind[:component]`, sorted by key."""
        return dict(sorted(self._counts.items()))

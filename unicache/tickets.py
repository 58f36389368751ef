"""Linear handles: lock receipts, load-back tickets and backup tickets.

Each owns one lease per component it covers and is consumed exactly once.
Every per-component part (the leases; a ticket's destination segments and
what it moved) sits in one list keyed by `ComponentIndex`, so releasing
is one loop and a new component needs no field here; `full`, `swa` and
`mamba` are typed read accessors for the three known ones. Transfer
records are kept by token position, not by node (see `segments` of each
component store), so a split of a node under an in-flight copy leaves them
valid.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any, cast

from leases import Borrowed, Held, Lease, LeaseLedger, consumes, linear

from unicache.errors import ForeignObjectError, TicketPendingError
from unicache.markers import FULL, MAMBA, SWA_IDX
from unicache.owners import LeaseOwner
from unicache.results import LoadBackResult, TicketStatus
from unicache.transfer.base import TransferJob
from unicache.tree.node import Node
from unicache.tree.pins import drop_empty

if TYPE_CHECKING:
    from unicache.markers import SWA, Full, Mamba

Segment = tuple[int, list[int]]
"""(start token position, device pages): the pages of a contiguous token range, one per page."""

HostSegment = tuple[int, "array[int]"]
"""(start token position, host pages) of a backup, compact like every host page list."""

ComponentLeases = list["Lease[Any, Held] | None"]
"""One lease (or None) per component, indexed by `ComponentIndex`, as long as the cache's
`ComponentSet.span` (a Full-only cache's holds one entry)."""


def _get(leases: ComponentLeases, i: int) -> Borrowed[Lease[Any, Held]] | None:
    """Component `i`'s lease, or None (also past the container's end: the component is not
    configured, or was registered after the holder was made)."""
    return leases[i] if i < len(leases) else None


def _release(holder: LockReceipt | TicketRecord) -> None:
    """Release each lease `holder` still holds, once (the holder's consuming methods call this).

    A pin set left empty is dropped from its node (it is created again on the
    next pin), so nodes pinned once do not keep an empty set for good.
    """
    leases = holder.leases
    for i in range(len(leases)):
        if leases[i] is not None:
            lease = leases.pop(i)  # pop + insert, not `leases[i] = None`: leasecheck follows a pop out of
            leases.insert(i, None)  # an owning container, so a missing or second release below is caught
            assert lease is not None
            sets = lease.pin_sets()
            lease.release()
            drop_empty(sets)


@linear
class LockReceipt:
    """Proof that a request locked a matched path; `UniCache.unlock` consumes it.

    Records exactly what was locked: the end node (the deepest device-resident
    node of the path asked for), its length, and the leases taken. Unlock
    releases those and nothing else.
    """

    __slots__ = (
        "id",
        "node",
        "length",
        "generation",
        "leases",
        "owner",
        "cache",
        "ledger",
        "_lease_consumed_by",
    )

    def __init__(
        self,
        receipt_id: int,
        node: Node,
        length: int,
        generation: int,
        leases: ComponentLeases,
        owner: LeaseOwner,
        ledger: LeaseLedger,
        cache: str = "",
    ) -> None:
        self.id = receipt_id
        self.node = node
        self.length = length
        self.generation = generation
        self.leases = leases
        self.owner = owner
        self.cache = cache
        self.ledger = ledger

    def __repr__(self) -> str:
        return (
            f"<LockReceipt #{self.id} node={self.node.id} len={self.length} "
            f"gen={self.generation}>"
        )

    @property
    def full(self) -> Borrowed[Lease[Full, Held]] | None:
        return cast("Lease[Full, Held] | None", _get(self.leases, FULL))

    @property
    def swa(self) -> Borrowed[Lease[SWA, Held]] | None:
        return cast("Lease[SWA, Held] | None", _get(self.leases, SWA_IDX))

    @property
    def mamba(self) -> Borrowed[Lease[Mamba, Held]] | None:
        return cast("Lease[Mamba, Held] | None", _get(self.leases, MAMBA))

    def lease_ids(self) -> list[int]:
        return [x.id for x in self.leases if x is not None]

    @consumes
    def release(self, *, ledger: LeaseLedger | None = None, cache: str = "") -> None:
        """Release every lease this receipt took (each exactly once).

        `UniCache.unlock` passes its own ledger: a receipt of another cache
        raises `ForeignObjectError` and stays unconsumed.
        """
        if ledger is not None and ledger is not self.ledger:
            raise ForeignObjectError("lock receipt", self.id, cache, self.cache)
        _release(self)


@linear
class TicketRecord:
    """Fields shared by load-back and backup tickets; `close` releases the leases, once."""

    __slots__ = (
        "_lease_consumed_by",
        "id",
        "generation",
        "owner",
        "node",
        "status",
        "leases",
        "job",
        "copy",
        "joiners",
    )

    id: int
    generation: int
    owner: LeaseOwner
    node: Node
    status: TicketStatus
    leases: ComponentLeases
    job: TransferJob | None
    copy: Borrowed[TicketRecord] | None
    joiners: list[TicketRecord] | None

    @property
    def full(self) -> Borrowed[Lease[Full, Held]] | None:
        return cast("Lease[Full, Held] | None", _get(self.leases, FULL))

    @property
    def swa(self) -> Borrowed[Lease[SWA, Held]] | None:
        return cast("Lease[SWA, Held] | None", _get(self.leases, SWA_IDX))

    @property
    def mamba(self) -> Borrowed[Lease[Mamba, Held]] | None:
        return cast("Lease[Mamba, Held] | None", _get(self.leases, MAMBA))

    def lease_ids(self) -> dict[str, int]:
        """Lease id by component name, of every lease still held."""
        return {x.component.__name__: x.id for x in self.leases if x is not None}

    def _close_joiners(self) -> None:
        """Close every joiner riding on this copy (each once), and forget the copy this one rides on."""
        self.copy = None
        riders = self.joiners
        self.joiners = None
        if riders is not None:
            while riders:
                j = riders.pop(0)
                j.copy = None
                j.close()

    def release_leases(self) -> None:
        """Release every lease still held and close every joiner, now, keeping the record.

        A ticket given up on (timed out) stays with the ticket table: its job's
        slots stay quarantined until its late ack, when `close` consumes the
        record (with nothing left to release).
        """
        self._close_joiners()
        _release(holder=self)

    @consumes
    def close(self) -> None:
        """Release this record's leases and close every joiner riding on its copy (each once); the cache
        calls this at the ack (a revoked lease settles as stale)."""
        self._close_joiners()
        _release(self)


class LoadBack(TicketRecord):
    """The cache-side record of an in-flight host->device load-back anchored at `node`.

    Holds the leases and the transfer records. A load-back of data that is
    already being copied joins that copy instead (`copy` names the record
    whose job moves the bytes; that record lists its `joiners`): it holds
    its own leases, moves nothing, and settles with the same ack. The cache
    keeps a record until the ack (or, after a reset, until the stale ack):
    the ticket table owns it (a joiner is owned by the record it joined, in
    `joiners`), and `close` at the ack consumes it with its joiners. The
    caller's linear `LoadBackTicket` only borrows it.
    """

    __slots__ = ("segments", "moved", "abandoned")

    segments: list[list[Segment] | None]
    """Per component: the device destination, as (token position, pages) segments (None: none)."""
    moved: list[int]
    """Per component: what the copy moves (tokens; a state: 1), for the result and counters."""
    abandoned: bool

    def __init__(self, ticket_id: int, generation: int, anchor: Node, owner: LeaseOwner, components: int) -> None:
        self.id = ticket_id
        self.generation = generation
        self.owner = owner
        self.node = anchor
        self.status = TicketStatus.IN_FLIGHT
        self.leases = [None] * components
        self.segments = [None] * components
        self.job = None
        self.moved = [0] * components
        self.abandoned = False
        self.copy = None
        self.joiners = None

    @property
    def full_start(self) -> int:
        """Where the Full destination starts (the anchor's end when no Full moves)."""
        segs = self.segments[FULL]
        return segs[0][0] if segs else self.node.end

    @property
    def full_dst(self) -> list[int]:
        segs = self.segments[FULL]
        return segs[0][1] if segs else []

    @property
    def full_tokens(self) -> int:
        return self.moved[FULL]

    @property
    def swa_tokens(self) -> int:
        return self.moved[SWA_IDX] if len(self.moved) > SWA_IDX else 0

    @property
    def mamba_moved(self) -> bool:
        return len(self.moved) > MAMBA and self.moved[MAMBA] > 0

    def __repr__(self) -> str:
        return (
            f"<LoadBack #{self.id} gen={self.generation} anchor={self.node.id} "
            f"{self.status.value}>"
        )


@linear
class LoadBackTicket:
    """The caller's claim on a load-back: consumed once, by `result()` or `abandon()`.

    `result()` works once the cache has settled the load-back (its ack
    arrived, or a reset made it stale); `abandon()` works at any time and
    leaves the settling to the cache when the copy completes. Either way the
    cache releases the leases at the ack; the attributes below read the
    cache's record (leases are lent, never to be released by the caller).
    """

    __slots__ = ("_record", "_lease_consumed_by")

    _record: Borrowed[LoadBack]

    def __init__(self, record: Borrowed[LoadBack]) -> None:
        self._record = record

    @property
    def id(self) -> int:
        return self._record.id

    @property
    def generation(self) -> int:
        return self._record.generation

    @property
    def anchor(self) -> Node:
        return self._record.node

    @property
    def status(self) -> TicketStatus:
        return self._record.status

    @property
    def full(self) -> Borrowed[Lease[Full, Held]] | None:
        return self._record.full

    @property
    def swa(self) -> Borrowed[Lease[SWA, Held]] | None:
        return self._record.swa

    @property
    def mamba(self) -> Borrowed[Lease[Mamba, Held]] | None:
        return self._record.mamba

    @property
    def joined(self) -> int | None:
        """The id of the load-back whose copy this one joined (its ack settles both), or None."""
        copy = self._record.copy
        return copy.id if copy is not None else None

    @property
    def full_tokens(self) -> int:
        return self._record.full_tokens

    @property
    def swa_tokens(self) -> int:
        return self._record.swa_tokens

    @property
    def mamba_moved(self) -> bool:
        return self._record.mamba_moved

    def lease_ids(self) -> dict[str, int]:
        return self._record.lease_ids()

    def __repr__(self) -> str:
        r = self._record
        return f"<LoadBackTicket #{r.id} gen={r.generation} anchor={r.node.id} {r.status.value}>"

    @consumes
    def result(self) -> LoadBackResult:
        """The settled outcome; `TicketPendingError` (ticket not consumed) while in flight."""
        r = self._record
        if r.status is TicketStatus.IN_FLIGHT:
            raise TicketPendingError(r.id, r.generation)
        moved = r.moved
        n = len(moved)
        return LoadBackResult(
            r.id, r.generation, r.node, r.status, moved[FULL], moved[SWA_IDX] if n > SWA_IDX else 0,
            n > MAMBA and moved[MAMBA] > 0,
        )

    @consumes
    def abandon(self) -> None:
        """Give the ticket up (request aborted); the cache settles it when the copy completes."""
        self._record.abandoned = True


@linear
class BackupTicket(TicketRecord):
    """An in-flight device->host backup of a contiguous chain ending at `node`; cache-owned.

    A backup of a node whose backup is already in flight joins that copy
    (`copy` names the record whose job moves the bytes; that record lists
    its `joiners`): it holds its own lease over the node, moves nothing,
    and settles with the same ack, owned by the record it joined.
    """

    __slots__ = ("segments",)

    segments: list[list[HostSegment] | None]
    """Per component: the host destination, as (token position, pages) segments (None: none)."""

    def __init__(self, ticket_id: int, generation: int, bottom: Node, owner: LeaseOwner, components: int) -> None:
        self.id = ticket_id
        self.generation = generation
        self.owner = owner
        self.node = bottom
        self.status = TicketStatus.IN_FLIGHT
        self.leases = [None] * components
        self.segments = [None] * components
        self.job = None
        self.copy = None
        self.joiners = None

    @property
    def full_start(self) -> int:
        """Where the Full chain starts: a joiner's covers its node, an SWA/Mamba-only backup's is empty."""
        segs = self.segments[FULL]
        if segs:
            return segs[0][0]
        return self.node.start if _get(self.leases, FULL) is not None else self.node.end

    def __repr__(self) -> str:
        return (
            f"<BackupTicket #{self.id} gen={self.generation} node={self.node.id} "
            f"{self.status.value}>"
        )


Ticket = LoadBack | BackupTicket
"""A cache-side in-flight record."""

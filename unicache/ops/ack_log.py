"""`AckLog`: how acks are counted and recorded, and what happens to one that settles nothing."""

from __future__ import annotations

from leases import EventKind, LeaseLedger

from unicache.counters import CacheCounters
from unicache.errors import UnknownTicketError
from unicache.reasons import Reason, ReasonKind, ReasonLog
from unicache.ticket_table import TicketTable
from unicache.transfer.base import Ack, JobKind

_SETTLING = frozenset({EventKind.ACK, EventKind.FAILED_TRANSFER, EventKind.STALE_ACK, EventKind.REVOKE})


class AckLog:
    """Counts and records acks; settles nothing itself.

    Every ack is in the flight recorder with its ticket, nodes and own
    generation: `ack` (ok), `failed-transfer`, `stale-ack`, `duplicate-ack`;
    a stale or duplicate one also notes its `Reason`.
    """

    __slots__ = ("_ledger", "_counters", "_reasons", "_tickets", "_name")

    def __init__(
        self,
        ledger: LeaseLedger,
        counters: CacheCounters,
        reasons: ReasonLog,
        tickets: TicketTable,
        name: str,
    ) -> None:
        self._ledger = ledger
        self._counters = counters
        self._reasons = reasons
        self._tickets = tickets
        self._name = name

    def settling(self, ack: Ack, node_id: int) -> None:
        """Count an ack that settles a live ticket; record a failed copy."""
        c = self._counters
        c.acks += 1
        if not ack.ok:
            c.failed_acks += 1
            self._ledger.record(
                EventKind.FAILED_TRANSFER, ticket=ack.ticket, nodes=(node_id,), generation=ack.generation,
                detail=ack.detail or "copy failed",
            )

    def settled_ok(self, ack: Ack, kind: JobKind, node_id: int, joiners: list[int]) -> None:
        """Record an ok ack that settled `kind` (with the load-backs that joined its copy)."""
        ledger = self._ledger
        if ledger.history:
            rider = f"; joiners {', '.join(f'T{j}' for j in joiners)} settled with it" if joiners else ""
            ledger.record(
                EventKind.ACK, ticket=ack.ticket, nodes=(node_id,), generation=ack.generation,
                detail=f"ok: {kind.value} settled{rider}",
            )

    def stale(self, ack: Ack, nodes: tuple[int, ...], detail: str) -> None:
        """Count and record a stale ack."""
        self._counters.stale_acks += 1
        self._reasons.note(
            Reason("ack", ReasonKind.STALE_ACK, nodes=nodes, tickets=(ack.ticket,), generation=ack.generation)
        )
        self._ledger.record(
            EventKind.STALE_ACK, ticket=ack.ticket, nodes=nodes, generation=ack.generation, detail=detail
        )

    def late(self, ack: Ack, node_id: int) -> None:
        """Count and record the late ack of a ticket that timed out (its quarantine ends; nothing settles)."""
        self._counters.late_acks += 1
        self._ledger.record(
            EventKind.STALE_ACK, ticket=ack.ticket, nodes=(node_id,), generation=ack.generation,
            detail=f"late: ticket timed out ({'ok' if ack.ok else 'failed'} ack ignored): quarantine released",
        )

    def unmatched(self, ack: Ack) -> None:
        """An ack that names no live or quarantined ticket: stale, duplicate, or never issued (raises)."""
        tid = ack.ticket
        gen = ack.generation
        epoch = self._ledger.epoch
        table = self._tickets
        if not table.was_issued(tid) or gen < 0 or gen > epoch:
            raise UnknownTicketError(
                tid, gen,
                f"was never issued by cache {self._name!r} "
                f"(last ticket {table.last_issued}, epoch {epoch})",
            )
        if gen < epoch:
            self.stale(ack, self._settled_nodes(tid), f"stale: generation {gen} < epoch {epoch}")
            return
        self._counters.duplicate_acks += 1
        nodes = self._settled_nodes(tid)
        self._reasons.note(Reason("ack", ReasonKind.DUPLICATE_ACK, nodes=nodes, tickets=(tid,), generation=gen))
        self._ledger.record(
            EventKind.DUPLICATE_ACK, ticket=tid, nodes=nodes, generation=gen,
            detail=f"duplicate: ticket already settled ({'ok' if ack.ok else 'failed'} ack ignored)",
        )

    def _settled_nodes(self, tid: int) -> tuple[int, ...]:
        """The nodes of already-settled ticket `tid`, from the newest flight-recorder event that names
        them (its ack, or its leases' revocation at a reset); () when the ring has none.

        Only duplicate and stale acks look here: the ticket left the table when it settled.
        """
        for e in self._ledger.iter_ticket_events(tid):
            if e.kind in _SETTLING and e.nodes:
                return tuple(n for n in e.nodes if isinstance(n, int))
        return ()

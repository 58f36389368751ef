"""`TimeOuts`: giving up on an overdue ticket whose ack may be lost; its slots wait for the late ack.

A transfer engine can lose an ack (or deliver it much later). The cache then
holds leases and device or host rows for a copy that may never report. Timing
the ticket out settles it now, as a failure the caller can act on (the
request recomputes what the load-back would have brought; the node of a
backup stays unbacked), while every row the copy may still read or write
stays quarantined, exactly as a reset does for its in-flight copies:

- its leases (and those of every load-back or backup that joined its copy)
  are released now, so nothing stays pinned;
- its source and destination rows are quarantined; the destination rows,
  which only the ticket owned, are freed, so they return to the free list
  only when the quarantine ends;
- the late ack (`AckRouter`) ends the quarantine and is counted
  (`late_acks`); it settles nothing else. An ack that never comes leaves the
  rows quarantined for good: they are counted (`timed_out_slots`) and listed
  by `UniCache.quarantine()` with ``timed_out=True``.
"""

from __future__ import annotations

from leases import EventKind, LeaseLedger

from unicache.counters import CacheCounters
from unicache.pools.pools import PoolSet
from unicache.results import TicketStatus, TimedOut
from unicache.ticket_table import TicketTable
from unicache.tickets import BackupTicket
from unicache.transfer.base import JobKind


class TimeOuts:
    """Times out live tickets (see the module docstring); the facade validates the id first."""

    __slots__ = ("_tickets", "_pools", "_ledger", "_counters")

    def __init__(self, tickets: TicketTable, pools: PoolSet, ledger: LeaseLedger, counters: CacheCounters) -> None:
        self._tickets = tickets
        self._pools = pools
        self._ledger = ledger
        self._counters = counters

    def time_out(self, ticket: int) -> TimedOut:
        """Give up on ticket `ticket`: live, or quarantined by a reset (the facade checked which).

        A ticket a reset quarantined already has its rows quarantined and its
        leases revoked: timing it out releases those leases now (otherwise only
        its stale ack would), and its ack then counts as late.
        """
        table = self._tickets
        stale = table.quarantined_ticket(ticket)
        t = stale if stale is not None else table.time_out(ticket)
        assert t is not None, ticket
        job = t.job
        assert job is not None, ticket
        pools = self._pools
        rows = 0
        for op in job.copies:
            if stale is None:
                pools.pool(op.component, op.src_tier).alloc.quarantine(op.src)
                dst = pools.pool(op.component, op.dst_tier).alloc
                dst.quarantine(op.dst)
                dst.free(op.dst)
            rows += len(op.src) + len(op.dst)
        kind = JobKind.BACKUP if type(t) is BackupTicket else JobKind.LOAD_BACK
        t.status = TicketStatus.TIMED_OUT
        joiners = tuple(j.id for j in t.joiners or ())
        for j in t.joiners or ():
            j.status = TicketStatus.TIMED_OUT
        t.release_leases()
        c = self._counters
        c.timed_out_tickets += 1 + len(joiners)
        c.timed_out_slots += rows
        rider = f"; joiners {', '.join(f'T{j}' for j in joiners)} with it" if joiners else ""
        self._ledger.record(
            EventKind.NOTE, ticket=ticket, nodes=(t.node.id,), generation=t.generation,
            detail=f"timed out: {kind.value} given up, {rows} rows quarantined until its late ack{rider}",
        )
        return TimedOut(ticket, t.generation, kind, t.node.id, joiners, rows)

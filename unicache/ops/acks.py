"""Acks: settle the ticket an ack names, or count it as stale or duplicate."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from leases import EventKind

from unicache.errors import UnknownTicketError
from unicache import guards
from unicache.reasons import Reason, ReasonKind
from unicache.results import Completion, TicketStatus
from unicache.tickets import BackupTicket, LoadBack
from unicache.transfer.base import Ack, JobKind

if TYPE_CHECKING:
    from unicache.cache import UniCache


def poll(cache: UniCache) -> list[Completion]:
    """Collect the engine's acks (and any posted to `inbox`) and settle their tickets."""
    guards.owner_thread(cache, "poll")
    out: list[Completion] = []
    for ack in cache.engine.poll():
        cache._on_ack(ack, out)
    if len(cache.inbox):
        for ack in cache.inbox.drain():
            cache._on_ack(ack, out)
    return out


def deliver(cache: UniCache, ack: Ack) -> Completion | None:
    """Process one ack now (REPL, tests, engines that hand acks over directly).

    Returns the completion of the ticket the ack names (the load-backs that
    joined its copy settle with it; `poll` lists those too).
    """
    guards.owner_thread(cache, "deliver")
    out: list[Completion] = []
    cache._on_ack(ack, out)
    return out[0] if out else None


def in_flight(cache: UniCache) -> int:
    """Tickets of the current epoch waiting for their ack."""
    return len(cache.ticket_table)


def on_ack(cache: UniCache, ack: Ack, out: list[Completion]) -> None:
    """Settle what `ack` names (appending its completions to `out`), or count it as stale.

    Every ack is in the flight recorder with its ticket, nodes and own
    generation: `ack` (ok), `failed-transfer`, `stale-ack`, `duplicate-ack`;
    a stale or duplicate one also notes its `Reason`.
    """
    c = cache.counters
    tid = ack.ticket
    gen = ack.generation
    table = cache.ticket_table
    lb = table.acked_load_back(tid, gen)
    if lb is not None:
        node_id = lb.node.id
        _count(cache, ack, node_id)
        joiners = cache._settle_load_back(lb, ack.ok)
        status = TicketStatus.DONE if ack.ok else TicketStatus.FAILED
        out.append(Completion(tid, gen, JobKind.LOAD_BACK, status, node_id))
        for j in joiners:
            out.append(Completion(j.id, j.generation, JobKind.LOAD_BACK, j.status, j.node.id))
        if ack.ok:
            _record_ok(cache, ack, JobKind.LOAD_BACK, node_id, [j.id for j in joiners])
        return
    bt = table.acked_backup(tid, gen)
    if bt is not None:
        node_id = bt.node.id
        _count(cache, ack, node_id)
        status = cache._settle_backup(bt, ack.ok)
        out.append(Completion(tid, gen, JobKind.BACKUP, status, node_id))
        if ack.ok:
            _record_ok(cache, ack, JobKind.BACKUP, node_id, [])
        return
    qt = table.take_quarantined(tid, gen)
    if qt is not None:
        job = qt.job
        assert job is not None, tid
        for op in job.copies:
            cache.pools.pool(op.component, op.src_tier).alloc.release_quarantine(op.src)
            cache.pools.pool(op.component, op.dst_tier).alloc.release_quarantine(op.dst)
        c.stale_acks += 1
        _stale(cache, ack, (qt.node.id,), f"generation {gen} < epoch {cache.ledger.epoch}: quarantine released")
        kind = JobKind.BACKUP if type(qt) is BackupTicket else JobKind.LOAD_BACK
        riders = list(qt.joiners or ()) if type(qt) is LoadBack else []
        qt.close()
        out.append(Completion(tid, gen, kind, TicketStatus.STALE, None))
        for j in riders:
            out.append(Completion(j.id, j.generation, JobKind.LOAD_BACK, TicketStatus.STALE, None))
        return
    if not table.was_issued(tid) or gen < 0 or gen > cache.ledger.epoch:
        raise UnknownTicketError(
            tid, gen,
            f"was never issued by cache {cache.config.ledger_name!r} "
            f"(last ticket {table.last_issued}, epoch {cache.ledger.epoch})",
        )
    if gen < cache.ledger.epoch:
        c.stale_acks += 1
        _stale(cache, ack, _settled_nodes(cache, tid), f"stale: generation {gen} < epoch {cache.ledger.epoch}")
        return
    c.duplicate_acks += 1
    nodes = _settled_nodes(cache, tid)
    cache.reasons.note(Reason("ack", ReasonKind.DUPLICATE_ACK, nodes=nodes, tickets=(tid,), generation=gen))
    cache.ledger.record(
        EventKind.DUPLICATE_ACK, ticket=tid, nodes=nodes, generation=gen,
        detail=f"duplicate: ticket already settled ({'ok' if ack.ok else 'failed'} ack ignored)",
    )


_SETTLING = frozenset({EventKind.ACK, EventKind.FAILED_TRANSFER, EventKind.STALE_ACK, EventKind.REVOKE})


def _settled_nodes(cache: UniCache, tid: int) -> tuple[int, ...]:
    """The nodes of already-settled ticket `tid`, from the newest flight-recorder event that names
    them (its ack, or its leases' revocation at a reset); () when the ring has none.

    Only duplicate and stale acks look here: the ticket left the table when it settled.
    """
    for e in cache.ledger.ticket_events(tid):
        if e.kind in _SETTLING and e.nodes:
            return tuple(n for n in e.nodes if isinstance(n, int))
    return ()


def _stale(cache: UniCache, ack: Ack, nodes: tuple[int, ...], detail: str) -> None:
    cache.reasons.note(
        Reason("ack", ReasonKind.STALE_ACK, nodes=nodes, tickets=(ack.ticket,), generation=ack.generation)
    )
    cache.ledger.record(
        EventKind.STALE_ACK, ticket=ack.ticket, nodes=nodes, generation=ack.generation, detail=detail
    )


def _record_ok(cache: UniCache, ack: Ack, kind: JobKind, node_id: int, joiners: list[int]) -> None:
    if cache.ledger.history:
        rider = f"; joiners {', '.join(f'T{j}' for j in joiners)} settled with it" if joiners else ""
        cache.ledger.record(
            EventKind.ACK, ticket=ack.ticket, nodes=(node_id,), generation=ack.generation,
            detail=f"ok: {kind.value} settled{rider}",
        )


def _count(cache: UniCache, ack: Ack, node_id: int) -> None:
    """Count an ack that settles a live ticket; record a failed copy."""
    c = cache.counters
    c.acks += 1
    if not ack.ok:
        c.failed_acks += 1
        cache.ledger.record(
            EventKind.FAILED_TRANSFER, ticket=ack.ticket, nodes=(node_id,), generation=ack.generation,
            detail=ack.detail or "copy failed",
        )


def sync_backups(cache: UniCache, tickets: Collection[int]) -> None:
    """Write-back eviction waits for its backups: complete them now and settle only their acks.

    Acks of other jobs that the engine returns meanwhile are posted to
    `inbox` untouched: the next `poll` settles them, so an allocation never
    settles an unrelated ticket.
    """
    engine = cache.engine
    engine.flush(tickets)
    sink: list[Completion] = []
    for ack in engine.poll():
        if ack.ticket in tickets:
            cache._on_ack(ack, sink)
        else:
            cache.inbox.post(ack)

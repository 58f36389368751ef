"""Acks: settle the ticket an ack names, or count it as stale or duplicate."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from leases import EventKind

from unicache.errors import UnknownTicketError
from unicache.results import Completion, TicketStatus
from unicache.tickets import BackupTicket, LoadBack
from unicache.transfer.base import Ack, JobKind

if TYPE_CHECKING:
    from unicache.cache import UniCache


def poll(cache: UniCache) -> list[Completion]:
    """Collect the engine's acks (and any posted to `inbox`) and settle their tickets."""
    out = cache._completions
    if out:
        cache._completions = []
    else:
        out = []
    for ack in cache.engine.poll():
        done = cache._on_ack(ack)
        if done is not None:
            out.append(done)
    if len(cache.inbox):
        for ack in cache.inbox.drain():
            done = cache._on_ack(ack)
            if done is not None:
                out.append(done)
    if cache._completions:
        out.extend(cache._completions)
        cache._completions = []
    return out


def deliver(cache: UniCache, ack: Ack) -> Completion | None:
    """Process one ack now (REPL, tests, engines that hand acks over directly)."""
    return cache._on_ack(ack)


def in_flight(cache: UniCache) -> int:
    """Tickets of the current epoch waiting for their ack."""
    return len(cache._tickets)


def on_ack(cache: UniCache, ack: Ack) -> Completion | None:
    c = cache.counters
    tid = ack.ticket
    gen = ack.generation
    t = cache._tickets.get(tid)
    if t is not None and t.generation == gen:
        del cache._tickets[tid]
        c.acks += 1
        if not ack.ok:
            c.failed_acks += 1
            cache.ledger.record(
                EventKind.FAILED_TRANSFER, ticket=tid, nodes=(t.node.id,),
                detail=ack.detail or "copy failed",
            )
        if type(t) is LoadBack:
            cache._settle_load_back(t, ack.ok)
            return Completion(tid, gen, JobKind.LOAD_BACK, t.status, t.node.id)
        assert isinstance(t, BackupTicket)
        cache._settle_backup(t, ack.ok)
        return Completion(tid, gen, JobKind.BACKUP, t.status, t.node.id)  # lease: ignore[lease-use-after-move]
    q = cache._quarantine.get(tid)
    if q is not None and q.generation == gen:
        del cache._quarantine[tid]
        for op in q.copies:
            cache.pools.pool(op.component, op.src_tier).alloc.release_quarantine(op.src)
            cache.pools.pool(op.component, op.dst_tier).alloc.release_quarantine(op.dst)
        qt = q.ticket
        kind = JobKind.LOAD_BACK if type(qt) is LoadBack else JobKind.BACKUP
        if type(qt) is BackupTicket:
            qt.close(cache._scopes)
        else:
            qt.release_leases(cache._scopes)
        c.stale_acks += 1
        cache.ledger.record(
            EventKind.STALE_ACK, ticket=tid,
            detail=f"generation {gen} < epoch {cache.ledger.epoch}: quarantine released",
        )
        return Completion(tid, gen, kind, TicketStatus.STALE, None)
    if tid < 1 or tid > cache._last_ticket or gen < 0 or gen > cache.ledger.epoch:
        raise UnknownTicketError(
            tid, gen,
            f"was never issued by cache {cache.config.ledger_name!r} "
            f"(last ticket {cache._last_ticket}, epoch {cache.ledger.epoch})",
        )
    if gen < cache.ledger.epoch:
        c.stale_acks += 1
        detail = f"stale: generation {gen} < epoch {cache.ledger.epoch}"
    else:
        c.duplicate_acks += 1
        detail = "duplicate: ticket already settled"
    cache.ledger.record(EventKind.STALE_ACK, ticket=tid, detail=detail)
    return None


def sync_backups(cache: UniCache, tickets: Collection[int]) -> None:
    """Write-back eviction waits for its backups: complete them now and settle the acks."""
    cache.engine.flush(tickets)
    done = cache.poll()
    cache._completions.extend(done)

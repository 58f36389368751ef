"""Reset: a new epoch revokes every lease; slots an unfinished copy may touch are quarantined."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from unicache.results import TicketStatus

if TYPE_CHECKING:
    from unicache.cache import UniCache
    from unicache.tickets import Ticket
    from unicache.transfer.base import CopyOp


@dataclass(slots=True)
class QuarantineRecord:
    """A ticket whose copy was still in flight at a reset; its slots wait for its stale ack."""

    ticket: Ticket  # lease: ignore[lease-owner]
    generation: int
    copies: tuple[CopyOp, ...]


def reset(cache: UniCache) -> int:
    """Drop every cached prefix and start a new epoch.

    Every lease is revoked (they leave all pin sets). Slots an unfinished
    copy may read or write are quarantined until that copy's (now stale)
    ack; every other slot the tree or a ticket held is freed. Request-owned
    slots are left to their requests. Returns the new epoch.
    """
    epoch = cache.ledger.advance_epoch()
    quarantined = 0
    for tid, t in cache._tickets.items():
        job = t.job
        assert job is not None
        for op in job.copies:
            cache.pools.pool(op.component, op.src_tier).alloc.quarantine(op.src)
            cache.pools.pool(op.component, op.dst_tier).alloc.quarantine(op.dst)
            cache.pools.pool(op.component, op.dst_tier).alloc.free(op.dst)
            quarantined += len(op.src) + len(op.dst)
        t.status = TicketStatus.STALE
        cache._quarantine[tid] = QuarantineRecord(t, t.generation, job.copies)
    cache._tickets.clear()
    old = cache._tree
    for node in old:
        if node.parent is not None:
            cache._free_node(node)
    old.kill()
    cache._scopes.clear()
    cache._new_tree()
    cache.counters.resets += 1
    cache.counters.quarantined_slots += quarantined
    return epoch

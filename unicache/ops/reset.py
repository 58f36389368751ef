"""Reset: a new epoch revokes every lease; slots an unfinished copy may touch are quarantined."""

from __future__ import annotations

from typing import TYPE_CHECKING

from unicache.results import TicketStatus
from unicache.tickets import LoadBack

if TYPE_CHECKING:
    from unicache.cache import UniCache


def reset(cache: UniCache) -> int:
    """Drop every cached prefix and start a new epoch.

    Every lease is revoked (they leave all pin sets). Slots an unfinished
    copy may read or write are quarantined until that copy's (now stale)
    ack; every other slot the tree or a ticket held is freed. Request-owned
    slots are left to their requests. Returns the new epoch.
    """
    epoch = cache.ledger.advance_epoch()
    quarantined = 0
    for t in cache.ticket_table.quarantine_all():
        job = t.job
        assert job is not None
        for op in job.copies:
            cache.pools.pool(op.component, op.src_tier).alloc.quarantine(op.src)
            cache.pools.pool(op.component, op.dst_tier).alloc.quarantine(op.dst)
            cache.pools.pool(op.component, op.dst_tier).alloc.free(op.dst)
            quarantined += len(op.src) + len(op.dst)
        t.status = TicketStatus.STALE
        if type(t) is LoadBack and t.joiners is not None:
            for j in t.joiners:
                j.status = TicketStatus.STALE
    old = cache._tree
    for node in old:
        if node.parent is not None:
            cache._free_node(node)
    old.kill()
    cache._new_tree()
    cache.counters.resets += 1
    cache.counters.quarantined_slots += quarantined
    return epoch

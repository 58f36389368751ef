"""`Resetter`: a new epoch revokes every lease; slots an unfinished copy may touch are quarantined."""

from __future__ import annotations

from leases import LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.ops.removal import NodeRemoval
from unicache.pools.pools import PoolSet
from unicache.results import TicketStatus
from unicache.ticket_table import TicketTable
from unicache.tree.radix import RadixTree


class Resetter:
    """Drops every cached prefix and starts a new epoch."""

    __slots__ = ("_ledger", "_tickets", "_pools", "_tree", "_components", "_removal", "_counters")

    def __init__(
        self,
        ledger: LeaseLedger,
        tickets: TicketTable,
        pools: PoolSet,
        tree: RadixTree,
        components: ComponentSet,
        removal: NodeRemoval,
        counters: CacheCounters,
    ) -> None:
        self._ledger = ledger
        self._tickets = tickets
        self._pools = pools
        self._tree = tree
        self._components = components
        self._removal = removal
        self._counters = counters

    def reset(self) -> int:
        """Drop every cached prefix and start a new epoch; returns the new epoch.

        Every lease is revoked (they leave all pin sets). Slots an unfinished
        copy may read or write are quarantined until that copy's (now stale)
        ack; every other slot the tree or a ticket held is freed. Request-owned
        slots are left to their requests.
        """
        epoch = self._ledger.advance_epoch()
        pools = self._pools
        quarantined = 0
        for t in self._tickets.quarantine_all():
            job = t.job
            assert job is not None
            for op in job.copies:
                pools.pool(op.component, op.src_tier).alloc.quarantine(op.src)
                pools.pool(op.component, op.dst_tier).alloc.quarantine(op.dst)
                pools.pool(op.component, op.dst_tier).alloc.free(op.dst)
                quarantined += len(op.src) + len(op.dst)
            t.status = TicketStatus.STALE
            if t.joiners is not None:
                for j in t.joiners:
                    j.status = TicketStatus.STALE
        tree = self._tree
        removal = self._removal
        for node in tree:
            if node.parent is not None:
                removal.free_node(node)
        tree.clear()
        self._components.new_tree()
        self._counters.resets += 1
        self._counters.quarantined_slots += quarantined
        return epoch

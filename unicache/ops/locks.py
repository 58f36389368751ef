"""`Locks`: lock receipts, one lease per component over a matched path, released exactly once."""

from __future__ import annotations

from itertools import count

from leases import LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.owners import LeaseOwner, OwnerKind
from unicache.reasons import Reason, ReasonKind, ReasonLog
from unicache.tickets import ComponentLeases, LockReceipt
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree


class Locks:
    """Issues lock receipts (ids never reused) and releases them."""

    __slots__ = ("_tree", "_components", "_ledger", "_counters", "_reasons", "_ids", "_name")

    def __init__(
        self,
        tree: RadixTree,
        components: ComponentSet,
        ledger: LeaseLedger,
        counters: CacheCounters,
        reasons: ReasonLog,
        name: str,
    ) -> None:
        self._tree = tree
        self._components = components
        self._ledger = ledger
        self._counters = counters
        self._reasons = reasons
        self._ids = count(1)
        self._name = name

    def lock(self, node: Node) -> LockReceipt:
        """Lock the path ending at `node` (its device-resident part) for a running request.

        The base pins the end node (the deepest one it holds on device); every
        other configured store pins its share of the path (`lock_nodes`). A
        path with nothing on device gives a 0-token receipt and notes a
        `HOST_ONLY` (or `ROOT`) reason.
        """
        comps = self._components
        end = comps.base.deepest_device(node)
        rid = next(self._ids)
        ledger = self._ledger
        epoch = ledger.epoch
        self._counters.locks += 1
        owner = LeaseOwner(OwnerKind.LOCK, rid)
        leases: ComponentLeases = [None] * comps.span
        if end.parent is None:
            kind = ReasonKind.ROOT if node.parent is None else ReasonKind.HOST_ONLY
            self._reasons.note(Reason("lock", kind, nodes=(node.id,)))
            return LockReceipt(rid, end, 0, epoch, leases, owner, ledger, self._name)
        end.last_access = self._tree.tick()
        base = comps.base
        leases[base.component_index] = ledger.acquire(base.component_marker, owner=owner, pins=(base.pin_set(end),))
        for store in comps.aux:
            nodes = store.lock_nodes(end)
            if nodes:
                leases[store.component_index] = ledger.acquire(
                    store.component_marker, owner=owner, pins=store.pin_sets_of(nodes)
                )
        return LockReceipt(rid, end, end.end, epoch, leases, owner, ledger, self._name)

    def unlock(self, receipt: LockReceipt) -> None:
        """Release exactly what `lock` took; a second unlock raises `DoubleReleaseError`."""
        receipt.release(ledger=self._ledger, cache=self._name)

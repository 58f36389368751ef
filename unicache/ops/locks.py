"""`Locks`: lock receipts, one lease per component over a matched path, released exactly once."""

from __future__ import annotations

from itertools import count

from leases import Held, Lease, LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.components.swa import window_nodes
from unicache.counters import CacheCounters
from unicache.markers import SWA, Full, Mamba
from unicache.owners import LeaseOwner, OwnerKind
from unicache.reasons import Reason, ReasonKind, ReasonLog
from unicache.tickets import LockReceipt
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree


class Locks:
    """Issues lock receipts (ids never reused) and releases them."""

    __slots__ = (
        "_tree", "_components", "_ledger", "_counters", "_reasons", "_ids", "_swa", "_window", "_mamba",
        "_name",
    )

    def __init__(
        self,
        tree: RadixTree,
        components: ComponentSet,
        ledger: LeaseLedger,
        counters: CacheCounters,
        reasons: ReasonLog,
        window: int,
        name: str,
    ) -> None:
        self._tree = tree
        self._components = components
        swa = components.has_swa
        mamba = components.has_mamba
        self._ledger = ledger
        self._counters = counters
        self._reasons = reasons
        self._ids = count(1)
        self._swa = swa
        self._window = window
        self._mamba = mamba
        self._name = name

    def lock(self, node: Node) -> LockReceipt:
        """Lock the path ending at `node` (its device-resident part) for a running request.

        A path with nothing on device gives a 0-token receipt and notes a
        `HOST_ONLY` (or `ROOT`) reason.
        """
        comps = self._components
        end = comps.full.deepest_device(node)
        rid = next(self._ids)
        ledger = self._ledger
        epoch = ledger.epoch
        self._counters.locks += 1
        owner = LeaseOwner(OwnerKind.LOCK, rid)
        if end.parent is None:
            kind = ReasonKind.ROOT if node.parent is None else ReasonKind.HOST_ONLY
            self._reasons.note(Reason("lock", kind, nodes=(node.id,)))
            return LockReceipt(rid, end, 0, epoch, None, None, None, owner, ledger, self._name)
        end.last_access = self._tree.tick()
        full = ledger.acquire(Full, owner=owner, pins=(comps.full.pin_set(end),))
        swa: Lease[SWA, Held] | None = None
        mamba: Lease[Mamba, Held] | None = None
        if self._swa:
            win = window_nodes(end, self._window)
            sw = comps.swa
            swa = ledger.acquire(SWA, owner=owner, pins=tuple(sw.pin_set(x) for x in win))
        if self._mamba and comps.mamba.device_state(end) is not None:
            mamba = ledger.acquire(Mamba, owner=owner, pins=(comps.mamba.pin_set(end),))
        return LockReceipt(rid, end, end.end, epoch, full, swa, mamba, owner, ledger, self._name)

    def unlock(self, receipt: LockReceipt) -> None:
        """Release exactly what `lock` took; a second unlock raises `DoubleReleaseError`."""
        receipt.release(ledger=self._ledger, cache=self._name)

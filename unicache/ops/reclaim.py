"""`DuplicateReclaimer` (write_back): frees Full host copies of data that is also on device."""

from __future__ import annotations

from leases import EventKind, LeaseLedger

from unicache.components.full import FullStore
from unicache.counters import CacheCounters
from unicache.reasons import Reason, ReasonKind, ReasonLog


class DuplicateReclaimer:
    """Reclaims host pages from `FullStore.dups`, never one a Full lease pins."""

    __slots__ = ("_full", "_counters", "_reasons", "_ledger")

    def __init__(
        self, full: FullStore, counters: CacheCounters, reasons: ReasonLog, ledger: LeaseLedger
    ) -> None:
        self._full = full
        self._counters = counters
        self._reasons = reasons
        self._ledger = ledger

    def reclaim(self, n: int) -> int:
        """Free up to `n`+ Full host pages whose data is also on device.

        Consults `PinSet[Full]` only: a Full lease (a load-back or backup
        reading or writing that host copy) blocks; SWA and Mamba leases do
        not. Aux host copies are kept (they may be the only copy). A first
        pass spares device leaves (about to be demoted, needing the copy).
        """
        freed = 0
        full = self._full
        dups = full.dups
        fh = full.host
        c = self._counters
        fdev = full.dev
        fhost = full.host_col
        pin_sets = full.pin_sets
        for spare_leaves in (True, False):
            for nid, node in list(dups.items()):
                if freed >= n:
                    return freed
                slot = node.slot
                hf = fhost[slot]
                if not slot or fdev[slot] is None or hf is None or node.parent is None:
                    dups.pop(nid, None)
                    continue
                p = pin_sets.get(slot)
                if p is not None and p:
                    if not spare_leaves:
                        c.reclaim_blocked += 1
                        self._reasons.note(
                            Reason("reclaim", ReasonKind.PINNED, "full", (node.id,), leases=tuple(p.ids()))
                        )
                        self._ledger.record(
                            EventKind.RECLAIM_BLOCKED, nodes=(node.id,), component="Full",
                            detail=f"Full host copy pinned by leases {p.ids()}",
                        )
                    continue
                if spare_leaves and full.is_device_leaf(node):
                    continue
                fh.free(hf)
                fhost[slot] = None
                del dups[nid]
                freed += len(hf)
                c.reclaimed_pages += len(hf)
        return freed

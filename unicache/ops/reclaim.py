"""`DuplicateReclaimer` (write_back): frees the base's host copies of data that is also on device."""

from __future__ import annotations

from leases import EventKind, LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.markers import component_name
from unicache.reasons import Reason, ReasonKind, ReasonLog


class DuplicateReclaimer:
    """Reclaims host pages from the base store's `dups`, never one a lease of the base pins."""

    __slots__ = ("_components", "_counters", "_reasons", "_ledger")

    def __init__(
        self, components: ComponentSet, counters: CacheCounters, reasons: ReasonLog, ledger: LeaseLedger
    ) -> None:
        self._components = components
        self._counters = counters
        self._reasons = reasons
        self._ledger = ledger

    def reclaim(self, n: int) -> int:
        """Free up to `n`+ base host pages whose data is also on device.

        Consults the base's pin sets only: a lease of the base (a load-back or
        backup reading or writing that host copy) blocks; other components'
        leases do not. Their host copies are kept (they may be the only
        copy). A first pass spares device leaves (about to be demoted,
        needing the copy).
        """
        freed = 0
        base = self._components.base
        dups = base.dups
        base_host_alloc = base.host
        c = self._counters
        base_dev = base.dev
        base_host = base.host_col
        pin_sets = base.pin_sets
        for spare_leaves in (True, False):
            for nid, node in list(dups.items()):
                if freed >= n:
                    return freed
                slot = node.slot
                pages = base_host[slot]
                if not slot or base_dev[slot] is None or pages is None or node.parent is None:
                    dups.pop(nid, None)
                    continue
                p = pin_sets.get(slot)
                if p is not None and p:
                    if not spare_leaves:
                        c.reclaim_blocked += 1
                        self._reasons.note(
                            Reason(
                                "reclaim", ReasonKind.PINNED, component_name(base.component_marker), (node.id,),
                                leases=tuple(p.ids()),
                            )
                        )
                        self._ledger.record(
                            EventKind.RECLAIM_BLOCKED, nodes=(node.id,), component=base.name,
                            detail=f"{base.name} host copy pinned by leases {p.ids()}",
                        )
                    continue
                if spare_leaves and base.is_device_leaf(node):
                    continue
                base_host_alloc.free(pages)
                base_host[slot] = None
                del dups[nid]
                freed += len(pages)
                c.reclaimed_pages += len(pages)
        return freed

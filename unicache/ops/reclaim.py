"""Reclaim of Full host duplicates (write_back): host copies of data that is also on device."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leases import EventKind

from unicache.components.full import is_device_leaf
from unicache import guards
from unicache.reasons import Reason, ReasonKind

if TYPE_CHECKING:
    from unicache.cache import UniCache


def reclaim_host_duplicates(cache: UniCache, n: int) -> int:
    """Free up to `n`+ Full host pages whose data is also on device.

    Consults `PinSet[Full]` only: a Full lease (a load-back or backup
    reading or writing that host copy) blocks; SWA and Mamba leases do
    not. Aux host copies are kept (they may be the only copy). A first
    pass spares device leaves (about to be demoted, needing the copy).
    """
    n = guards.count(cache, "reclaim_host_duplicates", n)
    freed = 0
    dups = cache._dups
    fh = cache._fh
    c = cache.counters
    for spare_leaves in (True, False):
        for nid, node in list(dups.items()):
            if freed >= n:
                return freed
            hf = node.host_pages
            if not node.alive or node.dev_full is None or hf is None or node.parent is None:
                dups.pop(nid, None)
                continue
            p = node.pins_full
            if p is not None and p:
                if not spare_leaves:
                    c.reclaim_blocked += 1
                    cache.reasons.note(
                        Reason("reclaim", ReasonKind.PINNED, "full", (node.id,), leases=tuple(p.ids()))
                    )
                    cache.ledger.record(
                        EventKind.RECLAIM_BLOCKED, nodes=(node.id,), component="Full",
                        detail=f"Full host copy pinned by leases {p.ids()}",
                    )
                continue
            if spare_leaves and is_device_leaf(node):
                continue
            fh.free(hf)
            node.host_pages = None
            del dups[nid]
            freed += len(hf)
            c.reclaimed_pages += len(hf)
    return freed

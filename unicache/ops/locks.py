"""Lock receipts: one lease per component over a matched path, released exactly once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leases import Held, Lease

from unicache.components.full import deepest_device
from unicache import guards
from unicache.markers import SWA, Full, Mamba
from unicache.components.swa import window_nodes
from unicache.owners import LeaseOwner, OwnerKind
from unicache.reasons import Reason, ReasonKind
from unicache.tickets import LockReceipt
from unicache.tree.node import Node
from unicache.tree.pins import pins_full, pins_mamba, pins_swa

if TYPE_CHECKING:
    from unicache.cache import UniCache


def lock(cache: UniCache, node: Node) -> LockReceipt:
    """Lock the path ending at `node` (its device-resident part) for a running request.

    A path with nothing on device gives a 0-token receipt and notes a
    `HOST_ONLY` (or `ROOT`) reason on `cache.reasons`.
    """
    guards.owner_thread(cache, "lock")
    cache._check_node(node)
    end = deepest_device(node)
    rid = next(cache._receipt_ids)
    epoch = cache.ledger.epoch
    cache.counters.locks += 1
    owner = LeaseOwner(OwnerKind.LOCK, rid)
    ledger = cache.ledger
    if end.parent is None:
        kind = ReasonKind.ROOT if node.parent is None else ReasonKind.HOST_ONLY
        cache.reasons.note(Reason("lock", kind, nodes=(node.id,)))
        return LockReceipt(rid, end, 0, epoch, None, None, None, owner, ledger, cache._name)
    end.last_access = cache._tick()
    full = ledger.acquire(Full, owner=owner, pins=(pins_full(end),))
    swa: Lease[SWA, Held] | None = None
    mamba: Lease[Mamba, Held] | None = None
    if cache._swa:
        win = window_nodes(end, cache._window)
        swa = ledger.acquire(SWA, owner=owner, pins=tuple(pins_swa(x) for x in win))
    if cache._mamba and end.dev_mamba is not None:
        mamba = ledger.acquire(Mamba, owner=owner, pins=(pins_mamba(end),))
    return LockReceipt(rid, end, end.end, epoch, full, swa, mamba, owner, ledger, cache._name)


def unlock(cache: UniCache, receipt: LockReceipt) -> None:
    """Release exactly what `lock` took; a second unlock raises `DoubleReleaseError`."""
    guards.owner_thread(cache, "unlock")
    receipt.release(ledger=cache.ledger, cache=cache.config.ledger_name)

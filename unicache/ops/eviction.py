"""Device eviction: leaf-first LRU per component, cascading to lower ones, never a pinned node."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leases import EventKind

from unicache.components.full import is_device_leaf
from unicache import guards
from unicache.markers import FULL, MAMBA, SWA_IDX
from unicache.reasons import Reason, ReasonKind
from unicache.tree.node import Node
from unicache.tree.pins import has_pins

if TYPE_CHECKING:
    from unicache.cache import UniCache


def evict_device(cache: UniCache, component: type, n: int) -> int:
    """Free at least `n` device pages (Full/SWA) or slots (Mamba) if unpinned data allows."""
    n = guards.count(cache, "evict_device", n)
    return cache._evict_dev(cache._cidx(component), n)


def evict_dev(cache: UniCache, i: int, n: int) -> int:
    if n <= 0:
        return 0
    if i == FULL:
        return cache._evict_dev_full(n)
    return cache._evict_dev_aux(i, n)


def evict_dev_full(cache: UniCache, n: int) -> int:
    """Free at least `n` device Full pages, leaf-first LRU (SWA and Mamba cascade).

    Under write_back a victim whose data (Full, or a cascaded SWA/Mamba
    state) is on device only is backed up first; with `sync_write_back`
    the backup is completed at once and the victim demoted, so victims go
    in exact LRU order (a parent that becomes a leaf can be next). A
    victim whose backup fails is dropped; without `sync_write_back` it
    stays until its backup's ack, and a later eviction takes it.
    """
    freed = 0
    heap = cache._stores[FULL].lru_device
    wb = cache._wb
    sync = cache.config.sync_write_back
    blocked: list[Node] = []
    while freed < n:
        node = heap.pop()
        if node is None:
            break
        if not node.alive or node.dev_full is None or node.parent is None:
            continue
        if not is_device_leaf(node):
            continue
        if node.pinned():
            blocked.append(node)
            cache._blocked(node, "Full", "device")
            continue
        if wb:
            tid: int | None = None
            if node.host_pages is None:
                tid = cache._backup_nodes([node])
            elif (node.dev_mamba is not None and node.host_mamba is None) or (
                node.dev_swa is not None and node.host_swa_pages is None
            ):
                tid = cache._backup_aux(node, True, True)
            if tid is not None:
                if sync:
                    cache._sync_backups((tid,))
                if not sync or node.pinned():
                    blocked.append(node)
                    continue
        if node.host_pages is None:
            freed += cache._drop_subtree(node)
            continue
        freed += cache._demote(node)
    for b in blocked:
        heap.push(b)
    return freed


def blocked(cache: UniCache, node: Node, component: str, tier: str) -> None:
    """Count a pinned eviction candidate, note its `PINNED` reason and record it in the flight recorder."""
    cache.counters.evict_blocked += 1
    ids = tuple(
        lease_id
        for store in cache.stores
        if (p := store.pins(node)) is not None
        for lease_id in p.ids()
    )
    op = "evict" if tier == "device" else "evict_host"
    cache.reasons.note(Reason(op, ReasonKind.PINNED, component.lower(), (node.id,), leases=ids))
    if cache.ledger.history:
        cache.ledger.record(
            EventKind.EVICT_BLOCKED, nodes=(node.id,), component=component,
            detail=f"pinned by leases {list(ids)} (tier {tier})",
        )


def demote(cache: UniCache, node: Node) -> int:
    """Drop `node`'s device copies (Full cascades to SWA and Mamba); host copies stay."""
    c = cache.counters
    pages = node.dev_full
    parent = node.parent
    assert pages is not None and parent is not None
    node.dev_full = None
    parent.dev_children -= 1
    cache._fd.free(pages)
    if node.dev_swa is not None:
        cache._free_dev_swa(node)
    if node.dev_mamba is not None:
        cache._free_dev_mamba(node)
    c.demotions += 1
    c.device_evictions += 1
    c.full_pages_evicted += len(pages)
    if parent.parent is not None and is_device_leaf(parent):
        cache._stores[FULL].lru_device.push(parent)
    if not node.children and node.host_pages is not None:
        cache._stores[FULL].lru_host.push(node)
    return len(pages)


def free_dev_swa(cache: UniCache, node: Node) -> int:
    freed = cache._stores[SWA_IDX].drop_device(node)
    cache.counters.swa_pages_evicted += freed
    if node.host_swa_pages is None:
        cache.counters.aux_lost += 1
    return freed


def free_dev_mamba(cache: UniCache, node: Node) -> int:
    freed = cache._stores[MAMBA].drop_device(node)
    cache.counters.mamba_evicted += 1
    if node.host_mamba is None:
        cache.counters.aux_lost += 1
    return freed


def drop_subtree(cache: UniCache, node: Node) -> int:
    """Remove `node` and everything below it (data lost); 0 if any of it is pinned."""
    sub = list(cache._iter_subtree(node))
    for x in sub:
        if x.pinned():
            cache._blocked(x, "Full", "device")
            return 0
    freed = 0
    for x in reversed(sub):
        freed += cache._free_node(x)
        cache._tree.remove_leaf(x)
        cache.counters.dropped_nodes += 1
    parent = node.parent
    assert parent is not None
    cache._after_child_removed(parent)
    return freed


def evict_dev_aux(cache: UniCache, i: int, n: int) -> int:
    """Free device SWA pages or Mamba slots, LRU; SWA eviction cascades to the node's Mamba.

    Under write_back a state whose only copy is on device is backed up
    first, like a Full victim, unless no host room can be made; then it
    is lost (`aux_lost`).
    """
    heap = cache._stores[i].lru_device
    c = cache.counters
    freed = 0
    wb = cache._wb
    sync = cache.config.sync_write_back
    swa = i == SWA_IDX
    name = "SWA" if swa else "Mamba"
    blocked: list[Node] = []
    while freed < n:
        node = heap.pop()
        if node is None:
            break
        if not node.alive:
            continue
        if swa:
            if node.dev_swa is None:
                continue
            if has_pins(node.pins_swa) or has_pins(node.pins_mamba):
                blocked.append(node)
                cache._blocked(node, name, "device")
                continue
            lose_swa = node.host_swa_pages is None
            lose_mamba = node.dev_mamba is not None and node.host_mamba is None
        else:
            if node.dev_mamba is None:
                continue
            if has_pins(node.pins_mamba):
                blocked.append(node)
                cache._blocked(node, name, "device")
                continue
            lose_swa = False
            lose_mamba = node.host_mamba is None
        if wb and (lose_swa or lose_mamba):
            tid = cache._backup_aux(node, lose_swa, lose_mamba)
            if tid is not None:
                if sync:
                    cache._sync_backups((tid,))
                if not sync or has_pins(node.pins_swa) or has_pins(node.pins_mamba):
                    blocked.append(node)
                    continue
        if swa:
            freed += cache._free_dev_swa(node)
            if node.dev_mamba is not None:
                cache._free_dev_mamba(node)
        else:
            freed += cache._free_dev_mamba(node)
        c.device_evictions += 1
    for b in blocked:
        heap.push(b)
    return freed

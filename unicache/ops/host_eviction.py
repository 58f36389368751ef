"""Host eviction: host-only leaves (Full) and host states (SWA, Mamba), LRU, never pinned ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from unicache.components.markers import FULL, SWA, SWA_IDX, Full, Mamba
from unicache.tree.pins import has_pins, pins_mamba, pins_swa
from unicache.tree.node import Node

if TYPE_CHECKING:
    from unicache.cache import UniCache


def evict_host(cache: UniCache, component: type, n: int) -> int:
    """Free at least `n` host pages/slots of `component` if unpinned data allows."""
    return cache._evict_host(cache._cidx(component), n)


def evict_host_index(cache: UniCache, i: int, n: int) -> int:
    if n <= 0:
        return 0
    if i != FULL:
        return cache._evict_host_aux(i, n)
    freed = cache.reclaim_host_duplicates(n) if cache._wb else 0
    heap = cache._lru_host[FULL]
    c = cache.counters
    blocked: list[Node] = []
    while freed < n:
        node = heap.pop()
        if node is None:
            break
        if (
            not node.alive
            or node.dev_full is not None
            or node.host_pages is None
            or node.children
        ):
            continue
        if node.pinned():
            blocked.append(node)
            cache._blocked(node, "Full", "host")
            continue
        freed += len(node.host_pages)
        c.host_pages_evicted += len(node.host_pages)
        c.host_evictions += 1
        cache._free_node(node)
        cache._tree.remove_leaf(node)
        parent = node.parent
        assert parent is not None
        cache._after_child_removed(parent)
    for b in blocked:
        heap.push(b)
    return freed


def evict_host_aux(cache: UniCache, i: int, n: int) -> int:
    heap = cache._lru_host[i]
    c = cache.counters
    freed = 0
    blocked: list[Node] = []
    alloc = cache._host[i]
    assert alloc is not None
    while freed < n:
        node = heap.pop()
        if node is None:
            break
        if not node.alive:
            continue
        if i == SWA_IDX:
            hs = node.host_swa_pages
            if hs is None:
                continue
            if has_pins(node.pins_swa):
                blocked.append(node)
                cache._blocked(node, "SWA", "host")
                continue
            alloc.free(hs)
            node.host_swa_pages = None
            freed += len(hs)
            if node.dev_swa is None:
                c.aux_lost += 1
        else:
            hm = node.host_mamba
            if hm is None:
                continue
            if has_pins(node.pins_mamba):
                blocked.append(node)
                cache._blocked(node, "Mamba", "host")
                continue
            alloc.free([hm])
            node.host_mamba = None
            freed += 1
            if node.dev_mamba is None:
                c.aux_lost += 1
        c.host_evictions += 1
    for b in blocked:
        heap.push(b)
    return freed

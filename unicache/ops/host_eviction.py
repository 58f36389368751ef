"""Host eviction: host-only leaves (Full) and host states (SWA, Mamba), LRU, never pinned ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from unicache.markers import FULL
from unicache import guards
from unicache.tree.node import Node

if TYPE_CHECKING:
    from unicache.cache import UniCache


def evict_host(cache: UniCache, component: type, n: int) -> int:
    """Free at least `n` host pages/slots of `component` if unpinned data allows."""
    n = guards.count(cache, "evict_host", n)
    return cache._evict_host(cache._cidx(component), n)


def evict_host_index(cache: UniCache, i: int, n: int) -> int:
    if n <= 0:
        return 0
    if i != FULL:
        return cache._evict_host_aux(i, n)
    freed = cache.reclaim_host_duplicates(n) if cache._wb else 0
    heap = cache._stores[FULL].lru_host
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
    """Free host SWA pages or Mamba states, LRU, never a pinned one (its component's pins only)."""
    store = cache._stores[i]
    heap = store.lru_host
    c = cache.counters
    freed = 0
    blocked: list[Node] = []
    while freed < n:
        node = heap.pop()
        if node is None:
            break
        if not node.alive or store.host_slots(node) is None:
            continue
        if store.pinned(node):
            blocked.append(node)
            cache._blocked(node, store.name, "host")
            continue
        freed += store.drop_host(node)
        if store.device_slots(node) is None:
            c.aux_lost += 1
        c.host_evictions += 1
    for b in blocked:
        heap.push(b)
    return freed

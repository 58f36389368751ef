"""`HostEvictor`: host-only base leaves and other components' host data, LRU, never a pinned one."""

from __future__ import annotations

from array import array

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.components.store import ComponentStore
from unicache.markers import ComponentIndex
from unicache.ops.blocked import BlockLog
from unicache.ops.reclaim import DuplicateReclaimer
from unicache.ops.removal import NodeRemoval
from unicache.tree.node import Node


class HostEvictor:
    """Makes host room: reclaims duplicates (write_back), then evicts LRU host data."""

    __slots__ = ("_components", "_counters", "_removal", "_reclaimer", "_blocks", "_write_back")

    def __init__(
        self,
        components: ComponentSet,
        counters: CacheCounters,
        removal: NodeRemoval,
        reclaimer: DuplicateReclaimer,
        blocks: BlockLog,
        write_back: bool,
    ) -> None:
        self._components = components
        self._counters = counters
        self._removal = removal
        self._reclaimer = reclaimer
        self._blocks = blocks
        self._write_back = write_back

    def alloc(self, i: ComponentIndex, n: int) -> array[int] | None:
        """`n` host slots of component index `i`, evicting host data on shortfall; None if it cannot."""
        alloc = self._components.by_index[i].host
        got = alloc.alloc_compact(n)
        if got is None:
            self.evict(i, n - alloc.free_count)
            got = alloc.alloc_compact(n)
        return got

    def evict(self, i: ComponentIndex, n: int) -> int:
        """Free at least `n` host pages/slots of component index `i` if unpinned data allows."""
        if n <= 0:
            return 0
        comps = self._components
        store = comps.by_index[i]
        base = comps.base
        if store is not base:
            return self._evict_other(store, n)
        freed = self._reclaimer.reclaim(n) if self._write_back else 0
        heap = base.lru_host
        base_dev = base.dev
        base_host = base.host_col
        c = self._counters
        removal = self._removal
        blocked: list[Node] = []
        while freed < n:
            node = heap.pop()
            if node is None:
                break
            slot = node.slot
            if not slot or base_dev[slot] is not None or node.children:
                continue
            pages = base_host[slot]
            if pages is None:
                continue
            if comps.pinned(node):
                blocked.append(node)
                self._blocks.note(node, base.name, "host")
                continue
            freed += len(pages)
            c.host_pages_evicted += len(pages)
            c.host_evictions += 1
            removal.free_node(node)
            removal.remove_leaf(node)
            parent = node.parent
            assert parent is not None
            removal.after_child_removed(parent)
        for b in blocked:
            heap.push(b)
        return freed

    def _evict_other(self, store: ComponentStore, n: int) -> int:
        """Free host data of a component other than the base, LRU, never a pinned one (its own pins only)."""
        heap = store.lru_host
        c = self._counters
        freed = 0
        blocked: list[Node] = []
        while freed < n:
            node = heap.pop()
            if node is None:
                break
            if not node.slot or store.host_slots(node) is None:
                continue
            if store.pinned(node):
                blocked.append(node)
                self._blocks.note(node, store.name, "host")
                continue
            freed += store.drop_host(node)
            if store.device_slots(node) is None:
                c.aux_lost += 1
            c.host_evictions += 1
        for b in blocked:
            heap.push(b)
        return freed

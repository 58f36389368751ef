"""`Evictor`: device eviction, leaf-first LRU per component, cascading to lower ones, never a pinned node.

See `ops/room.py` for how a pass, its owner and the backup scheduler hand
over to each other.

Eviction never starts a backup itself. Under write_back a device pass stops
at a victim whose data is on device only and reports it (`BackupNeed`);
whoever makes room (`ops/room.py`) asks the backup scheduler for that copy,
then hands the victim back to the pass (`resume`) and lets it go on.
"""

from __future__ import annotations

from array import array

from unicache.components.catalog import ComponentSet
from unicache.components.store import ComponentStore
from unicache.counters import CacheCounters
from unicache.markers import ComponentIndex
from unicache.ops.blocked import BlockLog
from unicache.ops.host_eviction import HostEvictor
from unicache.ops.removal import NodeRemoval, iter_subtree
from unicache.tree.lru import EvictionQueue
from unicache.tree.node import Node


class BackupNeed:
    """A write_back victim whose data is on device only: back it up before it is evicted.

    `chain`: back up the node's base chain (the base has no host copy);
    otherwise `mask` has bit `i` set for each component `i` whose
    device-only data on the node needs a host copy.
    """

    __slots__ = ("node", "chain", "mask")

    def __init__(self, node: Node, chain: bool, mask: int) -> None:
        self.node = node
        self.chain = chain
        self.mask = mask

    def __repr__(self) -> str:
        return f"<BackupNeed #{self.node.id} chain={self.chain} mask={self.mask:#b}>"


class DevicePass:
    """One device eviction of at least `n` slots of one component, in exact LRU order.

    `next_victim()` evicts until `n` are freed or nothing is left (None), or
    until a victim needs a backup first (its `BackupNeed`); `resume(need,
    started, waited)` then evicts that victim, or holds it back when its
    backup is still in flight. `finish()` files the held-back candidates
    in their heap again and returns what was freed.

    Evicting a component's data on a node takes the node's data of every
    lower-priority component with it (`_cascade`): the base pass demotes or
    drops whole nodes; any other pass frees that component and those below
    it. A victim is held back while a lease of its cascade pins it.
    """

    __slots__ = (
        "_evictor", "_components", "_store", "_is_base", "_cascade", "_n", "freed", "_heap", "_blocked",
        "_write_back",
    )

    _blocked: list[Node]
    _cascade: tuple[ComponentStore, ...]

    def __init__(
        self, evictor: Evictor, store: ComponentStore, n: int, heap: EvictionQueue, write_back: bool
    ) -> None:
        comps = evictor.components
        self._evictor = evictor
        self._components = comps
        self._store = store
        self._is_base = store is comps.base
        self._cascade = comps.configured if self._is_base else tuple(
            [st for st in comps.aux if st.component_index >= store.component_index]
        )
        self._n = n
        self.freed = 0
        self._heap = heap
        self._blocked = []
        self._write_back = write_back

    def next_victim(self) -> BackupNeed | None:
        if not self._is_base:
            return self._next_other()
        heap = self._heap
        wb = self._write_back
        ev = self._evictor
        comps = self._components
        base = comps.base
        base_dev = base.dev
        base_host = base.host_col
        n = self._n
        while self.freed < n:
            node = heap.pop()
            if node is None:
                break
            slot = node.slot
            if not slot or base_dev[slot] is None or node.parent is None or node.dev_children:
                continue
            if comps.pinned(node):
                self._blocked.append(node)
                ev.note_blocked(node, base.name)
                continue
            if wb:
                if base_host[slot] is None:
                    return BackupNeed(node, True, 0)
                mask = self._device_only(node)
                if mask:
                    return BackupNeed(node, False, mask)
            if base_host[slot] is None:
                self.freed += ev.drop_subtree(node)
            else:
                self.freed += ev.demote(node)
        return None

    def _device_only(self, node: Node) -> int:
        """The index bits of the non-base cascade components holding data on `node` on device only."""
        mask = 0
        for store in self._cascade:
            if store is not self._components.base and store.device_only(node):
                mask |= 1 << store.component_index
        return mask

    def resume(self, need: BackupNeed, started: bool, waited: bool) -> None:
        """Evict `need`'s victim after its backup (`started`: a backup was submitted; `waited`: its
        ack is settled); a victim whose backup is in flight or that is pinned again is held back."""
        node = need.node
        if started:
            comps = self._components
            pinned = comps.pinned(node) if self._is_base else comps.aux_pinned(node)
            if not waited or pinned:
                self._blocked.append(node)
                return
        if self._is_base:
            self._evict_base(node)
        else:
            self._evict_other(node)

    def finish(self) -> int:
        heap = self._heap
        for b in self._blocked:
            heap.push(b)
        self._blocked = []
        return self.freed

    def _evict_base(self, node: Node) -> None:
        if self._components.base.on_host(node):
            self.freed += self._evictor.demote(node)
        else:
            self.freed += self._evictor.drop_subtree(node)

    def _next_other(self) -> BackupNeed | None:
        heap = self._heap
        wb = self._write_back
        ev = self._evictor
        store = self._store
        cascade = self._cascade
        name = store.name
        while self.freed < self._n:
            node = heap.pop()
            if node is None:
                break
            if not node.slot or not store.on_device(node):
                continue
            pinned = False
            for st in cascade:
                if st.pinned(node):
                    pinned = True
                    break
            if pinned:
                self._blocked.append(node)
                ev.note_blocked(node, name)
                continue
            if wb:
                mask = self._device_only(node)
                if mask:
                    return BackupNeed(node, False, mask)
            self._evict_other(node)
        return None

    def _evict_other(self, node: Node) -> None:
        ev = self._evictor
        cascade = self._cascade
        self.freed += ev.free_device(cascade[0], node)
        for st in cascade[1:]:
            if st.on_device(node):
                ev.free_device(st, node)
        ev.count_device_eviction()


class Evictor:
    """Owns eviction: device passes per component (`device_pass`), demotion, dropping subtrees,
    and host eviction (`evict_host`, `alloc_host`) through its `HostEvictor`."""

    __slots__ = ("components", "_counters", "_removal", "_blocks", "_host", "_write_back")

    def __init__(
        self,
        components: ComponentSet,
        counters: CacheCounters,
        removal: NodeRemoval,
        blocks: BlockLog,
        host: HostEvictor,
        write_back: bool,
    ) -> None:
        self.components = components
        self._counters = counters
        self._removal = removal
        self._blocks = blocks
        self._host = host
        self._write_back = write_back

    def device_pass(self, i: ComponentIndex, n: int) -> DevicePass:
        """A pass freeing at least `n` device slots of component index `i` (see `DevicePass`)."""
        store = self.components.by_index[i]
        return DevicePass(self, store, n, store.lru_device, self._write_back)

    def evict_host(self, i: ComponentIndex, n: int) -> int:
        return self._host.evict(i, n)

    def alloc_host(self, i: ComponentIndex, n: int) -> array[int] | None:
        return self._host.alloc(i, n)

    def note_blocked(self, node: Node, component: str) -> None:
        self._blocks.note(node, component, "device")

    def count_device_eviction(self) -> None:
        self._counters.device_evictions += 1

    def demote(self, node: Node) -> int:
        """Drop `node`'s device copies (the base cascades to every other component); host copies stay."""
        c = self._counters
        comps = self.components
        base = comps.base
        parent = node.parent
        assert parent is not None
        freed = base.drop_device(node)
        for store in comps.aux:
            if store.on_device(node):
                self.free_device(store, node)
        c.demotions += 1
        c.device_evictions += 1
        c.count_device_evicted(base.component_index, freed)
        if parent.parent is not None and base.is_device_leaf(parent):
            base.lru_device.push(parent)
        if not node.children and base.on_host(node):
            base.lru_host.push(node)
        return freed

    def free_device(self, store: ComponentStore, node: Node) -> int:
        """Free `node`'s device data of `store` (not the base), counting it lost if it had no host copy."""
        freed = store.drop_device(node)
        c = self._counters
        c.count_device_evicted(store.component_index, freed)
        if not store.on_host(node):
            c.aux_lost += 1
        return freed

    def drop_subtree(self, node: Node) -> int:
        """Remove `node` and everything below it (data lost); 0 if any of it is pinned."""
        sub = list(iter_subtree(node))
        comps = self.components
        for x in sub:
            if comps.pinned(x):
                self._blocks.note(x, comps.base.name, "device")
                return 0
        removal = self._removal
        freed = 0
        for x in reversed(sub):
            freed += removal.free_node(x)
            removal.remove_leaf(x)
            self._counters.dropped_nodes += 1
        parent = node.parent
        assert parent is not None
        removal.after_child_removed(parent)
        return freed

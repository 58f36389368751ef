"""`Evictor`: device eviction, leaf-first LRU per component, cascading to lower ones, never a pinned node.

Eviction never starts a backup itself. Under write_back a device pass stops
at a victim whose data is on device only and reports it (`BackupNeed`);
whoever makes room (`ops/room.py`) asks the backup scheduler for that copy,
then hands the victim back to the pass (`resume`) and lets it go on.
"""

from __future__ import annotations

from array import array

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.markers import FULL, SWA_IDX
from unicache.ops.blocked import BlockLog
from unicache.ops.host_eviction import HostEvictor
from unicache.ops.removal import NodeRemoval, iter_subtree
from unicache.tree.lru import EvictionQueue
from unicache.tree.node import Node


class BackupNeed:
    """A write_back victim whose data is on device only: back it up before it is evicted.

    `full`: back up the node's Full chain (it has no host copy); otherwise
    back up its device-only SWA pages (`swa`) and/or Mamba state (`mamba`).
    """

    __slots__ = ("node", "full", "swa", "mamba")

    def __init__(self, node: Node, full: bool, swa: bool, mamba: bool) -> None:
        self.node = node
        self.full = full
        self.swa = swa
        self.mamba = mamba

    def __repr__(self) -> str:
        return f"<BackupNeed #{self.node.id} full={self.full} swa={self.swa} mamba={self.mamba}>"


class DevicePass:
    """One device eviction of at least `n` slots of one component, in exact LRU order.

    `next_victim()` evicts until `n` are freed or nothing is left (None), or
    until a victim needs a backup first (its `BackupNeed`); `resume(need,
    started, waited)` then evicts that victim, or holds it back when its
    backup is still in flight. `finish()` files the held-back candidates
    in their heap again and returns what was freed.
    """

    __slots__ = (
        "_evictor", "_components", "_full", "_swa", "_n", "freed", "_heap", "_blocked", "_write_back",
    )

    _blocked: list[Node]

    def __init__(self, evictor: Evictor, i: int, n: int, heap: EvictionQueue, write_back: bool) -> None:
        self._evictor = evictor
        self._components = evictor.components
        self._full = i == FULL
        self._swa = i == SWA_IDX
        self._n = n
        self.freed = 0
        self._heap = heap
        self._blocked = []
        self._write_back = write_back

    def next_victim(self) -> BackupNeed | None:
        if not self._full:
            return self._next_aux()
        heap = self._heap
        wb = self._write_back
        ev = self._evictor
        comps = self._components
        full = comps.full
        fdev = full.dev
        fhost = full.host_col
        n = self._n
        while self.freed < n:
            node = heap.pop()
            if node is None:
                break
            slot = node.slot
            if not slot or fdev[slot] is None or node.parent is None or node.dev_children:
                continue
            if comps.pinned(node):
                self._blocked.append(node)
                ev.note_blocked(node, "Full")
                continue
            if wb:
                if fhost[slot] is None:
                    return BackupNeed(node, True, False, False)
                if comps.aux_device_only(node):
                    return BackupNeed(node, False, True, True)
            if fhost[slot] is None:
                self.freed += ev.drop_subtree(node)
            else:
                self.freed += ev.demote(node)
        return None

    def resume(self, need: BackupNeed, started: bool, waited: bool) -> None:
        """Evict `need`'s victim after its backup (`started`: a backup was submitted; `waited`: its
        ack is settled); a victim whose backup is in flight or that is pinned again is held back."""
        node = need.node
        if started:
            comps = self._components
            pinned = comps.pinned(node) if self._full else comps.aux_pinned(node)
            if not waited or pinned:
                self._blocked.append(node)
                return
        if self._full:
            self._evict_full(node)
        else:
            self._evict_aux(node)

    def finish(self) -> int:
        heap = self._heap
        for b in self._blocked:
            heap.push(b)
        self._blocked = []
        return self.freed

    def _evict_full(self, node: Node) -> None:
        if self._components.full.host_slots(node) is None:
            self.freed += self._evictor.drop_subtree(node)
        else:
            self.freed += self._evictor.demote(node)

    def _next_aux(self) -> BackupNeed | None:
        heap = self._heap
        wb = self._write_back
        ev = self._evictor
        swa = self._swa
        comps = self._components
        sw = comps.swa
        mamba = comps.mamba if comps.has_mamba else None
        name = "SWA" if swa else "Mamba"
        while self.freed < self._n:
            node = heap.pop()
            if node is None:
                break
            slot = node.slot
            if not slot:
                continue
            if swa:
                if sw.dev[slot] is None:
                    continue
                if comps.aux_pinned(node):
                    self._blocked.append(node)
                    ev.note_blocked(node, name)
                    continue
                lose_swa = sw.host_col[slot] is None
                lose_mamba = mamba is not None and mamba.dev[slot] >= 0 and mamba.host_col[slot] < 0
            else:
                assert mamba is not None
                if mamba.dev[slot] < 0:
                    continue
                p = mamba.pin_sets.get(slot)
                if p is not None and p:
                    self._blocked.append(node)
                    ev.note_blocked(node, name)
                    continue
                lose_swa = False
                lose_mamba = mamba.host_col[slot] < 0
            if wb and (lose_swa or lose_mamba):
                return BackupNeed(node, False, lose_swa, lose_mamba)
            self._evict_aux(node)
        return None

    def _evict_aux(self, node: Node) -> None:
        ev = self._evictor
        if self._swa:
            self.freed += ev.free_dev_swa(node)
            comps = self._components
            if comps.has_mamba and comps.mamba.device_state(node) is not None:
                ev.free_dev_mamba(node)
        else:
            self.freed += ev.free_dev_mamba(node)
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

    def device_pass(self, i: int, n: int) -> DevicePass:
        """A pass freeing at least `n` device slots of component index `i` (see `DevicePass`)."""
        heap = self.components.by_index[i].lru_device
        return DevicePass(self, i, n, heap, self._write_back)

    def evict_host(self, i: int, n: int) -> int:
        return self._host.evict(i, n)

    def alloc_host(self, i: int, n: int) -> array[int] | None:
        return self._host.alloc(i, n)

    def note_blocked(self, node: Node, component: str) -> None:
        self._blocks.note(node, component, "device")

    def count_device_eviction(self) -> None:
        self._counters.device_evictions += 1

    def demote(self, node: Node) -> int:
        """Drop `node`'s device copies (Full cascades to SWA and Mamba); host copies stay."""
        c = self._counters
        comps = self.components
        full = comps.full
        parent = node.parent
        slot = node.slot
        fdev = full.dev
        pages = fdev[slot]
        assert pages is not None and parent is not None
        fdev[slot] = None
        parent.dev_children -= 1
        full.device.free(pages)
        freed = len(pages)
        if comps.has_swa and comps.swa.device_slots(node) is not None:
            self.free_dev_swa(node)
        if comps.has_mamba and comps.mamba.device_state(node) is not None:
            self.free_dev_mamba(node)
        c.demotions += 1
        c.device_evictions += 1
        c.full_pages_evicted += freed
        if parent.parent is not None and full.is_device_leaf(parent):
            full.lru_device.push(parent)
        if not node.children and full.host_slots(node) is not None:
            full.lru_host.push(node)
        return freed

    def free_dev_swa(self, node: Node) -> int:
        swa = self.components.swa
        freed = swa.drop_device(node)
        self._counters.swa_pages_evicted += freed
        if swa.host_slots(node) is None:
            self._counters.aux_lost += 1
        return freed

    def free_dev_mamba(self, node: Node) -> int:
        mamba = self.components.mamba
        freed = mamba.drop_device(node)
        self._counters.mamba_evicted += 1
        if mamba.host_state(node) is None:
            self._counters.aux_lost += 1
        return freed

    def drop_subtree(self, node: Node) -> int:
        """Remove `node` and everything below it (data lost); 0 if any of it is pinned."""
        sub = list(iter_subtree(node))
        comps = self.components
        for x in sub:
            if comps.pinned(x):
                self._blocks.note(x, "Full", "device")
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

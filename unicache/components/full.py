"""Full KV: its store (pages per node, prefix-closed on device) and its rules (evicted chain, device leaf)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from unicache.components.paged import PagedStore
from unicache.components.store import LoadPlan
from unicache.markers import FULL, Full
from unicache.tree.node import Node


class FullStore(PagedStore[Full]):
    """Full-attention KV: a page per `page_size` tokens on every node; the base component.

    Device residency is prefix-closed; a node's parent counts its device
    children (`dev_children`), which `drop_device` and `split` keep right.
    `dups` indexes the nodes whose Full KV is on both tiers (candidates for
    reclaiming the host copy); entries may be stale and are checked on use.
    """

    __slots__ = ("dups",)
    marker = Full
    index = FULL
    unit = "page"

    dups: dict[int, Node]

    def new_tree(self) -> None:
        super().new_tree()
        self.dups = {}

    def note_duplicate(self, node: Node) -> None:
        """Index `node` as holding its Full KV on device and host."""
        self.dups[node.id] = node

    def init_root(self, root: Node) -> None:
        slot = root.slot
        self.dev[slot] = []
        self.host_col[slot] = array("i")

    def split(self, upper: Node, lower: Node, pages: int) -> None:
        upper.dev_children = 1 if self.dev[lower.slot] is not None else 0
        super().split(upper, lower, pages)

    def drop_device(self, node: Node) -> int:
        """As `PagedStore.drop_device`, counting the node out of its parent's `dev_children`."""
        slot = node.slot
        pages = self.dev[slot]
        assert pages is not None, node.id
        handed = self.handed
        if handed is None:
            self.device.free(pages)
        else:
            handed.hand_device(node, pages, self.pin_sets.get(slot))
        self.dev[slot] = None
        parent = node.parent
        if parent is not None:
            parent.dev_children -= 1
        return len(pages)

    def adopt_device(self, node: Node, slots: list[int]) -> bool:
        """As `PagedStore.adopt_device`, counting the node in its parent's `dev_children` and indexing
        a duplicate."""
        slot = node.slot
        if self.dev[slot] is None:
            self.dev[slot] = slots
            parent = node.parent
            assert parent is not None
            parent.dev_children += 1
            self.lru_device.push(node)
            if self.host_col[slot] is not None:
                self.dups[node.id] = node
            return True
        self._hand_or_free_device(node, slots)
        return False

    def file_split(self, upper: Node) -> None:
        """A device fragment goes in the device heap (indexed as a duplicate if also on host); an
        upper fragment has children, so it is never a host leaf."""
        slot = upper.slot
        if self.dev[slot] is not None:
            self.lru_device.push(upper)
            if self.host_col[slot] is not None:
                self.dups[upper.id] = upper

    def segments(self, nodes: Sequence[Node], dst: list[int]) -> list[tuple[int, list[int]]]:
        """One segment: a Full chain is contiguous."""
        return [(nodes[0].start, dst)] if nodes else []

    def host_segments(self, nodes: Sequence[Node], dst: array[int]) -> list[tuple[int, array[int]]]:
        return [(nodes[0].start, dst)] if nodes else []

    def load_back_plan(self, anchor: Node, chain: Sequence[Node]) -> LoadPlan:
        """The evicted chain above `anchor` moves; the lease also pins the device node above it."""
        move, top = self.evicted_chain(anchor)
        return move, move + [top] if move and top.parent is not None else move, ()

    def publish_device(self, bottom: Node, segments: Sequence[tuple[int, list[int]]], clock: int) -> int:
        """As `PagedStore.publish_device`, keeping `dev_children`, recency and the duplicate index."""
        ps = self.page_size
        dev = self.dev
        host = self.host_col
        lru = self.lru_device
        dups = 0
        for start, dst in segments:
            x: Node | None = bottom
            while x is not None and x.start >= start and x.parent is not None:
                pages = dst[(x.start - start) // ps : (x.end - start) // ps]
                slot = x.slot
                if dev[slot] is None:
                    dev[slot] = pages
                    x.parent.dev_children += 1
                    x.last_access = clock
                    lru.push(x)
                    if host[slot] is not None:
                        self.dups[x.id] = x
                else:
                    self._hand_or_free_device(x, pages)
                    dups += len(pages)
                x = x.parent
        return dups

    def publish_host(self, bottom: Node, segments: Sequence[tuple[int, array[int]]]) -> int:
        """As `PagedStore.publish_host`; a copy of a device node is indexed as a duplicate, a host-only
        leaf is filed in the host heap."""
        ps = self.page_size
        dev = self.dev
        host = self.host_col
        dups = 0
        for start, dst in segments:
            x: Node | None = bottom
            while x is not None and x.parent is not None and x.start >= start:
                pages = dst[(x.start - start) // ps : (x.end - start) // ps]
                slot = x.slot
                if host[slot] is None:
                    host[slot] = pages
                    if dev[slot] is not None:
                        self.dups[x.id] = x
                    elif not x.children:
                        self.lru_host.push(x)
                else:
                    self._hand_or_free_host(pages)
                    dups += len(pages)
                x = x.parent
        return dups

    def evicted_chain(self, anchor: Node) -> tuple[list[Node], Node]:
        """The host-only nodes above `anchor` (anchor included), root-first, and the device node above them.

        Full device residency is prefix-closed, so the chain ends at the first
        device-resident ancestor (the root at worst).
        """
        dev = self.dev
        chain: list[Node] = []
        node = anchor
        while dev[node.slot] is None:
            chain.append(node)
            parent = node.parent
            assert parent is not None, "the root is always device-resident"
            node = parent
        chain.reverse()
        return chain, node

    def is_device_leaf(self, node: Node) -> bool:
        """Full on device and no child with Full on device: the only Full eviction candidates."""
        return node.dev_children == 0 and self.dev[node.slot] is not None and node.parent is not None

    def deepest_device(self, node: Node) -> Node:
        """The deepest node on `node`'s path whose Full KV is on device (the root at worst)."""
        dev = self.dev
        while dev[node.slot] is None:
            parent = node.parent
            assert parent is not None, "the root is always device-resident"
            node = parent
        return node

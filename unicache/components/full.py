"""Full KV: its store (pages per node, prefix-closed on device) and its rules (evicted chain, device leaf)."""

from __future__ import annotations

from array import array

from unicache.components.paged import PagedStore
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
        freed = super().drop_device(node)
        parent = node.parent
        if parent is not None:
            parent.dev_children -= 1
        return freed

    def on_device(self, node: Node) -> bool:
        return self.dev[node.slot] is not None

    def on_host(self, node: Node) -> bool:
        return self.host_col[node.slot] is not None

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

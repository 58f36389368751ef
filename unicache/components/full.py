"""Full KV: its store (pages per node, prefix-closed on device) and its rules (evicted chain, device leaf)."""

from __future__ import annotations

from array import array

from leases import PinSet

from unicache.markers import FULL, Full
from unicache.components.store import ComponentStore
from unicache.tree.node import Node


def evicted_chain(anchor: Node) -> tuple[list[Node], Node]:
    """The host-only nodes above `anchor` (anchor included), root-first, and the device node above them.

    Full device residency is prefix-closed, so the chain ends at the first
    device-resident ancestor (the root at worst).
    """
    chain: list[Node] = []
    node = anchor
    while node.dev_full is None:
        chain.append(node)
        parent = node.parent
        assert parent is not None, "the root is always device-resident"
        node = parent
    chain.reverse()
    return chain, node


def is_device_leaf(node: Node) -> bool:
    """Full on device and no child with Full on device: the only Full eviction candidates."""
    return node.dev_children == 0 and node.dev_full is not None and node.parent is not None


def deepest_device(node: Node) -> Node:
    """The deepest node on `node`'s path whose Full KV is on device (the root at worst)."""
    while node.dev_full is None:
        parent = node.parent
        assert parent is not None, "the root is always device-resident"
        node = parent
    return node


class FullStore(ComponentStore):
    """Full-attention KV: a page per `page_size` tokens on every node; the base component.

    Device residency is prefix-closed; a node's parent counts its device
    children (`dev_children`), which `drop_device` keeps right. `dups`
    indexes the nodes whose Full KV is on both tiers (candidates for
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

    def pins(self, node: Node) -> PinSet[Full, Node] | None:
        return node.pins_full

    def device_slots(self, node: Node) -> list[int] | None:
        return node.dev_full

    def host_slots(self, node: Node) -> array[int] | None:
        return node.host_pages

    def drop_device(self, node: Node) -> int:
        pages = node.dev_full
        assert pages is not None, node.id
        self.device.free(pages)
        node.dev_full = None
        parent = node.parent
        if parent is not None:
            parent.dev_children -= 1
        return len(pages)

    def drop_host(self, node: Node) -> int:
        pages = node.host_pages
        assert pages is not None, node.id
        self.host.free(pages)
        node.host_pages = None
        return len(pages)

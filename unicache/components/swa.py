"""SWA: its store (pages per node, like Full) and its rule (which nodes hold the last `window` tokens)."""

from __future__ import annotations

from array import array

from leases import PinSet

from unicache.markers import SWA, SWA_IDX
from unicache.components.store import ComponentStore
from unicache.tree.node import Node


def window_nodes(end_node: Node, window: int) -> list[Node]:
    """Nodes on the path to `end_node` holding any of its last `window` tokens, bottom-up.

    A node straddling the window start is included whole (its SWA pages are
    loaded and pinned as a unit).
    """
    out: list[Node] = []
    lower = end_node.end - window
    node = end_node
    while node.parent is not None and node.end > lower:
        out.append(node)
        node = node.parent
    return out


def window_present(end_node: Node, window: int) -> tuple[bool, bool]:
    """(every window node has SWA on device or host, every window node has SWA on device)."""
    present = on_device = True
    lower = end_node.end - window
    node = end_node
    while node.parent is not None and node.end > lower:
        if node.dev_swa is None:
            on_device = False
            if node.host_swa is None:
                return False, False
        node = node.parent
    return present, on_device


class SWAStore(ComponentStore):
    """Sliding-window KV: pages like Full, but a path only needs its last `swa_window` tokens."""

    __slots__ = ()
    marker = SWA
    index = SWA_IDX
    unit = "page"

    def pins(self, node: Node) -> PinSet[SWA, Node] | None:
        return node.pins_swa

    def device_slots(self, node: Node) -> list[int] | None:
        return node.dev_swa

    def host_slots(self, node: Node) -> array[int] | None:
        return node.host_swa_pages

    def drop_device(self, node: Node) -> int:
        pages = node.dev_swa
        assert pages is not None, node.id
        self.device.free(pages)
        node.dev_swa = None
        return len(pages)

    def drop_host(self, node: Node) -> int:
        pages = node.host_swa_pages
        assert pages is not None, node.id
        self.host.free(pages)
        node.host_swa_pages = None
        return len(pages)

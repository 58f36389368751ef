"""SWA: its store (pages per node, like Full) and its rule (which nodes hold the last `window` tokens)."""

from __future__ import annotations

from unicache.components.paged import PagedStore
from unicache.markers import SWA, SWA_IDX
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


class SWAStore(PagedStore[SWA]):
    """Sliding-window KV: pages like Full, but a path only needs its last `swa_window` tokens."""

    __slots__ = ()
    marker = SWA
    index = SWA_IDX
    unit = "page"

    def window_present(self, end_node: Node, window: int) -> tuple[bool, bool]:
        """(every window node has SWA on device or host, every window node has SWA on device)."""
        dev = self.dev
        host = self.host_col
        present = on_device = True
        lower = end_node.end - window
        node = end_node
        while node.parent is not None and node.end > lower:
            slot = node.slot
            if dev[slot] is None:
                on_device = False
                if host[slot] is None:
                    return False, False
            node = node.parent
        return present, on_device

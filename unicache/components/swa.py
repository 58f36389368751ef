"""SWA rules: which nodes hold the last `window` tokens of a path."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

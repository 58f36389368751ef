"""SWA: its store (pages per node, like Full) and its rule (which nodes hold the last `window` tokens)."""

from __future__ import annotations

from collections.abc import Sequence

from unicache.components.paged import PagedStore
from unicache.components.store import LoadPlan
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

    __slots__ = ("window",)
    marker = SWA
    index = SWA_IDX
    unit = "page"

    window: int

    def configure(self, page_size: int, window: int) -> None:
        super().configure(page_size, window)
        self.window = window

    @classmethod
    def engine_owned_window(cls, page_size: int, window: int, host_marker: type) -> SWAStore:
        """The engine-owned mode (`PagedStore.engine_owned`: index values handed in and back, none allocated)
        for a sliding window of `window` tokens."""
        if window < 1:
            raise ValueError(f"SWAStore: the sliding window must be >= 1 token, got {window}")
        store = cls.engine_owned(page_size, host_marker)
        store.window = window
        return store

    def lock_nodes(self, end: Node) -> Sequence[Node]:
        """The window: every node holding one of the path's last `window` tokens."""
        return window_nodes(end, self.window)

    def match_marks(self, path: Sequence[Node], usable: bytearray, on_device: bytearray) -> None:
        """A node ends a match when no node missing SWA (on that tier) holds a token of its window."""
        dev = self.dev
        host = self.host_col
        w = self.window
        run_any = run_dev = 0
        for k, node in enumerate(path):
            slot = node.slot
            if dev[slot] is None:
                run_dev = node.end
                if host[slot] is None:
                    run_any = node.end
            lower = node.end - w
            if run_any > lower and run_any != 0:
                usable[k] = 0
            if run_dev > lower and run_dev != 0:
                on_device[k] = 0

    def host_need(self, anchor: Node) -> int:
        """The window tokens of `anchor` not on device."""
        dev = self.dev
        return sum(x.end - x.start for x in window_nodes(anchor, self.window) if dev[x.slot] is None)

    def load_back_plan(self, anchor: Node, chain: Sequence[Node]) -> LoadPlan:
        """The window nodes without device pages move (root first); the lease pins the whole window."""
        win = window_nodes(anchor, self.window)
        dev = self.dev
        host = self.host_col
        lost = tuple(x.id for x in win if dev[x.slot] is None and host[x.slot] is None)
        if lost:
            return [], (), lost
        move = [x for x in win if dev[x.slot] is None]
        move.reverse()
        return move, win, ()

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

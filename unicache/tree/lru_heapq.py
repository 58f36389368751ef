"""`HeapqLRU`: the previous eviction queue (`heapq` over entry tuples), the exact-order reference for `LazyLRU`.

The cache no longer uses it: `tests/unicache/test_lru.py` checks `LazyLRU`
against it pop for pop, and `benchmarks/bench_lru.py` times the two side by
side. See docs/performance.md, "Where eviction's growth comes from".
"""

from __future__ import annotations

from heapq import heappop, heappush

from unicache.tree.node import Node

Entry = tuple[int, int, int, Node]


class HeapqLRU:
    """Least-recently-used first; ties go to the deeper node (leaf-first).

    Touching a node costs nothing here: an entry whose recorded access time
    is older than the node's is pushed back with the current time when it
    surfaces. `bit` marks membership in `Node.lru`, so a node is never in
    one heap twice. Validity (residency, pins) is the caller's test.
    """

    __slots__ = ("heap", "bit")

    def __init__(self, bit: int) -> None:
        self.heap: list[Entry] = []
        self.bit = bit

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, node: Node) -> None:
        bit = self.bit
        if node.lru & bit:
            return
        node.lru |= bit
        heappush(self.heap, (node.last_access, -node.end, node.id, node))

    def pop(self) -> Node | None:
        """The least recently used node still carrying this heap's bit, or None when empty.

        The bit is cleared; the caller pushes the node back if it stays a candidate.
        """
        heap = self.heap
        bit = self.bit
        while heap:
            entry = heappop(heap)
            node = entry[3]
            if entry[0] != node.last_access and node.alive:
                heappush(heap, (node.last_access, -node.end, node.id, node))
                continue
            node.lru &= ~bit
            return node
        return None

    def discard_all(self) -> None:
        for entry in self.heap:
            entry[3].lru &= ~self.bit
        self.heap.clear()

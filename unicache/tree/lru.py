"""`LazyLRU`: an eviction queue with at most one entry per node, re-sorted lazily on pop.

An 8-ary heap over two flat arrays: `keys`, a `librt.vecs.vec[i64]` (mypyc's
runtime, a dependency of mypy) of the access times the entries were filed
with, and `nodes`, the entries' nodes at the same positions. The order is
`(last_access, -end, id)`: least recently used first, ties to the deeper
node, then the older id; only a tie on the access time reads the two nodes
(`end` and `id` never change while a node lives). Compiled, `keys` is read
and written natively (int64, no boxing).

Why this layout and not `heapq` over entry tuples (`HeapqLRU`, the previous
queue): a pop reads one run of 8 keys per level (one cache line) over log8
n levels, where `heapq` reads two scattered tuples and their ints per level
over log2 n. Cold, at 100k entries, that is about 6 levels of misses
instead of 17, so eviction's cost stays flat as the tree grows.

`new_lru` picks the queue for the build: `LazyLRU` compiled; `HeapqLRU`
interpreted, where `heapq`'s C sift beats an interpreted 8-ary sift at
every size measured (docs/performance.md, "Where eviction's growth comes
from"). Both pop exactly the same nodes (tests/unicache/test_lru.py).
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Final

from librt.vecs import append as vec_append
from librt.vecs import pop as vec_pop
from librt.vecs import vec
from mypy_extensions import i64

from unicache.tree.node import Node

Entry = tuple[int, int, int, Node]
"""An entry as `entries()` spells it: (filed access time, -end, id, node), the order's key."""

ARITY: Final = 8


def before(a: Node, b: Node) -> bool:
    """`a` goes first among entries filed at the same access time: deeper, then older id."""
    return a.end > b.end or (a.end == b.end and a.id < b.id)


class LazyLRU:
    """Least-recently-used first; ties go to the deeper node (leaf-first).

    Touching a node costs nothing here: an entry whose recorded access time
    is older than the node's is filed again with the current time when it
    surfaces. `bit` marks membership in `Node.lru`, so a node is never in
    one queue twice. Validity (residency, pins) is the caller's test.
    """

    __slots__ = ("keys", "nodes", "bit")

    keys: vec[i64]
    nodes: list[Node]
    bit: int

    def __init__(self, bit: int) -> None:
        self.keys = vec[i64]()
        self.nodes = []
        self.bit = bit

    def __len__(self) -> int:
        return len(self.nodes)

    def entries(self) -> list[Entry]:
        """Every entry, in no particular order: for checks and snapshots, not for the hot path."""
        return [(t, -x.end, x.id, x) for t, x in zip(self.keys, self.nodes)]

    def push(self, node: Node) -> None:
        bit = self.bit
        if node.lru & bit:
            return
        node.lru |= bit
        t: i64 = node.last_access
        keys = vec_append(self.keys, t)
        self.keys = keys
        nodes = self.nodes
        pos: i64 = len(nodes)
        nodes.append(node)
        while pos:
            up = (pos - 1) // ARITY
            ku = keys[up]
            if t > ku or (t == ku and not before(node, nodes[up])):
                break
            keys[pos] = ku
            nodes[pos] = nodes[up]
            pos = up
        keys[pos] = t
        nodes[pos] = node

    def pop(self) -> Node | None:
        """The least recently used node still carrying this queue's bit, or None when empty.

        The bit is cleared; the caller pushes the node back if it stays a candidate.
        """
        keys = self.keys
        nodes = self.nodes
        while nodes:
            node = nodes[0]
            t: i64 = node.last_access
            if keys[0] != t and node.alive:
                self._sift_down(t, node)
                continue
            keys, last_t = vec_pop(keys)
            self.keys = keys
            last = nodes.pop()
            if nodes:
                self._sift_down(last_t, last)
            node.lru &= ~self.bit
            return node
        return None

    def discard_all(self) -> None:
        bit = self.bit
        for node in self.nodes:
            node.lru &= ~bit
        self.nodes.clear()
        self.keys = vec[i64]()

    def _sift_down(self, t: i64, node: Node) -> None:
        """File (`t`, `node`) at the root, replacing what is there, and sink it to its place."""
        keys = self.keys
        nodes = self.nodes
        n: i64 = len(nodes)
        pos: i64 = 0
        while True:
            c = pos * ARITY + 1
            if c >= n:
                break
            e = c + ARITY
            if e > n:
                e = n
            best = c
            kb = keys[c]
            for j in range(c + 1, e):
                kj = keys[j]
                if kj < kb or (kj == kb and before(nodes[j], nodes[best])):
                    best = j
                    kb = kj
            if t < kb or (t == kb and before(node, nodes[best])):
                break
            keys[pos] = kb
            nodes[pos] = nodes[best]
            pos = best
        keys[pos] = t
        nodes[pos] = node


class HeapqLRU(LazyLRU):
    """The same queue as `heapq` over `Entry` tuples (the base's arrays stay empty).

    The interpreted build's queue, and `LazyLRU`'s exact-order reference.
    """

    __slots__ = ("heap",)

    heap: list[Entry]

    def __init__(self, bit: int) -> None:
        super().__init__(bit)
        self.heap = []

    def __len__(self) -> int:
        return len(self.heap)

    def entries(self) -> list[Entry]:
        return list(self.heap)

    def push(self, node: Node) -> None:
        bit = self.bit
        if node.lru & bit:
            return
        node.lru |= bit
        heappush(self.heap, (node.last_access, -node.end, node.id, node))

    def pop(self) -> Node | None:
        heap = self.heap
        while heap:
            entry = heappop(heap)
            node = entry[3]
            if entry[0] != node.last_access and node.alive:
                heappush(heap, (node.last_access, -node.end, node.id, node))
                continue
            node.lru &= ~self.bit
            return node
        return None

    def discard_all(self) -> None:
        bit = self.bit
        for entry in self.heap:
            entry[3].lru &= ~bit
        self.heap.clear()


COMPILED: Final = __file__.endswith((".so", ".pyd"))
"""Whether this module is a compiled extension (the mypyc build)."""


def new_lru(bit: int) -> LazyLRU:
    """An empty eviction queue for heap bit `bit`, the faster one for this build (see the module docstring)."""
    return LazyLRU(bit) if COMPILED else HeapqLRU(bit)

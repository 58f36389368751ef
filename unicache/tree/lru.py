"""`LazyLRU`: an eviction queue with at most one entry per node, re-sorted lazily on pop.

An 8-ary heap over two flat arrays: `keys`, a `librt.vecs.vec[i64]` (mypyc's
runtime, a dependency of mypy) of the access times the entries were filed
with, and `nodes`, the entries' nodes at the same positions. The order is
`(last_access, -end, id)`: least recently used first, ties to the deeper
node, then the older id; only a tie on the access time reads the two nodes
(`end` and `id` never change while a node lives). Compiled, `keys` is read
and written natively (int64, no boxing).

Why this layout and not `heapq` over entry tuples (`TupleLRU`, the queue
before issue 15's change, kept as the exact-order reference): a pop reads
one run of 8 keys per level (64 bytes: one cache line, or two) over log8 n
levels, where `heapq` reads two scattered tuples and their ints per level
over log2 n.
Cold, at 100k entries, that is about 6 levels of misses instead of 17, so
eviction's cost stays flat as the tree grows.

`new_lru` picks the queue for the build: `LazyLRU` compiled; `HeapqLRU`
(`heapq` over one packed int per entry) interpreted, where `heapq`'s C
sift beats an interpreted 8-ary sift at every size measured
(docs/performance.md, "Flat eviction"). All three pop exactly the same
nodes (tests/unicache/test_lru.py).
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


class EvictionQueue:
    """An eviction queue: least-recently-used first; ties go to the deeper node (leaf-first), then the older id.

    Touching a node costs nothing here: an entry whose recorded access time
    is older than the node's is filed again with the current time when it
    surfaces. `bit` marks membership in `Node.lru`, so a node is never in
    one queue twice. Validity (residency, pins) is the caller's test.
    `LazyLRU`, `HeapqLRU` and `TupleLRU` are its three layouts.
    """

    __slots__ = ("bit",)

    bit: int

    def __init__(self, bit: int) -> None:
        self.bit = bit

    def __len__(self) -> int:
        raise NotImplementedError

    def entries(self) -> list[Entry]:
        """Every entry, in no particular order: for checks and snapshots, not for the hot path."""
        raise NotImplementedError

    def push(self, node: Node) -> None:
        """File `node` (a no-op when it already carries this queue's bit)."""
        raise NotImplementedError

    def pop(self) -> Node | None:
        """The least recently used node still carrying this queue's bit, or None when empty.

        The bit is cleared; the caller pushes the node back if it stays a candidate.
        """
        raise NotImplementedError

    def discard_all(self) -> None:
        """Empty the queue, clearing the bit of every node in it."""
        raise NotImplementedError


class LazyLRU(EvictionQueue):
    """The 8-ary heap over flat arrays (the module docstring): the compiled build's queue."""

    __slots__ = ("keys", "nodes")

    keys: vec[i64]
    nodes: list[Node]

    def __init__(self, bit: int) -> None:
        super().__init__(bit)
        self.keys = vec[i64]()
        self.nodes = []

    def __len__(self) -> int:
        return len(self.nodes)

    def entries(self) -> list[Entry]:
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


FIELD_BITS: Final = 48
"""Width of each of `HeapqLRU`'s two low key fields (`E_MAX - end`, then `id`)."""
E_MAX: Final = (1 << FIELD_BITS) - 1
ID_MASK: Final = (1 << FIELD_BITS) - 1


class HeapqLRU(EvictionQueue):
    """The same queue as `heapq` over packed int keys: the interpreted build's.

    A key is `last_access << 96 | (E_MAX - end) << 48 | id`: one int whose
    order is the `(last_access, -end, id)` order exactly (for any access
    time; `end` and `id` must fit 48 bits, else `OverflowError` naming the
    node). `by_id` maps a queued id to its node. A comparison reads one int
    object, where a tuple entry costs two reads (the tuple, then its first
    int), so a cold pop misses about half as often as `TupleLRU`'s.
    """

    __slots__ = ("heap", "by_id")

    heap: list[int]
    by_id: dict[int, Node]

    def __init__(self, bit: int) -> None:
        super().__init__(bit)
        self.heap = []
        self.by_id = {}

    def __len__(self) -> int:
        return len(self.heap)

    def entries(self) -> list[Entry]:
        by_id = self.by_id
        return [(k >> (2 * FIELD_BITS), -by_id[k & ID_MASK].end, k & ID_MASK, by_id[k & ID_MASK]) for k in self.heap]

    def push(self, node: Node) -> None:
        bit = self.bit
        if node.lru & bit:
            return
        i = node.id
        end = node.end
        if (end | i) >> FIELD_BITS or end < 0 or i < 0:
            raise OverflowError(f"node {i}: end {end} and id must lie in 0..2**{FIELD_BITS}-1 to be queued")
        node.lru |= bit
        self.by_id[i] = node
        heappush(self.heap, (((node.last_access << FIELD_BITS) | (E_MAX - end)) << FIELD_BITS) | i)

    def pop(self) -> Node | None:
        heap = self.heap
        by_id = self.by_id
        while heap:
            k = heappop(heap)
            i = k & ID_MASK
            node = by_id[i]
            t = node.last_access
            if k >> (2 * FIELD_BITS) != t and node.alive:
                heappush(heap, (((t << FIELD_BITS) | (E_MAX - node.end)) << FIELD_BITS) | i)
                continue
            del by_id[i]
            node.lru &= ~self.bit
            return node
        return None

    def discard_all(self) -> None:
        bit = self.bit
        for node in self.by_id.values():
            node.lru &= ~bit
        self.heap.clear()
        self.by_id.clear()


class TupleLRU(EvictionQueue):
    """The queue before issue 15's change: `heapq` over `Entry` tuples. Kept as the exact-order reference
    (tests/unicache/test_lru.py) and the baseline of benchmarks/bench_lru.py; the cache does not use it."""

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


def new_lru(bit: int) -> EvictionQueue:
    """An empty eviction queue for heap bit `bit`, the faster one for this build (see the module docstring)."""
    return LazyLRU(bit) if COMPILED else HeapqLRU(bit)

"""The eviction queue alone as it grows: the cache's `LazyLRU` (one binary heap) against a sorted-run queue.

Run: `.venv/bin/python benchmarks/bench_lru.py [--sizes 1000,10000,100000] [--pops 2000] [--touched 0.1]`.

For each size N it queues N leaves in access order (as inserts do), touches a
fraction of them later (`--touched`; their entries go stale and are queued
again when they surface), then times `--pops` rounds of what one eviction
does to the queue: pop the least recently used node, and queue its parent,
which just became a leaf (older than everything queued since, so it arrives
out of order). The candidate, `SortedRunLRU`, is the O(1) queue tried for
issue 15 (a deque kept sorted for entries that arrive in access order, plus a
side heap for the rest, popping the smaller head: exactly the heap's order),
same entries, same lazy rule, in the same process; both must pop the same
nodes. Printed: ns per round for each, and each one's cost at the largest
size over the smallest (1.0x is flat). It was not adopted: both grow alike
(see docs/performance.md, "The scale benchmark").
"""

from __future__ import annotations

import argparse
import gc
import heapq
import random
import time
from collections import deque

from rich.console import Console
from rich.table import Table

from unicache.tree import Node, RadixTree, encode_tokens
from unicache.tree.lru import LazyLRU


class SortedRunLRU:
    """The candidate: entries in access order appended to a sorted deque, the rest in a side heap."""

    __slots__ = ("run", "side", "bit")

    def __init__(self, bit: int) -> None:
        self.run: deque[tuple[int, int, int, Node]] = deque()
        self.side: list[tuple[int, int, int, Node]] = []
        self.bit = bit

    def _queue(self, entry: tuple[int, int, int, Node]) -> None:
        run = self.run
        if not run or run[-1] < entry:
            run.append(entry)
        else:
            heapq.heappush(self.side, entry)

    def push(self, node: Node) -> None:
        if node.lru & self.bit:
            return
        node.lru |= self.bit
        self._queue((node.last_access, -node.end, node.id, node))

    def pop(self) -> Node | None:
        run = self.run
        side = self.side
        while True:
            if side and (not run or side[0] < run[0]):
                entry = heapq.heappop(side)
            elif run:
                entry = run.popleft()
            else:
                return None
            node = entry[3]
            if entry[0] != node.last_access and node.alive:
                self._queue((node.last_access, -node.end, node.id, node))
                continue
            node.lru &= ~self.bit
            return node


def build(n: int, touched: float, seed: int) -> tuple[list[Node], list[Node]]:
    """N leaves with access times 1..N, each with its own parent (access time just before it)."""
    tree = RadixTree(1)
    rng = random.Random(seed)
    parents, leaves = [], []
    for i in range(n):
        p = tree.add_leaf(tree.root, encode_tokens([i + 1], tree.token_bytes))
        x = tree.add_leaf(p, encode_tokens([0], tree.token_bytes))
        p.last_access = 2 * i
        x.last_access = 2 * i + 1
        parents.append(p)
        leaves.append(x)
    for x in rng.sample(leaves, int(n * touched)):
        x.last_access += 2 * n
    return parents, leaves


def run(kind: str, n: int, pops: int, touched: float, seed: int) -> tuple[float, list[int]]:
    parents, leaves = build(n, touched, seed)
    q: LazyLRU | SortedRunLRU = LazyLRU(1) if kind == "binary heap" else SortedRunLRU(1)
    for x in leaves:
        q.push(x)
    order: list[int] = []
    gc.collect()
    gc.disable()
    t0 = time.process_time_ns()
    for _ in range(pops):
        node = q.pop()
        assert node is not None and node.parent is not None
        order.append(node.id)
        if node.parent.parent is not None:
            q.push(node.parent)
    dt = time.process_time_ns() - t0
    gc.enable()
    return dt / pops, order


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--pops", type=int, default=2000)
    ap.add_argument("--touched", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = ("binary heap", "sorted run")
    table = Table(title="eviction queue: ns per pop + parent re-queue (median of repeats)")
    table.add_column("nodes", justify="right")
    for k in kinds:
        table.add_column(k, justify="right")
    table.add_column("sorted run speed-up", justify="right")
    cost: dict[str, list[float]] = {k: [] for k in kinds}
    for n in sizes:
        pops = min(args.pops, n)
        got: dict[str, list[float]] = {k: [] for k in kinds}
        orders: dict[str, list[int]] = {}
        for _ in range(args.repeats):
            for k in kinds:
                ns, orders[k] = run(k, n, pops, args.touched, args.seed)
                got[k].append(ns)
        if orders[kinds[0]] != orders[kinds[1]]:
            raise SystemExit(f"N={n}: the two queues popped different nodes")
        med = {k: sorted(v)[len(v) // 2] for k, v in got.items()}
        for k in kinds:
            cost[k].append(med[k])
        table.add_row(f"{n:,}", *(f"{med[k]:,.0f}" for k in kinds), f"{med[kinds[0]] / med[kinds[1]]:.2f}x")
    table.add_row(f"{sizes[-1]:,}/{sizes[0]:,}", *(f"{cost[k][-1] / cost[k][0]:.2f}x" for k in kinds), "")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()

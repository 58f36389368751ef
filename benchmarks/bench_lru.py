"""The eviction queue alone as it grows: the queue before issue 15's change (`TupleLRU`, `heapq` over entry
tuples) against the two that replace it, `LazyLRU` (8-ary heap over flat arrays, the compiled build's) and
`HeapqLRU` (`heapq` over packed int keys, the interpreted build's), warm and cold.

Run: `.venv/bin/python benchmarks/bench_lru.py [--sizes 1000,10000,100000] [--pops 2000] [--touched 0.1]
[--cold-pops 300] [--flush-mb 64]`.

For each size N it queues N leaves in access order (as inserts do), touches a
fraction of them later (`--touched`; their entries go stale and are queued
again when they surface), then times rounds of what one eviction does to the
queue: pop the least recently used node, and queue its parent, which just
became a leaf (older than everything queued since, so it arrives out of
order). Two ways, same entries, same lazy rule, in the same process, and the
three queues must pop the same nodes in both:

- warm: `--pops` rounds back to back (what the queue costs when its lines
  are cached);
- cold: `--cold-pops` rounds, each after reading `--flush-mb` MB of other
  memory (untimed), so the queue's lines have left the caches, as they have
  when an engine evicts between serving requests.

Printed: median ns per round (of `--repeats` runs) for each queue, old over
new (`TupleLRU` over the queue this build uses, `new_lru`'s: above 1.0x the
new queue is faster), and each one's cost at the largest size over the
smallest (1.0x is flat). Run it on both builds:
interpreted (as above) and compiled (`cd build/compiled &&
UNICACHE_BUILD=compiled PYTHONPATH=$PWD ../../.venv/bin/python
benchmarks/bench_lru.py`); the compiled build is where the 8-ary queue is used.
"""

from __future__ import annotations

import argparse
import gc
import random
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from unicache.tree import Node, RadixTree, encode_tokens
from unicache.tree.lru import EvictionQueue, HeapqLRU, LazyLRU, TupleLRU, new_lru

QUEUES: dict[str, type[EvictionQueue]] = {"tuples (old)": TupleLRU, "8-ary": LazyLRU, "packed ints": HeapqLRU}
KINDS = tuple(QUEUES)


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


def run(kind: str, n: int, pops: int, touched: float, seed: int, flush: np.ndarray | None) -> tuple[float, list[int]]:
    """Median-free mean ns per round over `pops` rounds; `flush` (when given) is read before each round."""
    parents, leaves = build(n, touched, seed)
    q = QUEUES[kind](1)
    for x in leaves:
        q.push(x)
    order: list[int] = []
    clock = time.perf_counter_ns
    total = 0
    gc.collect()
    gc.disable()
    t0 = clock()
    for _ in range(pops):
        if flush is not None:
            flush.sum()
            t0 = clock()
        node = q.pop()
        assert node is not None and node.parent is not None
        if node.parent.parent is not None:
            q.push(node.parent)
        if flush is not None:
            total += clock() - t0
        order.append(node.id)
    if flush is None:
        total = clock() - t0
    gc.enable()
    return total / pops, order


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--pops", type=int, default=2000)
    ap.add_argument("--cold-pops", type=int, default=300)
    ap.add_argument("--flush-mb", type=int, default=64)
    ap.add_argument("--touched", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    flush = np.ones(args.flush_mb << 17, dtype=np.float64)
    new = next(k for k, cls in QUEUES.items() if cls is type(new_lru(1)))
    table = Table(title=f"eviction queue: ns per pop + parent re-queue (median of repeats); this build uses {new}")
    table.add_column("nodes", justify="right")
    modes = ("warm", "cold")
    for m in modes:
        for k in KINDS:
            table.add_column(f"{m}: {k}", justify="right")
        table.add_column(f"{m}: old/new", justify="right")
    cost: dict[tuple[str, str], list[float]] = {(m, k): [] for m in modes for k in KINDS}
    for n in sizes:
        cells: list[str] = []
        for m in modes:
            pops = min(args.pops if m == "warm" else args.cold_pops, n)
            got: dict[str, list[float]] = {k: [] for k in KINDS}
            orders: dict[str, list[int]] = {}
            for _ in range(args.repeats):
                for k in KINDS:
                    ns, orders[k] = run(k, n, pops, args.touched, args.seed, flush if m == "cold" else None)
                    got[k].append(ns)
            if any(orders[k] != orders[KINDS[0]] for k in KINDS):
                raise SystemExit(f"N={n}: the queues popped different nodes")
            med = {k: sorted(v)[len(v) // 2] for k, v in got.items()}
            for k in KINDS:
                cost[(m, k)].append(med[k])
            cells += [*(f"{med[k]:,.0f}" for k in KINDS), f"{med[KINDS[0]] / med[new]:.2f}x"]
        table.add_row(f"{n:,}", *cells)
    last: list[str] = []
    for m in modes:
        last += [*(f"{cost[(m, k)][-1] / cost[(m, k)][0]:.2f}x" for k in KINDS), ""]
    table.add_row(f"{sizes[-1]:,}/{sizes[0]:,}", *last)
    Console(width=200).print(table)


if __name__ == "__main__":
    main()

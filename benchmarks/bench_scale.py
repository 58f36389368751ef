"""Per-op cost and bytes per node as the tree grows from 1k to 100k+ nodes, on the bundled Mooncake trace.

Run: `.venv/bin/python benchmarks/bench_scale.py [--max-nodes N] [--samples S] [--png PATH] [--json PATH]`
(`make bench-scale`).

Workload: the whole bundled Mooncake conversation trace (12,031 requests),
replayed in windows until the tree holds `--max-nodes` nodes: window `w` is
the whole trace with every token id offset by `w << 32`, a new tenant whose
prompts share prefixes among themselves exactly as the trace's do, so the
tree keeps the trace's shape and grows by one trace's worth of nodes per
window. The offsets take ids past 2**31, so the cache keys 8-byte token ids
(`CacheConfig.token_bytes=8`; the default 4 holds ids below 2**31 and halves
the key bytes of the bytes-per-node figures). Each request is handled as an
engine would (match, lock, allocate, insert, unlock), on one Full-only
write_back cache (page size
`--tokens-per-block`, one page per trace block, immediate engine without byte
copies, leases and runtime checks on, ledger history off) sized so that only
the measured evictions evict.

At each checkpoint (1k, 2k, 5k, ... nodes) every op is timed on `--samples`
calls (gc off, `time.process_time_ns`, the median per call):

- match:        `match_prefix` of requests already cached (random sample);
- lock, unlock: a lock receipt on the matched device node, and its release;
- alloc, free:  `alloc_device` / `free_device` of one request's pages;
- insert:       `insert` of the next requests of the stream (match, lock and
                allocation untimed);
- backup:       `backup` of a cached leaf + `poll` (its ack);
- evict:        `evict_device` of one page: one LRU victim, demoted (every device leaf is
                backed up first, untimed, so that this is the eviction alone); a victim
                frees all its pages, so it is also given per page freed;
- load-back:    `load_back` of an evicted node + `poll` + `result`.

Path-walking ops (match, lock, unlock, insert, load-back) are also reported
per node on the path, and evict per page freed (the victims of a larger
tree are not the same size). The flatness ratio is the cost at the largest
checkpoint over the cost at the smallest (per path node, or per page freed,
where given): 1.0x is flat. Bytes per node: in a second, untimed replay, tracemalloc's current
traced memory (tracing starts after the cache and the requests are built, so
the fixed pool tables and the driver's token arrays are out) over the node
count, at the same checkpoints.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
import tracemalloc
from array import array
from itertools import islice
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

from unicache import CacheConfig, Full, ImmediateEngine, UniCache
from unicache.traces.mooncake import load_mooncake
from unicache.tree import Node

CHECKPOINTS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000)
OPS = ("match", "lock", "unlock", "alloc", "free", "insert", "backup", "evict", "load-back")
PATH_OPS = ("match", "lock", "unlock", "insert", "load-back")
PAGE_OPS = ("evict",)
"""Ops whose work is the victim's pages: also given per page freed, and judged per page."""
SPLIT_OPS = PATH_OPS + PAGE_OPS
FLAT = 1.5
"""A flatness ratio above this is reported as growing."""


def path_len(node: Node) -> int:
    """Nodes from `node` up to (not counting) the root."""
    k = 0
    x: Node | None = node
    while x is not None and x.parent is not None:
        k += 1
        x = x.parent
    return k


def windows(trace: list[array[int]], page: int) -> Iterator[array[int]]:
    """The trace's requests (page-aligned) window after window, window `w` offset by `w << 32`."""
    w = 0
    while True:
        off = w << 32
        for toks in trace:
            n = len(toks) // page * page
            if n:
                yield toks[:n] if off == 0 else array("q", [t + off for t in toks[:n]])
        w += 1


class Driver:
    """One engine-like client of the cache: serves requests, keeps the cached ones for sampling."""

    def __init__(self, cache: UniCache, stream: Iterator[array[int]], page: int) -> None:
        self.cache = cache
        self.stream = stream
        self.page = page
        self.cached: list[array[int]] = []
        self.served = 0

    def serve(self, toks: array[int], times: list[tuple[int, int]] | None = None) -> Node:
        """Match, lock, allocate, insert, unlock one request; (ns, path length) of the insert go to `times`."""
        cache = self.cache
        m = cache.match_prefix(toks)
        receipt = cache.lock(m.device_node)
        start = m.device_len
        pages = cache.alloc_device(Full, (len(toks) - start) // self.page)
        assert pages is not None, "the cache is sized so that requests never wait"
        t0 = time.process_time_ns()
        node = cache.insert(toks, pages, start=start).node
        if times is not None:
            times.append((time.process_time_ns() - t0, max(path_len(node), 1)))
        cache.unlock(receipt)
        self.cached.append(toks)
        self.served += 1
        return node

    def grow_to(self, nodes: int) -> None:
        while self.cache.node_count < nodes:
            self.serve(next(self.stream))


def measure(drv: Driver, samples: int, rng: random.Random) -> dict[str, tuple[float, float]]:
    """Median ns per call and median ns per path node, per op, at the tree's current size."""
    cache = drv.cache
    per: dict[str, list[tuple[int, int]]] = {op: [] for op in OPS}
    clock = time.process_time_ns
    gc.collect()
    gc.disable()
    try:
        for toks in rng.sample(drv.cached, min(samples, len(drv.cached))):
            t0 = clock()
            node = cache.match_prefix(toks).device_node
            dt = clock() - t0
            k = max(path_len(node), 1)
            per["match"].append((dt, k))
            t0 = clock()
            receipt = cache.lock(node)
            per["lock"].append((clock() - t0, k))
            t0 = clock()
            cache.unlock(receipt)
            per["unlock"].append((clock() - t0, k))
            t0 = clock()
            pages = cache.alloc_device(Full, len(toks) // drv.page)
            per["alloc"].append((clock() - t0, 1))
            assert pages is not None
            t0 = clock()
            cache.free_device(Full, pages)
            per["free"].append((clock() - t0, 1))
        leaves: list[Node] = []
        for _ in range(samples):
            leaves.append(drv.serve(next(drv.stream), per["insert"]))
        for leaf in leaves:
            t0 = clock()
            cache.backup(leaf)
            cache.poll()
            per["backup"].append((clock() - t0, 1))
        gc.enable()
        full = cache.components.full
        for y in list(cache.nodes()):
            if y.parent is not None and full.is_device_leaf(y) and not full.on_host(y):
                cache.backup(y)
        cache.poll()
        gc.collect()
        gc.disable()
        before = cache.counters.device_evictions
        for _ in range(samples):
            t0 = clock()
            freed = cache.evict_device(Full, 1)
            per["evict"].append((clock() - t0, max(freed, 1)))
            assert freed >= 1
        assert cache.counters.device_evictions > before
        gc.enable()
        evicted = [x for x in cache.nodes() if not full.on_device(x) and full.on_host(x)]
        gc.collect()
        gc.disable()
        for leaf in rng.sample(evicted, min(samples, len(evicted))):
            if leaf.alive and not full.on_device(leaf):
                chain = 0
                x: Node | None = leaf
                while x is not None and x.parent is not None and not full.on_device(x):
                    chain += 1
                    x = x.parent
                t0 = clock()
                ticket = cache.load_back(leaf)
                cache.poll()
                if ticket is not None:
                    ticket.result()
                per["load-back"].append((clock() - t0, chain))
    finally:
        gc.enable()
    out: dict[str, tuple[float, float]] = {}
    for op, vals in per.items():
        if vals:
            out[op] = (statistics.median(v for v, _ in vals), statistics.median(v / k for v, k in vals))
    return out


def new_cache(capacity_tokens: int, page: int) -> UniCache:
    cfg = CacheConfig(
        device_tokens=capacity_tokens, page_size=page, host_ratio=1.0, write_policy="write_back",
        device="cpu", kv_width=1, dtype="int8", history=0, token_bytes=8,
    )
    return UniCache(cfg, ImmediateEngine(copy=False))


def checkpoints(max_nodes: int) -> list[int]:
    return [c for c in CHECKPOINTS if c < max_nodes] + [max_nodes]


def timing_run(trace: list[array[int]], args: argparse.Namespace) -> tuple[list[tuple[int, dict[str, tuple[float, float]]]], int]:
    """The per-op rows at each checkpoint, and how many requests were served."""
    page = args.tokens_per_block
    cache = new_cache(args.capacity_tokens, page)
    drv = Driver(cache, windows(trace, page), page)
    rng = random.Random(args.seed)
    rows = []
    for target in checkpoints(args.max_nodes):
        drv.grow_to(target)
        size = cache.node_count
        rows.append((size, measure(drv, args.samples, rng)))
        print(f"  {size:,} nodes measured", flush=True)
    cache.check()
    return rows, drv.served


def memory_run(trace: list[array[int]], args: argparse.Namespace, served: int) -> list[tuple[int, float]]:
    """Bytes per node at each checkpoint; the `served` requests are built before tracing starts."""
    page = args.tokens_per_block
    cache = new_cache(args.capacity_tokens, page)
    reqs = list(islice(windows(trace, page), served))
    stream = iter(reqs)
    drv = Driver(cache, stream, page)
    rows = []
    gc.collect()
    tracemalloc.start()
    try:
        for target in checkpoints(args.max_nodes):
            while cache.node_count < target:
                drv.serve(next(stream))
            drv.cached.clear()
            gc.collect()
            rows.append((cache.node_count, tracemalloc.get_traced_memory()[0] / cache.node_count))
    finally:
        tracemalloc.stop()
    return rows


def flatness(rows: list[tuple[int, dict[str, tuple[float, float]]]], op: str) -> float:
    use = 1 if op in SPLIT_OPS else 0
    have = [r[op][use] for _, r in rows if op in r]
    return have[-1] / have[0]


def plot(rows: list[tuple[int, dict[str, tuple[float, float]]]], mem: list[tuple[int, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    sizes = [s for s, _ in rows]
    for op in OPS:
        use = 1 if op in SPLIT_OPS else 0
        ys = [r[op][use] / 1000 for _, r in rows if op in r]
        if len(ys) == len(sizes):
            unit = " (per path node)" if op in PATH_OPS else " (per page freed)" if use else ""
            ax1.plot(sizes, ys, marker="o", label=op + unit)
    ax1.set(xscale="log", yscale="log", xlabel="nodes in the tree", ylabel="µs per op (median)",
            title="per-op cost as the tree grows")
    ax1.legend(fontsize=7)
    ax2.plot([s for s, _ in mem], [b for _, b in mem], marker="o")
    ax2.set(xscale="log", xlabel="nodes in the tree", ylabel="bytes per node (tracemalloc)",
            title="Python memory per node")
    ax2.set_ylim(bottom=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-nodes", type=int, default=100_000)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--tokens-per-block", type=int, default=4, help="tokens per trace block, also the page size")
    ap.add_argument("--capacity-tokens", type=int, default=0,
                    help="device (and host) capacity in tokens; default: enough for the whole run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png", type=Path, default=Path("out/bench_scale.png"))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc replay")
    args = ap.parse_args()
    t0 = time.time()
    trace = [r.tokens for r in load_mooncake(tokens_per_block=args.tokens_per_block).requests]
    print(f"trace: {len(trace):,} requests, {sum(len(t) for t in trace):,} tokens "
          f"({time.time() - t0:.0f} s to load)", flush=True)
    if not args.capacity_tokens:
        per_window = sum(len(t) for t in trace)
        args.capacity_tokens = (per_window * (args.max_nodes // 8_000 + 2)) // args.tokens_per_block * args.tokens_per_block
    rows, served = timing_run(trace, args)
    mem = [] if args.no_memory else memory_run(trace, args, served)
    table = Table(title="unicache per-op cost (median ns per call; per path node, or per page freed for evict, "
                        "in brackets) as the tree grows")
    table.add_column("nodes", justify="right")
    for op in OPS:
        table.add_column(op, justify="right")
    if mem:
        table.add_column("B/node", justify="right")
    for i, (size, r) in enumerate(rows):
        cells = []
        for op in OPS:
            if op not in r:
                cells.append("-")
            elif op in SPLIT_OPS:
                cells.append(f"{r[op][0]:,.0f} [{r[op][1]:,.0f}]")
            else:
                cells.append(f"{r[op][0]:,.0f}")
        if mem:
            cells.append(f"{mem[i][1]:,.0f}")
        table.add_row(f"{size:,}", *cells)
    flat = {op: flatness(rows, op) for op in OPS if all(op in r for _, r in rows)}
    cells = [f"{flat[op]:.2f}x" + ("" if flat[op] <= FLAT else " GROWS") if op in flat else "-" for op in OPS]
    if mem:
        cells.append(f"{mem[-1][1] / mem[0][1]:.2f}x")
    table.add_row(f"{rows[-1][0]:,}/{rows[0][0]:,}", *cells)
    Console(width=200).print(table)
    print(f"flatness: cost at {rows[-1][0]:,} nodes / cost at {rows[0][0]:,} nodes (per path node for "
          f"{', '.join(PATH_OPS)}; per page freed for {', '.join(PAGE_OPS)}); above {FLAT}x is marked GROWS")
    plot(rows, mem, args.png)
    print(f"plot: {args.png}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "memory": mem, "flatness": flat}, indent=2))


if __name__ == "__main__":
    main()

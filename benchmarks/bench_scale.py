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
                frees all its pages, so it is also given per page freed. Two columns,
                `--samples` calls each, interleaved in a seeded random order on the same tree:
                `evict` as is (cold: the real cost; the victim is by definition the node
                untouched longest), and `evict (warm)`, where just before the timed call
                (untimed) a read-only replay of the pass on views of its queues (the
                build's queue's own sift algorithm over an overlay: `scale_replay.py`)
                reads every entry its pops and pushes will read and finds the victim,
                then the victim's parent and grandparent, their page rows and allocator
                bytes are read, so that the same algorithm runs on cache-resident data
                (the replay's victim is checked against the one evicted). Their
                difference is memory latency;
- load-back:    `load_back` of an evicted node + `poll` + `result`.

Path-walking ops (match, lock, unlock, insert, load-back) are also reported
per node on the path, and evict per page freed. The flatness ratio is the
cost at the largest checkpoint over the cost at the smallest (per path node
for the path ops, per call for the rest): 1.0x is flat. Eviction is judged
per call: each call evicts one victim (the work table shows it), and the
victims' page counts vary widely (1 to 100+), so a median per page moves
with the mix of victims drawn far more than with the tree's size.

Bytes per node: in a second, untimed replay, tracemalloc's current traced
memory (tracing starts after the cache and the requests are built, so the
fixed pool tables and the driver's token arrays are out) over the node
count, at the same checkpoints.

A second table gives the eviction's work per call at each checkpoint, to show
it is the same at every size: heap entries and the stale share (entries whose
node was touched or gained a child since), entries popped per call, victims
per call, pages per victim, parents re-queued per call, and cold over warm.

Builds: `--builds pure,compiled` (default: both when `make setup` built the
mypyc copy in build/compiled). `pure` runs in this process; `compiled` runs
this script again in a fresh interpreter on that copy (PYTHONPATH and
UNICACHE_BUILD as `make test-compiled` sets them), which checks it loaded the
compiled core and prints its own tables and PNG (`<png stem>_compiled.png`).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from array import array
from dataclasses import asdict, dataclass
from itertools import islice
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

from unicache import CacheConfig, Full, ImmediateEngine, UniCache
from benchmarks.scale_replay import next_victim, touch_eviction
from unicache.traces.mooncake import load_mooncake
from unicache.tree import Node

REPO = Path(__file__).resolve().parent.parent
COMPILED = REPO / "build" / "compiled"
CHECKPOINTS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000)
OPS = ("match", "lock", "unlock", "alloc", "free", "insert", "backup", "evict", "evict (warm)", "load-back")
PATH_OPS = ("match", "lock", "unlock", "insert", "load-back")
PAGE_OPS = ("evict", "evict (warm)")
"""Ops whose work is the victim's pages: also given per page freed, but judged per call (see `report`)."""
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


@dataclass(slots=True)
class EvictWork:
    """What the timed evictions of one checkpoint did, per call (see the module docstring)."""

    heap_entries: int = 0
    stale: float = 0.0
    popped_per_call: float = 0.0
    victims_per_call: float = 0.0
    pages_per_victim: float = 0.0
    requeued_per_call: float = 0.0


def heap_census(cache: UniCache) -> tuple[int, float]:
    """The Full device queue's entries, and the share that is stale (touched since, or no longer a leaf)."""
    full = cache.components.full
    q = full.lru_device
    stale = sum(1 for t, _, _, x in q.entries() if t != x.last_access or not full.is_device_leaf(x))
    return len(q), stale / max(len(q), 1)


def measure(drv: Driver, samples: int, rng: random.Random, work: EvictWork) -> dict[str, tuple[float, float]]:
    """Median ns per call and median ns per path node, per op, at the tree's current size; the
    eviction's work per call goes to `work`."""
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
        work.heap_entries, work.stale = heap_census(cache)
        gc.collect()
        gc.disable()
        counters = cache.counters
        before = counters.demotions
        popped = freed_pages = requeued = 0
        warm = [False] * samples + [True] * samples
        random.Random(cache.node_count).shuffle(warm)
        for w in warm:
            if w:
                victim, entries = next_victim(cache)
                touch_eviction(cache, victim)
                t0 = clock()
                freed = cache.evict_device(Full, 1)
                per["evict (warm)"].append((clock() - t0, max(freed, 1)))
                assert not full.on_device(victim), f"the replay predicted victim {victim.id}, not the one evicted"
                parent = victim.parent
                assert parent is not None
                popped += entries
                requeued += parent.parent is not None and full.is_device_leaf(parent)
            else:
                t0 = clock()
                freed = cache.evict_device(Full, 1)
                per["evict"].append((clock() - t0, max(freed, 1)))
            assert freed >= 1
            freed_pages += freed
        victims = counters.demotions - before
        work.victims_per_call = victims / (2 * samples)
        work.pages_per_victim = freed_pages / victims
        work.popped_per_call = popped / samples
        work.requeued_per_call = requeued / samples
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


Rows = list[tuple[int, dict[str, tuple[float, float]]]]


def timing_run(trace: list[array[int]], args: argparse.Namespace) -> tuple[Rows, list[EvictWork], int]:
    """The per-op rows and the eviction's work at each checkpoint, and how many requests were served."""
    page = args.tokens_per_block
    cache = new_cache(args.capacity_tokens, page)
    drv = Driver(cache, windows(trace, page), page)
    rng = random.Random(args.seed)
    rows: Rows = []
    works: list[EvictWork] = []
    for target in checkpoints(args.max_nodes):
        drv.grow_to(target)
        size = cache.node_count
        work = EvictWork()
        rows.append((size, measure(drv, args.samples, rng, work)))
        works.append(work)
        print(f"  {size:,} nodes measured", flush=True)
    cache.check()
    return rows, works, drv.served


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


def flatness(rows: Rows, op: str) -> float:
    use = 1 if op in PATH_OPS else 0
    have = [r[op][use] for _, r in rows if op in r]
    return have[-1] / have[0]


def plot(rows: Rows, mem: list[tuple[int, float]], path: Path, build: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 4.5), width_ratios=(3, 2))
    sizes = [s for s, _ in rows]
    for op in OPS:
        use = 1 if op in PATH_OPS else 0
        ys = [r[op][use] / 1000 for _, r in rows if op in r]
        if len(ys) == len(sizes):
            unit = " (per path node)" if use else ""
            ax1.plot(sizes, ys, marker="o", label=op + unit, linestyle="--" if op == "evict (warm)" else "-")
    ax1.set(xscale="log", yscale="log", xlabel="nodes in the tree", ylabel="µs per op (median)",
            title=f"per-op cost as the tree grows ({build} build)")
    ax1.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax2.plot([s for s, _ in mem], [b for _, b in mem], marker="o")
    ax2.set(xscale="log", xlabel="nodes in the tree", ylabel="bytes per node (tracemalloc)",
            title="Python memory per node")
    ax2.set_ylim(bottom=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def loaded_build() -> str:
    """`compiled` when the core's ops are C extensions in this process, else `pure`."""
    import unicache.ops.eviction as probe

    return "compiled" if str(probe.__file__).endswith((".so", ".pyd")) else "pure"


def default_builds() -> str:
    marker = COMPILED / "BUILD"
    return "pure,compiled" if marker.exists() and marker.read_text().strip() == "compiled" else "pure"


def run_compiled(argv: list[str], png: Path) -> None:
    """This script again, in a fresh interpreter on the mypyc copy in build/compiled."""
    if default_builds() != "pure,compiled":
        raise SystemExit("no compiled build in build/compiled (make setup builds it when a C compiler works)")
    env = dict(os.environ, PYTHONPATH=str(COMPILED), UNICACHE_BUILD="compiled")
    out = png.with_name(f"{png.stem}_compiled{png.suffix}")
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--builds", "compiled", "--in-build", "compiled",
           "--png", str(out.resolve())]
    subprocess.run(cmd, check=True, env=env)


def report(rows: Rows, works: list[EvictWork], mem: list[tuple[int, float]], build: str) -> dict[str, float]:
    """Print the per-op table and the eviction-work table; the flatness ratios."""
    table = Table(title=f"unicache per-op cost, {build} build (median ns per call; per path node, or per page "
                        "freed for evict, in brackets) as the tree grows")
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
    Console(width=220).print(table)
    print(f"flatness: cost at {rows[-1][0]:,} nodes / cost at {rows[0][0]:,} nodes (per path node for "
          f"{', '.join(PATH_OPS)}; per call for the rest); above {FLAT}x is marked GROWS.\n"
          f"evict is judged per call: one call evicts one victim, whose pages vary widely (the mean is in the "
          f"work table), so a median per page moves with the mix of victims drawn; evict (warm) is the same "
          f"calls' algorithm with its data cache-resident (see the module docstring)")
    work = Table(title=f"eviction work per call, {build} build (one-page evict_device; popped entries and "
                       "parents re-queued from the warm calls' replays)")
    for col in ("nodes", "heap entries", "stale", "popped/call", "victims/call", "pages/victim",
                "parents re-queued/call", "cold/warm per call"):
        work.add_column(col, justify="right")
    for (size, r), w in zip(rows, works):
        work.add_row(f"{size:,}", f"{w.heap_entries:,}", f"{w.stale:.0%}", f"{w.popped_per_call:.2f}",
                     f"{w.victims_per_call:.2f}", f"{w.pages_per_victim:.1f}", f"{w.requeued_per_call:.2f}",
                     f"{r['evict'][0] / r['evict (warm)'][0]:.2f}x")
    Console(width=220).print(work)
    return flat


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
    ap.add_argument("--builds", default=None,
                    help="builds to run: pure,compiled (default: both when build/compiled is compiled)")
    ap.add_argument("--in-build", default="pure", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    args = ap.parse_args(argv)
    builds = (args.builds or default_builds()).split(",")
    for b in builds:
        if b not in ("pure", "compiled"):
            raise SystemExit(f"unknown build {b!r}: pure or compiled")
    if args.in_build != loaded_build():
        raise SystemExit(f"asked for the {args.in_build} build, loaded the {loaded_build()} one "
                         "(is build/compiled stale? make setup rebuilds it)")
    if args.in_build == "pure" and "pure" not in builds:
        if "compiled" in builds:
            run_compiled(strip_builds(argv), args.png)
        return
    t0 = time.time()
    trace = [r.tokens for r in load_mooncake(tokens_per_block=args.tokens_per_block).requests]
    print(f"{args.in_build} build. trace: {len(trace):,} requests, {sum(len(t) for t in trace):,} tokens "
          f"({time.time() - t0:.0f} s to load)", flush=True)
    if not args.capacity_tokens:
        per_window = sum(len(t) for t in trace)
        args.capacity_tokens = (per_window * (args.max_nodes // 8_000 + 2)) // args.tokens_per_block * args.tokens_per_block
    rows, works, served = timing_run(trace, args)
    mem = [] if args.no_memory else memory_run(trace, args, served)
    flat = report(rows, works, mem, args.in_build)
    plot(rows, mem, args.png, args.in_build)
    print(f"plot: {args.png}")
    if args.json:
        path = args.json if args.in_build == "pure" else args.json.with_name(f"{args.json.stem}_compiled.json")
        path.write_text(json.dumps({"build": args.in_build, "rows": rows, "memory": mem, "flatness": flat,
                                    "evict_work": [asdict(w) for w in works]}, indent=2))
    if args.in_build == "pure" and "compiled" in builds:
        run_compiled(strip_builds(argv), args.png)


def strip_builds(argv: list[str]) -> list[str]:
    """`argv` without `--builds`/`--png` (and their values), for the compiled run."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--builds", "--png"):
            skip = True
        elif not a.startswith(("--builds=", "--png=")):
            out.append(a)
    return out


if __name__ == "__main__":
    main()

"""Mean cost of the cache's hot operations at tree depths 8 and 64, each beside a same-run baseline.

Run: `.venv/bin/python benchmarks/bench_cache.py [--iters N] [--repeats R] [--json PATH]`.
`--builds pure,compiled [--rounds R]` runs it once per build and round, each
in its own process (the checkout, then the mypyc copy in build/compiled that
`make setup` builds; builds alternate round by round), and prints the median
of each figure per build and the pure/compiled speed-up.

Every operation runs on a path of `depth` nodes (16 tokens each, page size 1,
Full-only, immediate engine without byte copies, so bookkeeping is what is
timed). Baselines do the same tree work with plain ints instead of leases and
pin sets (the bookkeeping style of the peers), in the same process:

- match:       `UniCache.match_prefix`       vs the bare radix walk + touch loop
- insert:      alloc + `insert` of one leaf   vs bare walk + add_leaf + allocator
- lock+unlock: receipt with per-component leases vs int lock_ref walk up the path
- evict:       `evict_device` of one leaf     vs heap pop + demote with int pin checks
- load-back+ack: `load_back` + `poll` + `result` of the evicted leaf (its demotion
               untimed) vs int-pinned chain walk, allocation, publish and unpin
- alloc+free:  `alloc_device` + `free_device` of depth*16 request pages (ownership
               marked in the allocator) vs allocator + a set of request-owned
               slots (how the cache tracked them before)
- bytes/node:  tracemalloc per node, cache tree vs a bare radix tree; and the
               extra bytes of a pinned node (a PinSet holding one lease)

`--token-bytes 4|8` sets the key width of both sides (`CacheConfig.token_bytes`,
default 4); requests are `array("q")` token sequences, as traces and the SGLang
harness give them, so width 4 includes narrowing them.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict, cast

from leases import PinSet

from rich.console import Console
from rich.table import Table

from unicache import CacheConfig, Full, ImmediateEngine, UniCache
from unicache.pools.allocator import SlotAllocator
from unicache.tree import Node, RadixTree, encode_tokens

EDGE = 16
TW = [4]
"""The key width of both sides (`--token-bytes`)."""


def _tokens(depth: int, tail: int = 0) -> list[int]:
    return list(range(1, depth * EDGE + 1)) + [100_000 + tail] * (EDGE if tail else 0)


def _cache(depth: int, iters: int, policy: str = "write_back") -> UniCache:
    cfg = CacheConfig(
        device_tokens=(depth + iters + 8) * EDGE,
        host_ratio=2.0,
        write_policy=policy,  # type: ignore[arg-type]
        device="cpu",
        kv_width=1,
        history=0,
        token_bytes=TW[0],  # type: ignore[arg-type]
    )
    cache = UniCache(cfg, ImmediateEngine(copy=False))
    toks = _tokens(depth)
    for i in range(1, depth + 1):
        n = i * EDGE
        pages = cache.alloc_device(Full, EDGE)
        assert pages is not None
        cache.insert(toks[:n], pages, start=n - EDGE)
    return cache


class _BareColumns:
    """The baseline's per-node residency: device and host pages by node slot (no pin sets)."""

    __slots__ = ("dev", "host")

    def __init__(self) -> None:
        self.dev: list[list[int] | None] = [None]
        self.host: list[array[int] | None] = [None]

    def columns(self) -> int:
        return len(self.dev)

    def grow(self) -> None:
        self.dev.append(None)
        self.host.append(None)

    def clear(self, slot: int) -> None:
        self.dev[slot] = None
        self.host[slot] = None

    def truncate(self) -> None:
        del self.dev[1:]
        del self.host[1:]

    def init_root(self, root: Node) -> None:
        self.dev[root.slot] = []

    def split(self, upper: Node, lower: Node, pages: int) -> None:
        d = self.dev[lower.slot]
        if d is not None:
            self.dev[upper.slot], self.dev[lower.slot] = d[:pages], d[pages:]

    @property
    def pin_sets(self) -> dict[int, PinSet[Any, Node]]:
        return {}


def _bare_tree() -> tuple[RadixTree, _BareColumns]:
    tree = RadixTree(1, token_bytes=TW[0])
    cols = _BareColumns()
    tree.register(Full, cols)
    return tree, cols


def _bare(depth: int) -> tuple[RadixTree, SlotAllocator, list[int], _BareColumns]:
    tree, cols = _bare_tree()
    alloc = SlotAllocator("bare", (depth + 100_000) * EDGE)
    toks = _tokens(depth)
    node = tree.root
    for i in range(depth):
        node = tree.add_leaf(node, encode_tokens(toks[i * EDGE : (i + 1) * EDGE], TW[0]))
        cols.dev[node.slot] = alloc.alloc(EDGE)
    return tree, alloc, toks, cols


def _pin_counts(tree: RadixTree) -> list[int]:
    """Integer pin counts by node id, as the baseline's engines keep them (one int per node)."""
    return [0] * (max(x.id for x in tree) + 1)


def _time(fn: Callable[[int], None], iters: int, repeats: int) -> float:
    """Median over `repeats` of the mean ns per call of fn(i) for i in range(iters)."""
    means = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        t0 = time.process_time_ns()
        for i in range(iters):
            fn(i)
        means.append((time.process_time_ns() - t0) / iters)
        gc.enable()
    return statistics.median(means)


def _time_split(
    setup: Callable[[], None], fn: Callable[[], None], iters: int, repeats: int
) -> float:
    """Like `_time`, but only `fn` is timed; `setup` runs untimed before each call."""
    means = []
    clock = time.process_time_ns
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        total = 0
        for _ in range(iters):
            setup()
            t0 = clock()
            fn()
            total += clock() - t0
        means.append(total / iters)
        gc.enable()
    return statistics.median(means)


def bench_match(depth: int, iters: int, repeats: int) -> tuple[float, float]:
    cache = _cache(depth, 0)
    toks = array("q", _tokens(depth))
    tree, _, _, _ = _bare(depth)
    n = len(toks)
    clock = [0]
    tw = TW[0]

    def ours(_: int) -> None:
        cache.match_prefix(toks)

    def base(_: int) -> None:
        path = tree.walk(encode_tokens(toks, tw), n)[2]
        clock[0] += 1
        c = clock[0]
        for x in path:
            x.last_access = c
            x.hits += 1

    return _time(ours, iters, repeats), _time(base, iters, repeats)


def bench_lock(depth: int, iters: int, repeats: int) -> tuple[float, float]:
    cache = _cache(depth, 0)
    node = cache.match_prefix(_tokens(depth)).device_node
    tree, _, toks, _ = _bare(depth)
    pins = _pin_counts(tree)  # the baseline's integer pin per node
    leaf = tree.walk(encode_tokens(toks, TW[0]), len(toks))[0]

    def ours(_: int) -> None:
        cache.unlock(cache.lock(node))

    def base(_: int) -> None:
        x: Node | None = leaf
        locked = []
        while x is not None and x.parent is not None:
            pins[x.id] += 1
            locked.append(x)
            x = x.parent
        for y in locked:
            assert pins[y.id] > 0
            pins[y.id] -= 1

    return _time(ours, iters, repeats), _time(base, iters, repeats)


def bench_insert(depth: int, iters: int, repeats: int) -> tuple[float, float]:
    total = iters * repeats
    cache = _cache(depth, total)
    tree, alloc, _, cols = _bare(depth)
    dev = cols.dev
    seqs = [array("q", _tokens(depth, i + 1)) for i in range(total)]
    start = depth * EDGE
    n = len(seqs[0])
    k = [0, 0]
    tw = TW[0]

    def ours(_: int) -> None:
        s = seqs[k[0]]
        k[0] += 1
        pages = cache.alloc_device(Full, EDGE)
        assert pages is not None
        cache.insert(s, pages, start=start)

    def base(_: int) -> None:
        t = encode_tokens(seqs[k[1]], tw)
        k[1] += 1
        node, pos, _path = tree.walk(t, n)
        leaf = tree.add_leaf(node, t[pos * tw :])
        dev[leaf.slot] = alloc.alloc(EDGE)

    return _time(ours, iters, repeats), _time(base, iters, repeats)


def bench_evict(depth: int, iters: int, repeats: int) -> tuple[float, float]:
    total = iters * repeats
    cache = _cache(depth, total)
    start = depth * EDGE
    for i in range(total):
        pages = cache.alloc_device(Full, EDGE)
        assert pages is not None
        res = cache.insert(_tokens(depth, i + 1), pages, start=start)
        cache.backup(res.node)
    cache.poll()
    tree, alloc, toks, cols = _bare(depth)
    dev, host = cols.dev, cols.host
    bottom = tree.walk(encode_tokens(toks, TW[0]), len(toks))[0]
    heap: list[tuple[int, int, Node]] = []
    for i in range(total):
        leaf = tree.add_leaf(bottom, encode_tokens([100_000 + i + 1] * EDGE, TW[0]))
        dev[leaf.slot] = alloc.alloc(EDGE)
        host[leaf.slot] = array("i")
        leaf.last_access = i
        heap.append((i, leaf.id, leaf))
    heapq.heapify(heap)
    pins = _pin_counts(tree)  # the baseline's integer pin per node

    def ours(_: int) -> None:
        cache.evict_device(Full, EDGE)

    def base(_: int) -> None:
        while heap:
            x = heapq.heappop(heap)[2]
            slot = x.slot
            pages = dev[slot]
            if pins[x.id] or pages is None or host[slot] is None:
                continue
            alloc.free(pages)
            dev[slot] = None
            return

    return _time(ours, iters, repeats), _time(base, iters, repeats)


def bench_load_back(depth: int, iters: int, repeats: int) -> tuple[float, float]:
    cache = _cache(depth, 0)
    toks = _tokens(depth)
    leaf = cache.match_prefix(toks).device_node
    cache.backup(leaf)
    cache.poll()
    tree, alloc, btoks, cols = _bare(depth)
    dev, host = cols.dev, cols.host
    pins = _pin_counts(tree)  # the baseline's integer pin per node
    bleaf = tree.walk(encode_tokens(btoks, TW[0]), len(btoks))[0]
    host[bleaf.slot] = array("i", range(EDGE))

    def evict() -> None:
        assert cache.evict_device(Full, EDGE) == EDGE

    def ours() -> None:
        t = cache.load_back(leaf)
        assert t is not None
        cache.poll()
        t.result()

    def demote() -> None:
        pages = dev[bleaf.slot]
        assert pages is not None
        alloc.free(pages)
        dev[bleaf.slot] = None

    def base() -> None:
        chain: list[Node] = []
        x: Node | None = bleaf
        while x is not None and dev[x.slot] is None:
            chain.append(x)
            x = x.parent
        src: list[int] = []
        for y in chain:
            pins[y.id] += 1
            hp = host[y.slot]
            assert hp is not None
            src += hp
        dst = alloc.alloc(len(src))
        assert dst is not None
        for y in chain:
            dev[y.slot] = dst
            pins[y.id] -= 1

    return (
        _time_split(evict, ours, iters, repeats),
        _time_split(demote, base, iters, repeats),
    )


def bytes_per_node(nodes: int) -> dict[str, float]:
    cfg = CacheConfig(device_tokens=(nodes + 1) * EDGE, device="cpu", kv_width=1, history=0,
                      token_bytes=TW[0])  # type: ignore[arg-type]
    cache = UniCache(cfg, ImmediateEngine(copy=False))
    seqs = [[i + 1] * EDGE for i in range(nodes)]
    pages = [cache.alloc_device(Full, EDGE) for _ in range(nodes)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for s, p in zip(seqs, pages):
        assert p is not None
        cache.insert(s, p)
    ours = (tracemalloc.get_traced_memory()[0] - before) / nodes
    tree, cols = _bare_tree()
    plain = [list(range(EDGE)) for _ in range(nodes)]
    before = tracemalloc.get_traced_memory()[0]
    for s, p in zip(seqs, plain):
        leaf = tree.add_leaf(tree.root, encode_tokens(s, TW[0]))
        cols.dev[leaf.slot] = p
    bare = (tracemalloc.get_traced_memory()[0] - before) / nodes
    leaves = [cache.match_prefix(s).device_node for s in seqs]
    before = tracemalloc.get_traced_memory()[0]
    receipts = [cache.lock(x) for x in leaves]
    pinned = (tracemalloc.get_traced_memory()[0] - before) / nodes
    tracemalloc.stop()
    for r in receipts:
        cache.unlock(r)
    return {"node": ours, "bare_node": bare, "lock_with_new_pinset": pinned}


def bench_alloc(depth: int, iters: int, repeats: int) -> tuple[float, float]:
    n = depth * EDGE
    cache = _cache(depth, n // EDGE + 8)
    alloc = SlotAllocator("bare", 4 * n)
    lent: set[int] = set()

    def ours(_: int) -> None:
        pages = cache.alloc_device(Full, n)
        assert pages is not None
        cache.free_device(Full, pages)

    def base(_: int) -> None:
        pages = alloc.alloc(n)
        assert pages is not None
        lent.update(pages)
        if not lent.issuperset(pages):
            raise AssertionError("not request-owned")
        lent.difference_update(pages)
        alloc.free(pages)

    return _time(ours, iters, repeats), _time(base, iters, repeats)


ROOT = Path(__file__).resolve().parents[1]
COMPILED = ROOT / "build" / "compiled"


class _Row(TypedDict):
    op: str
    depth: int
    ns: float
    baseline_ns: float


class _Run(TypedDict):
    results: list[_Row]
    memory: dict[str, float]
    allocator_file: str


def run_build(build: str, argv: list[str]) -> _Run:
    """This benchmark's JSON results in a fresh process on one build ("pure" or "compiled")."""
    cwd, env = ROOT, dict(os.environ)
    if build == "compiled":
        marker = COMPILED / "BUILD"
        if not marker.exists() or marker.read_text().strip() != "compiled":
            raise SystemExit(f"no compiled build in {COMPILED}: run `make setup` with a C compiler")
        cwd, env["PYTHONPATH"] = COMPILED, str(COMPILED)
    elif build != "pure":
        raise SystemExit(f"unknown build {build!r}: pure or compiled")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "r.json")
        cmd = [sys.executable, str(cwd / "benchmarks" / "bench_cache.py"), *argv, "--json", str(out)]
        subprocess.run(cmd, cwd=cwd, env=env, check=True)
        data = cast(_Run, json.loads(out.read_text()))
    loaded = data["allocator_file"]
    if loaded.endswith((".so", ".pyd")) != (build == "compiled"):
        raise SystemExit(f"the {build} run loaded unicache.pools.allocator from {loaded}")
    return data


def _median_run(runs: list[_Run]) -> _Run:
    """Per figure, the median over alternating rounds of one build."""
    first = runs[0]
    results: list[_Row] = [
        {**row, "ns": statistics.median(r["results"][i]["ns"] for r in runs)} for i, row in enumerate(first["results"])
    ]
    memory = {k: statistics.median(r["memory"][k] for r in runs) for k in first["memory"]}
    return {"results": results, "memory": memory, "allocator_file": first["allocator_file"]}


def compare_builds(builds: list[str], argv: list[str], rounds: int) -> None:
    """Each build's figures side by side, with each build's ratio to the first (builds alternate, round by round)."""
    rounds_run = [[run_build(b, argv) for b in builds] for _ in range(max(1, rounds))]
    runs = [_median_run([r[i] for r in rounds_run]) for i in range(len(builds))]
    table = Table(title="unicache core per build: mean ns per op (ratio: first build / this build)")
    table.add_column("op")
    table.add_column("depth", justify="right")
    for b in builds:
        table.add_column(f"{b} ns", justify="right")
    for b in builds[1:]:
        table.add_column(f"{builds[0]}/{b}", justify="right")
    for cells in zip(*(r["results"] for r in runs)):
        ns = [c["ns"] for c in cells]
        table.add_row(str(cells[0]["op"]), str(cells[0]["depth"]), *[f"{x:,.0f}" for x in ns],
                      *[f"{ns[0] / x:.2f}x" for x in ns[1:]])
    mems = [r["memory"] for r in runs]
    for key in ("node", "lock_with_new_pinset"):
        vals = [m[key] for m in mems]
        table.add_row(f"bytes/{key}", "-", *[f"{v:,.0f}" for v in vals], *[f"{vals[0] / v:.2f}x" for v in vals[1:]])
    Console().print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=str, default=None)
    ap.add_argument("--builds", type=str, default=None,
                    help="comma-separated builds to compare, each in its own process: pure,compiled")
    ap.add_argument("--rounds", type=int, default=1, help="with --builds: alternating rounds (medians reported)")
    ap.add_argument("--token-bytes", type=int, choices=(4, 8), default=4,
                    help="key width of both sides (CacheConfig.token_bytes; default 4)")
    args = ap.parse_args()
    TW[0] = args.token_bytes
    if args.builds:
        compare_builds(args.builds.split(","), ["--iters", str(args.iters), "--repeats", str(args.repeats),
                                                "--token-bytes", str(args.token_bytes)], args.rounds)
        return
    benches: list[tuple[str, Callable[[int, int, int], tuple[float, float]]]] = [
        ("match", bench_match),
        ("insert", bench_insert),
        ("lock+unlock", bench_lock),
        ("evict", bench_evict),
        ("load-back+ack", bench_load_back),
        ("alloc+free", bench_alloc),
    ]
    table = Table(title=f"unicache core: mean ns per op (median of repeats), {TW[0]}-byte keys")
    for col in ("op", "depth", "unicache ns", "baseline ns", "ratio"):
        table.add_column(col, justify="right" if col != "op" else "left")
    results: list[dict[str, object]] = []
    for name, fn in benches:
        for depth in (8, 64):
            ours, base = fn(depth, args.iters, args.repeats)
            table.add_row(name, str(depth), f"{ours:,.0f}", f"{base:,.0f}", f"{ours / base:.2f}x")
            results.append({"op": name, "depth": depth, "ns": ours, "baseline_ns": base})
    mem = bytes_per_node(2000)
    table.add_row("bytes/node", "-", f"{mem['node']:,.0f}", f"{mem['bare_node']:,.0f}",
                  f"{mem['node'] / mem['bare_node']:.2f}x")
    table.add_row("bytes/lock (first pin)", "-", f"{mem['lock_with_new_pinset']:,.0f}", "-", "-")
    Console().print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "memory": mem,
                       "allocator_file": sys.modules[SlotAllocator.__module__].__file__}, f, indent=2)


if __name__ == "__main__":
    main()

"""Request-side allocation: `SlotAllocator` of this tree against a baseline commit's, in one process.

    .venv/bin/python benchmarks/bench_allocator.py [--baseline REV] [--pages 500,2000] [--rounds 5]
    PYTHONPATH=build/compiled .venv/bin/python benchmarks/bench_allocator.py   # adds the compiled class

Variants, alternated round by round so all see the same machine load:

- `baseline`: `unicache/pools/allocator.py` at `--baseline` (git show), loaded
  from source, so interpreted;
- `pure`: this tree's `unicache/pools/allocator.py`, loaded from source;
- `--also REV,...`: those revisions' allocators, loaded from source (e.g.
  `--also bae0e73`: the free list kept as coalesced runs, tried and not kept;
  docs/performance.md, "Request-side allocation by runs");
- `imported`: `unicache.pools.allocator` as Python imports it; when run on the
  mypyc copy (the second command) it is the compiled class, so the table is
  also the A/B of keeping the allocator compiled or interpreted.

The workload is a request loop like `make peer`'s on one device pool (capacity
`8 * pages`): each request takes `alloc_lent(pages)`, returns a random
already-cached prefix of them with `free_lent` (insert's duplicates) and
donates the rest with `adopt` (the pages the new node keeps), split into up to
three nodes; when the pool is short, held nodes are freed with `free`
(eviction), the oldest first with one in four picked at random (a touched
node outlives its age), which fragments the free list as a real run does. A Mamba-style
`alloc_lent(1)` + `adopt` per request and its later `free` are timed too.
Every variant replays the same random choices. Printed: µs per call (median of
the rounds) per op and the ratio baseline / variant (above 1.0x: faster than
the baseline).

`--peer full/1/write_back,...` then replays `make peer`'s workload
(`benchmarks/peer_sglang.py`'s `run_ours`, needs its harness) in this process
with the pools built on the baseline class and on this tree's, alternating,
and prints requests/s and the per-op means that touch the allocator (alloc,
insert, evict) with the same ratios. Pure build only: the compiled pools take
only the compiled class.

`--primitives` times, in this interpreter, what a numpy-vectorised allocator
would do per call (docs/performance.md, "numpy-vectorised marking: measured,
not built"): a fancy-index store of a request's pages into a `uint8` state
map from an `int32` copy of the free stack, a gather and compare, the
duplicate check (scatter positions, gather them back), and the conversion of
a list of slot ints into an index array that every `free`, `free_lent` and
`adopt` would need (callers hold lists), against the per-slot loops over a
`bytearray` and over a list.

`--peer-compiled DIR` replays the same workload on two compiled copies in
alternating worker processes (`peer_sglang.py --worker`, as `make peer` runs
the compiled build): DIR (a baseline revision's `build/compiled`, e.g. built
with `git archive REV | tar -x -C /tmp/base && cd /tmp/base && python
tools/compiled_build.py build/compiled`) against this tree's `build/compiled`.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Protocol

ROOT = Path(__file__).resolve().parent.parent
BASELINE_REV = "075ad5b"
"""main before issue 15's allocation-by-runs work."""
OPS = ("alloc_lent", "free_lent+adopt", "free", "alloc_lent(1)+adopt")


class Allocator(Protocol):
    @property
    def free_count(self) -> int: ...
    def alloc_lent(self, n: int) -> list[int] | None: ...
    def adopt(self, slots: list[int]) -> bool: ...
    def free_lent(self, slots: list[int]) -> bool: ...
    def free(self, slots: list[int]) -> None: ...


def load_source(name: str, source: str) -> ModuleType:
    """A module built from `source` (interpreted, whatever build is installed)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, f.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    Path(f.name).unlink()
    return module


def run(make: type, pages: int, requests: int, seed: int) -> dict[str, float]:
    """µs per call of each op over one replay of the request loop."""
    rng = random.Random(seed)
    full: Allocator = make("full", 8 * pages)
    mamba: Allocator = make("mamba", 64)
    held: list[list[int]] = []
    states: list[list[int]] = []
    ns = time.perf_counter_ns
    total = dict.fromkeys(OPS, 0)
    calls = dict.fromkeys(OPS, 0)
    gc.disable()
    try:
        for _ in range(requests):
            while full.free_count < pages:
                i = rng.randrange(len(held)) if rng.random() < 0.25 else 0
                t0 = ns()
                full.free(held.pop(i))
                total["free"] += ns() - t0
                calls["free"] += 1
            if mamba.free_count == 0:
                mamba.free(states.pop(rng.randrange(len(states))))
            t0 = ns()
            got = full.alloc_lent(pages)
            total["alloc_lent"] += ns() - t0
            calls["alloc_lent"] += 1
            assert got is not None
            dup = rng.randrange(pages) if rng.random() < 0.7 else 0
            t0 = ns()
            assert full.free_lent(got[:dup]) and full.adopt(got[dup:])
            total["free_lent+adopt"] += ns() - t0
            calls["free_lent+adopt"] += 1
            cut = sorted(rng.sample(range(dup + 1, pages), min(2, pages - dup - 1)))
            for a, b in zip([dup, *cut], [*cut, pages]):
                held.append(got[a:b])
            t0 = ns()
            state = mamba.alloc_lent(1)
            assert state is not None and mamba.adopt(state)
            total["alloc_lent(1)+adopt"] += ns() - t0
            calls["alloc_lent(1)+adopt"] += 1
            states.append(state)
    finally:
        gc.enable()
    return {op: total[op] / calls[op] / 1e3 if calls[op] else 0.0 for op in OPS}


def peer(specs: str, variants: dict[str, type], rounds: int, harness: Path) -> None:
    """`make peer`'s replay with each variant as the pools' allocator class (see the module docstring)."""
    from benchmarks import peer_sglang as p
    import unicache.pools.pool as pool_module

    original: object = getattr(pool_module, "SlotAllocator")
    ops = ("req/s", "alloc", "insert", "evict")
    for spec in specs.split(","):
        comp, ps, policy = spec.split("/")
        cfg = p.PeerConfig(comp, int(ps), policy)
        tokens, _, device = p.workload(p.load_harness(harness), 0, cfg.page_size)
        samples: dict[str, dict[str, list[float]]] = {v: {op: [] for op in ops} for v in variants}
        try:
            for _ in range(rounds):
                for name, cls in variants.items():
                    setattr(pool_module, "SlotAllocator", cls)
                    r = p.run_ours(cfg, tokens, device)
                    got = samples[name]
                    got["req/s"].append(len(tokens) / r.wall_s)
                    for op in ops[1:]:
                        got[op].append(r.mean_us(op))
        finally:
            setattr(pool_module, "SlotAllocator", original)
        print(f"\npeer replay {cfg.label}: median of {rounds} (req/s: variant / baseline; µs: baseline / variant)")
        print_medians(samples, list(variants), list(ops), width=10, higher_is_better=("req/s",), digits=1)


def peer_compiled(specs: str, base: Path, rounds: int, harness: Path) -> None:
    """`make peer`'s replay on the compiled copy at `base` and on this tree's, alternating processes."""
    roots = {"baseline": base.resolve(), "compiled": ROOT / "build" / "compiled"}
    ops = ("req/s", "alloc", "insert", "evict")
    for spec in specs.split(","):
        samples: dict[str, dict[str, list[float]]] = {v: {op: [] for op in ops} for v in roots}
        for _ in range(rounds):
            for name, root in roots.items():
                env = dict(os.environ, PYTHONPATH=str(root), UNICACHE_BUILD="compiled")
                cmd = [sys.executable, str(root / "benchmarks" / "peer_sglang.py"), "--harness", str(harness),
                       "--worker", f"{spec}/4"]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, check=True).stdout
                data = json.loads(out.strip().splitlines()[-1])
                if data["build"] != "compiled":
                    raise SystemExit(f"{root}: the worker loaded the {data['build']} build")
                got = samples[name]
                got["req/s"].append(data["op_ns"]["alloc"][1] / float(data["wall_s"]))  # one alloc a request
                for op in ops[1:]:
                    t, n = data["op_ns"].get(op, [0, 0])
                    got[op].append(t / n / 1e3 if n else 0.0)
        print(f"\npeer replay {spec}, compiled: median of {rounds} (req/s: variant / baseline; "
              f"µs: baseline / variant)")
        print_medians(samples, list(roots), list(ops), width=10, higher_is_better=("req/s",), digits=1)


def primitives(pages: list[int], rounds: int) -> None:
    """µs per call of the numpy building blocks against the per-slot loops (see the module docstring)."""
    import numpy as np
    from array import array

    def t(f: Callable[[], None], number: int) -> float:
        return min(timeit.repeat(f, number=number, repeat=rounds)) / number * 1e6

    for n in pages:
        cap = 8 * n
        stack = list(range(cap - 1, -1, -1))
        top = cap // 2
        out = stack[top - n : top]
        out.reverse()
        used_list, used_bytes = [0] * cap, bytearray(cap)
        state = np.zeros(cap, np.uint8)
        stack32 = np.array(stack, np.int32)
        idx = np.array(out, np.intp)
        stamp, pos = np.zeros(cap, np.int32), np.arange(n, dtype=np.int32)
        want = bytes([2]) * n  # what np_store leaves

        def loop_list() -> None:
            for x in out:
                used_list[x] = 2

        def loop_bytes() -> None:
            for x in out:
                used_bytes[x] = 2

        def take_list() -> None:
            got = stack[top - n : top]
            got.reverse()

        def np_store() -> None:
            state[stack32[top - n : top]] = 2

        def np_check() -> None:
            assert state[idx].tobytes() == want

        def np_dups() -> None:
            stamp[idx] = pos
            assert stamp[idx].tobytes() == pos.tobytes()

        def np_convert() -> None:
            np.fromiter(out, np.intp, n)

        def array_convert() -> None:
            array("i", out)

        number = max(200, 200_000 // n)
        rows = {
            "loop: list store": t(loop_list, number),
            "loop: bytearray store": t(loop_bytes, number),
            "free stack slice + reverse": t(take_list, number),
            "numpy: store from int32 stack": t(np_store, number),
            "numpy: gather + compare": t(np_check, number),
            "numpy: duplicate check": t(np_dups, number),
            "list -> np.fromiter(intp)": t(np_convert, number),
            "list -> array('i')": t(array_convert, number),
        }
        print(f"\n{n} pages: µs per call (ns per page), this interpreter")
        for name, us in rows.items():
            print(f"{name:>32} {us:8.2f} ({us * 1e3 / n:5.1f})")


def print_medians(samples: dict[str, dict[str, list[float]]], variants: list[str], ops: list[str], *,
                  width: int, header: str = "", higher_is_better: tuple[str, ...] = (), digits: int = 2) -> None:
    """One row per op: each variant's median and its ratio against the baseline's (above 1: better)."""
    print(f"{header:>{width}} " + " ".join(f"{v:>20}" for v in variants))
    for op in ops:
        base = statistics.median(samples["baseline"][op])
        cells = []
        for v in variants:
            m = statistics.median(samples[v][op])
            if not m:
                cells.append(f"{'-':>16}")
                continue
            ratio = m / base if op in higher_is_better else base / m
            cells.append(f"{m:8.{digits}f} ({ratio:5.2f}x)")
        print(f"{op:>{width}} " + " ".join(f"{c:>20}" for c in cells))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE_REV, help="git revision to compare with")
    ap.add_argument("--pages", default="500,2000", help="pages per request (ps1 requests: 500-2,500)")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--also", default="", help="more revisions' allocators to compare, loaded from git: REV,...")
    ap.add_argument("--peer", default="", help="also replay make peer's workload: full/1/write_back,...")
    ap.add_argument("--peer-rounds", type=int, default=3)
    ap.add_argument("--primitives", action="store_true", help="time the numpy building blocks instead")
    ap.add_argument("--peer-compiled", type=Path, metavar="DIR",
                    help="--peer on the compiled copy at DIR against this tree's build/compiled")
    ap.add_argument("--harness", type=Path, default=ROOT.parent / "shared" / "bench" / "sglang_harness.py")
    args = ap.parse_args(argv)
    def source(rev: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:unicache/pools/allocator.py"],
                              capture_output=True, text=True, check=True).stdout

    if args.primitives:
        primitives([int(p) for p in args.pages.split(",") if p], args.rounds)
        return
    import unicache.pools.allocator as imported

    build = "compiled" if str(imported.__file__).endswith((".so", ".pyd")) else "pure"
    variants: dict[str, type] = {
        "baseline": load_source("alloc_baseline", source(args.baseline)).SlotAllocator,
        "pure": load_source("alloc_pure", (ROOT / "unicache/pools/allocator.py").read_text()).SlotAllocator,
    }
    for rev in filter(None, args.also.split(",")):
        variants[rev] = load_source(f"alloc_{rev}", source(rev)).SlotAllocator
    if build == "compiled":
        variants["compiled"] = imported.SlotAllocator
    print(f"baseline {args.baseline}; imported allocator: {build}; rounds {args.rounds}, "
          f"{args.requests} requests each")
    for pages in (int(p) for p in args.pages.split(",") if p):
        samples: dict[str, dict[str, list[float]]] = {v: {op: [] for op in OPS} for v in variants}
        for r in range(args.rounds):
            for name, cls in variants.items():
                for op, us in run(cls, pages, args.requests, seed=r).items():
                    samples[name][op].append(us)
        print(f"\n{pages} pages per request: µs per call, median (baseline / variant)")
        print_medians(samples, list(variants), list(OPS), width=22, header="op")
    if args.peer and args.peer_compiled:
        peer_compiled(args.peer, args.peer_compiled, args.peer_rounds, args.harness)
    elif args.peer:
        if build == "compiled":
            print("\n--peer: pure build only (the compiled pools take only the compiled class)")
        else:
            peer(args.peer, variants, args.peer_rounds, args.harness)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

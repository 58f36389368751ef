"""Where the tree cores spend their time: process CPU time per `UnifiedTreeCoreInterface` method, side by side.

Run (in the SGLang venv, from the checkout):
`.venv-sglang/bin/python benchmarks/bench_sglang_methods.py [--cores rust,unicache] [--rounds R]
[--configs FULL,FULL+MAMBA,FULL+SWA] [--page-size P] [--policy write_back|write_through] [--top N]`.
For the compiled build of tree core "unicache", run it inside the compiled copy, as
`bench_sglang_cores.py`'s worker does:
`cd build/compiled-sglang && UNICACHE_BUILD=compiled PYTHONPATH=$PWD ../../.venv-sglang/bin/python
benchmarks/bench_sglang_methods.py` (the header says whether the core's modules are extensions).

The workload, pools and op sequence are `bench_sglang_cores.py`'s (the
harness workload, acks at once, `--transfer noop`). Every interface method of
each core's class is wrapped with a process-CPU-time counter; each round
replays every configuration once per core, order rotated per round; printed
per configuration: each core's replay time and time inside the tree core
(medians over the rounds), then the `--top` methods by the largest time of
any core, in ms per replay with calls per replay, and the ratio of each core
to the first of `--cores` (the baseline, by default "rust"). The counters
cost every core the same few tenths of a microsecond a call, included in
the figures. Digests must agree across cores, or the run aborts.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections import Counter
from collections.abc import Callable

import torch
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import UnifiedTreeCoreInterface

from benchmarks import bench_sglang_cores as cores
from unicache.integrations.sglang.workload import CacheSetup, ReplayResult, Request, gen_workload, pool_sizes

METHODS = tuple(sorted(n for n, v in vars(UnifiedTreeCoreInterface).items()
                       if not n.startswith("_") and callable(v)))
"""The interface's methods (what SGLang's cache calls on a tree core)."""


class MethodClock:
    """Process CPU time and calls per interface method, per tree-core class, from wrappers put on the class."""

    def __init__(self) -> None:
        self.ns: dict[type, Counter[str]] = {}
        self.calls: dict[type, Counter[str]] = {}

    def instrument(self, cls: type) -> None:
        """Wrap `cls`'s interface methods (once per class) with counters of their own."""
        if cls in self.ns:
            return
        ns: Counter[str] = Counter()
        calls: Counter[str] = Counter()
        self.ns[cls], self.calls[cls] = ns, calls
        for name in METHODS:
            fn = getattr(cls, name, None)
            if callable(fn):
                setattr(cls, name, _timed(fn, name, ns, calls))

    def take(self, cls: type) -> tuple[dict[str, int], dict[str, int]]:
        """The counts since the last take for `cls` (ns, calls), reset."""
        ns, calls = dict(self.ns[cls]), dict(self.calls[cls])
        self.ns[cls].clear()
        self.calls[cls].clear()
        return ns, calls


def _timed(fn: Callable[..., object], name: str, ns: Counter[str], calls: Counter[str]) -> Callable[..., object]:
    clock = time.process_time_ns

    @functools.wraps(fn)
    def timed(*args: object, **kwargs: object) -> object:
        t0 = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            ns[name] += clock() - t0
            calls[name] += 1

    return timed


class Sample:
    """One replay of one core: its replay time, digest and per-method counts."""

    def __init__(self, result: ReplayResult, ns: dict[str, int], calls: dict[str, int]) -> None:
        self.replay_s = result.wall_s
        self.digest = result.digest
        self.ns = ns
        self.calls = calls


def _replay_one(core: str, label: str, device: int, ctx: int, reqs: list[Request], clock: MethodClock) -> Sample:
    classes: list[type] = []

    def instrument(setup: CacheSetup) -> None:
        cls = type(setup.cache.tree_core)
        clock.instrument(cls)
        clock.take(cls)
        classes.append(cls)

    result = cores.run_config(core, label, device, ctx, reqs, on_setup=instrument)
    ns, calls = clock.take(classes[0])
    return Sample(result, ns, calls)


def _median(samples: list[Sample], read: Callable[[Sample], float]) -> float:
    return statistics.median(read(s) for s in samples)


def report(label: str, names: list[str], samples: dict[str, list[Sample]], top: int) -> None:
    """Print one configuration's table (see the module docstring)."""
    base = names[0]
    rounds = len(samples[base])
    replay = {c: _median(samples[c], lambda s: s.replay_s) for c in names}
    inside = {c: _median(samples[c], lambda s: sum(s.ns.values()) / 1e9) for c in names}
    print(f"\n{label}/ps{cores.Shape.page_size}/{cores.POLICY[0]} ({rounds} rounds; ms per replay, medians; "
          f"x = time against {base}'s, below 1 is faster)")
    head = "".join(f"{c:>24s}" for c in names)
    print(f"{'':34s}{head}")
    print(f"{'replay (process CPU)':34s}" + "".join(
        f"{replay[c] * 1e3:10.1f}{'' if c == base else f' {replay[c] / replay[base]:5.2f}x':>14s}" for c in names))
    print(f"{'inside the tree core':34s}" + "".join(
        f"{inside[c] * 1e3:10.1f}{'' if c == base else f' {inside[c] / inside[base]:5.2f}x':>14s}" for c in names))
    per = {c: {m: statistics.median(s.ns.get(m, 0) / 1e6 for s in samples[c]) for m in METHODS} for c in names}
    calls = {c: {m: samples[c][0].calls.get(m, 0) for m in METHODS} for c in names}
    ranked = sorted(METHODS, key=lambda m: -max(per[c][m] for c in names))[:top]
    for m in ranked:
        cells = []
        for c in names:
            ms, n = per[c][m], calls[c][m]
            ratio = "" if c == base or per[base][m] == 0 else f" {ms / per[base][m]:5.2f}x"
            cells.append(f"{ms:7.1f} ({n:5d}){ratio:>7s}" if n else f"{'-':>10s}{'':14s}")
        print(f"  {m:32s}" + "".join(f"{cell:>24s}" for cell in cells))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", default="rust,unicache",
                    help=f"tree cores, comma-separated, the first the baseline (of {', '.join(cores.CORES)})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--configs", default=",".join(cores.CONFIGS),
                    help=f"configurations, comma-separated: {', '.join(cores.CONFIGS)}")
    ap.add_argument("--page-size", type=int, default=1)
    ap.add_argument("--policy", choices=["write_back", "write_through"], default="write_back")
    ap.add_argument("--swa-window", type=int, default=512)
    ap.add_argument("--swa-ratio", type=float, default=0.8)
    ap.add_argument("--top", type=int, default=16, help="methods printed per configuration")
    args = ap.parse_args(argv)
    names = [c.strip() for c in args.cores.split(",") if c.strip()]
    bad = [c for c in names if c not in cores.CORES]
    if bad or len(names) < 2:
        ap.error(f"--cores: give two or more of {', '.join(cores.CORES)}"
                 + (f" ({bad[0]!r} is not one)" if bad else ""))
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in cores.CONFIGS]
    if unknown:
        ap.error(f"--configs: unknown configuration {unknown[0]!r} (choose from {', '.join(cores.CONFIGS)})")
    for flag, value, ok in (("--rounds", args.rounds, args.rounds >= 1), ("--page-size", args.page_size,
                            args.page_size >= 1), ("--sessions", args.sessions, args.sessions >= 1),
                            ("--top", args.top, args.top >= 1), ("--swa-window", args.swa_window,
                            args.swa_window >= 1), ("--swa-ratio", args.swa_ratio, 0.0 < args.swa_ratio <= 1.0)):
        if not ok:
            ap.error(f"{flag}: {value} is out of range")
    cores.POLICY[0] = args.policy
    cores.Shape.page_size, cores.Shape.swa_window, cores.Shape.swa_ratio = (
        args.page_size, args.swa_window, args.swa_ratio)
    cores.CLOCK[0] = time.process_time_ns
    torch.set_num_threads(1)
    import unicache.integrations.sglang.treecore.unguarded as core_module

    build = "compiled" if (core_module.__file__ or "").endswith(".so") else "pure"
    reqs, unique = gen_workload(0, sessions=args.sessions, page_size=args.page_size)
    device, ctx = pool_sizes(reqs, unique, page_size=args.page_size)
    print(f"# {len(reqs)} requests, {unique} unique tokens; tree core 'unicache': {build} build "
          f"({core_module.__file__}); process CPU time")
    clock = MethodClock()
    for label in configs:
        samples: dict[str, list[Sample]] = {c: [] for c in names}
        for r in range(args.rounds):
            k = r % len(names)
            for core in names[k:] + names[:k]:
                samples[core].append(_replay_one(core, label, device, ctx, reqs, clock))
        digests = {c: {s.digest for s in v} for c, v in samples.items()}
        if len(set().union(*digests.values())) != 1:
            raise SystemExit(f"{label}: the cores did different work: digests {digests}")
        report(label, names, samples, args.top)


if __name__ == "__main__":
    main()

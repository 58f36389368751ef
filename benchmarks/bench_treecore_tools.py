"""What tree core "unicache"'s tools cost on the harness workload: failure guards, safe points, lease history.

Run (in the SGLang venv): `.venv-sglang/bin/python benchmarks/bench_treecore_tools.py [--rounds R]
[--sessions N] [--clock wall|cpu]`.

Three variants of the core on the same requests (FULL, page size 1,
write-back, SGLang's cache and HiCache controller on CPU, the harness's op
sequence per request), run back to back each round, order rotated:

* ``unguarded``: the baseline, the core with its failure guards taken off
  (each guarded method replaced by the function it wraps; the safe-point
  flag checks stay, they are one attribute read in line);
* ``default``: the core as built (guards on, lease history 0);
* ``history``: the core with `UNICACHE_SGLANG_LEASE_HISTORY=256` (the
  ledger's flight recorder on, which dumps then carry).

Printed: median requests/s per variant and each one's ratio to
``unguarded`` (of the medians, and the median of the per-round ratios).
The digests of the three must agree (the same work), or the run aborts.
On a shared machine the rounds scatter by 10-15%, more than the guards
cost, so it also prints the load-independent estimate: guarded calls per
request (counted in one more replay) times what a guard adds to a call
(a no-op `commit_backup`, guarded and not, `timeit`), over the time of a
request.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
import timeit
import warnings
from collections import Counter
from collections.abc import Callable

import torch

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

from sglang.srt.mem_cache.cache_init_params import CacheInitParams  # noqa: E402
from sglang.srt.mem_cache.unified_cache.components import ComponentType, TreeComponent  # noqa: E402
from sglang.srt.mem_cache.unified_cache.tree_core_registry import register_tree_core_backend  # noqa: E402
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (  # noqa: E402
    UnifiedTreeCoreInterface,
)

import unicache.integrations.sglang  # noqa: E402,F401  (registers "unicache")
from unicache.integrations.sglang.treecore.core import LEASE_HISTORY_ENV, UnicacheTreeCore  # noqa: E402
from unicache.integrations.sglang.treecore.failures import GUARDED  # noqa: E402
from unicache.integrations.sglang.workload import (  # noqa: E402
    Request,
    build_cache,
    gen_workload,
    pool_sizes,
    replay,
)

UNGUARDED_BACKEND = "unicache-unguarded"
VARIANTS = ("unguarded", "default", "history")


class UnguardedCore(UnicacheTreeCore):
    """The core without its failure guards (the benchmark's baseline)."""


for _name in GUARDED:
    setattr(UnguardedCore, _name, getattr(UnicacheTreeCore, _name).__wrapped__)


def _unguarded(params: CacheInitParams, components: dict[ComponentType, TreeComponent]) -> UnifiedTreeCoreInterface:
    return UnguardedCore(params, components)


def _cpu_ns() -> int:
    return time.process_time_ns()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sessions", type=int, default=200)
    p.add_argument("--clock", choices=("wall", "cpu"), default="cpu")
    args = p.parse_args()
    clock: Callable[[], int] = _cpu_ns if args.clock == "cpu" else time.perf_counter_ns
    register_tree_core_backend(UNGUARDED_BACKEND, _unguarded)
    os.environ["UNICACHE_SGLANG_DUMP_DIR"] = ""  # no SIGUSR1 handler, no dump directory: only the guards' cost
    reqs, unique = gen_workload(0, sessions=args.sessions)
    device, ctx = pool_sizes(reqs, unique)
    rps: dict[str, list[float]] = {v: [] for v in VARIANTS}
    digests: dict[str, int] = {}
    for r in range(args.rounds):
        k = r % len(VARIANTS)
        for variant in VARIANTS[k:] + VARIANTS[:k]:
            os.environ[LEASE_HISTORY_ENV] = "256" if variant == "history" else "0"
            setup = build_cache(backend=UNGUARDED_BACKEND if variant == "unguarded" else "unicache", mamba=False,
                                device_tokens=device, max_context_len=ctx, copy_bytes=False)
            core = setup.cache.tree_core
            assert isinstance(core, UnicacheTreeCore) and (type(core) is UnguardedCore) == (variant == "unguarded")
            try:
                res = replay(setup, reqs, clock=clock)
            finally:
                setup.cache.release_host_resources()
            rps[variant].append(res.requests / res.wall_s)
            if digests.setdefault(variant, res.digest) != res.digest:
                raise SystemExit(f"{variant}: digest changed between rounds")
    if len(set(digests.values())) != 1:
        raise SystemExit(f"the variants did different work: {digests}")
    med = {v: statistics.median(x) for v, x in rps.items()}
    print(f"# {len(reqs)} requests, {args.rounds} rounds, {args.clock} clock; median req/s and ratio to unguarded "
          f"(of the medians; paired: the median of the per-round ratios)")
    for v in VARIANTS:
        paired = statistics.median(a / b for a, b in zip(rps[v], rps["unguarded"]))
        print(f"{v:10s} {med[v]:8.1f} req/s  {med[v] / med['unguarded']:.3f}x (paired {paired:.3f}x)  "
              f"rounds: {' '.join(f'{x:.0f}' for x in rps[v])}")
    guard_estimate(device, ctx, reqs, 1e6 / med["default"])


def guard_estimate(device: int, ctx: int, reqs: list[Request], us_per_request: float) -> None:
    """Guarded calls per request x a guard's cost per call, as a share of a request's time."""
    counts: Counter[str] = Counter()
    originals = {name: getattr(UnicacheTreeCore, name) for name in GUARDED}

    def counting(name: str, fn: Callable[..., object]) -> Callable[..., object]:
        def counted(self: UnicacheTreeCore, *args: object, **kwargs: object) -> object:
            counts[name] += 1
            return fn(self, *args, **kwargs)
        return counted

    for name, fn in originals.items():
        setattr(UnicacheTreeCore, name, counting(name, fn))
    try:
        setup = build_cache(backend="unicache", mamba=False, device_tokens=device, max_context_len=ctx,
                            copy_bytes=False)
        replay(setup, reqs)
    finally:
        for name, fn in originals.items():
            setattr(UnicacheTreeCore, name, fn)
    core = setup.cache.tree_core
    assert isinstance(core, UnicacheTreeCore)
    empty = torch.empty(0, dtype=torch.int64)
    root = core.root.id
    guarded = UnicacheTreeCore.commit_backup
    plain = getattr(guarded, "__wrapped__")
    n = 100_000
    g = min(timeit.repeat(lambda: guarded(core, root, empty, {}), number=n, repeat=7)) / n * 1e6
    p = min(timeit.repeat(lambda: plain(core, root, empty, {}), number=n, repeat=7)) / n * 1e6
    setup.cache.release_host_resources()
    calls = sum(counts.values()) / len(reqs)
    top = ", ".join(f"{k} {v / len(reqs):.2f}" for k, v in counts.most_common(4))
    print(f"# guards: {calls:.2f} guarded calls per request ({top}, ...) x {g - p:.3f} us a guard = "
          f"{calls * (g - p):.2f} us per request of {us_per_request:.0f} us: {calls * (g - p) / us_per_request:.2%}")


if __name__ == "__main__":
    main()

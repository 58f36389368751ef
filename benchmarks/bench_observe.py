"""What watching a replay costs: the same replay plain, and with metrics snapshots and the lease watchdog.

    python benchmarks/bench_observe.py [--requests 400] [--tokens-per-block 16] [--repeats 3]

Settings, interleaved within each repeat in this one process (so drift hits
both alike), best of the repeats:

- ``plain``: what `unicache replay` runs without observability options (no ledger clock);
- ``watched``: a ledger clock (`time.monotonic`: acquisition stamps and hold
  times at release), the lease watchdog checked after every step, and a
  metrics snapshot published every step (the CLI publishes at most once a
  second; every step is the worst case). No HTTP server: scrapes run on
  their own thread and never touch the cache.

Prints requests/s of each and the ratio watched/plain.
"""

from __future__ import annotations

import argparse
import gc
import time

from unicache.engine.live import LiveHooks
from unicache.engine.replay import ReplayOptions, load_replay_trace, run_replay
from unicache.metrics.exporter import SnapshotCollector


def _rate(opts: ReplayOptions, watched: bool) -> float:
    trace = load_replay_trace(opts)
    live = LiveHooks(collector=SnapshotCollector(), lease_age_limit=3600.0, interval=0.0,
                     say=lambda _: None) if watched else None
    gc.collect()
    t0 = time.perf_counter()
    report = run_replay(opts, trace=trace, live=live)
    wall = time.perf_counter() - t0
    assert report["errors"] == 0 and report["corruptions"] == 0, report.get("error")
    requests = report["requests"]
    assert isinstance(requests, int)
    return requests / wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--tokens-per-block", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    opts = ReplayOptions(requests=args.requests, tokens_per_block=args.tokens_per_block, transfer="simulated")
    best = {"plain": 0.0, "watched": 0.0}
    for _ in range(args.repeats):
        for name in best:
            best[name] = max(best[name], _rate(opts, name == "watched"))
    for name, rate in best.items():
        print(f"{name:8s} {rate:10.1f} requests/s")
    print(f"watched/plain: {best['watched'] / best['plain']:.3f}x")


if __name__ == "__main__":
    main()

"""Peak RSS of a replay with the byte-level oracle on, by phase, against the 1 GiB target.

The default `unicache replay` configuration (bundled Mooncake window, data and
verification on, whole-tree oracle and sanity check at the end) runs in a
child process; printed: peak RSS after loading the trace, after building the
cache, before the end-of-run checks and after them, and the peak as a ratio
of 1 GiB (the issue-14 target: a 1,000-request replay under 1 GB).

    .venv/bin/python benchmarks/bench_replay_memory.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource

import torch

from unicache.engine.replay import ReplayOptions, build_replay, finish_checks, load_replay_trace

TARGET_MIB = 1024


def _peak_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _child(requests: int, out: mp.Queue[tuple[str, int]]) -> None:
    torch.set_num_threads(1)
    out.put(("imports", _peak_mib()))
    opts = ReplayOptions(requests=requests)
    trace = load_replay_trace(opts)
    out.put(("trace loaded", _peak_mib()))
    sched = build_replay(opts, trace, timeline=False)
    out.put(("cache built", _peak_mib()))
    while not sched.done:
        sched.step()
    out.put(("requests served", _peak_mib()))
    finish_checks(sched)
    out.put(("end checks", _peak_mib()))
    out.put(("verified tokens", sched.stats.verified_tokens))
    sched.cache.engine.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1000)
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    out: mp.Queue[tuple[str, int]] = ctx.Queue()
    proc = ctx.Process(target=_child, args=(args.requests, out))
    proc.start()
    rows: list[tuple[str, int]] = []
    while len(rows) < 6:
        rows.append(out.get())
    proc.join()
    if proc.exitcode != 0:
        raise SystemExit(f"replay process exited with {proc.exitcode}")
    peak = 0
    for label, value in rows:
        if label == "verified tokens":
            print(f"{label:42s} {value:>12,d}")
            continue
        peak = max(peak, value)
        print(f"peak RSS after {label:27s} {value:>8,d} MiB")
    print(f"peak RSS / {TARGET_MIB} MiB target: {peak / TARGET_MIB:.2f}x ({args.requests} requests)")


if __name__ == "__main__":
    main()

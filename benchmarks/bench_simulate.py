"""Simulation throughput (seeds x executed steps per minute) with full checks every step vs the step checks.

The same seeds run twice per repeat, interleaved, in this process on one
torch thread (as `unicache simulate --jobs 1` does): once with the full sanity
check and whole-tree oracle after every step (``--full-check-every 1``, the
baseline of the ratio) and once with the default (full checks every 16 steps,
the incremental `StepCheck` between). Printed: executed steps per minute of
each and their ratio.

    .venv/bin/python benchmarks/bench_simulate.py [--seeds 8] [--first-seed 2000] [--steps 200] [--repeats 1]
"""

from __future__ import annotations

import argparse
import time

import torch

from unicache.engine.simulate import FULL_CHECK_EVERY, SimulateOptions, run_scenario, scenario_for


def _run(seeds: list[int], steps: int, every: int) -> tuple[int, float]:
    opts = SimulateOptions(steps=steps, full_check_every=every)
    done = 0
    t0 = time.perf_counter()
    for seed in seeds:
        r = run_scenario(scenario_for(seed, opts))
        if r.error is not None:
            raise SystemExit(f"seed {seed} failed: {r.error!r} ({r.scenario.command()})")
        done += r.steps
    return done, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--first-seed", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    totals = {1: [0, 0.0], FULL_CHECK_EVERY: [0, 0.0]}
    for _ in range(args.repeats):
        for every in totals:
            steps, secs = _run(seeds, args.steps, every)
            totals[every][0] += steps
            totals[every][1] += secs
    rate = {k: 60.0 * v[0] / v[1] for k, v in totals.items()}
    for every, r in rate.items():
        label = "full checks every step" if every == 1 else f"step checks, full every {every}"
        print(f"{label:32s} {int(totals[every][0]):7d} steps {totals[every][1]:8.1f} s {r:9.0f} steps/min")
    print(f"ratio (step checks / full every step): {rate[FULL_CHECK_EVERY] / rate[1]:.2f}x")


if __name__ == "__main__":
    main()

"""Simulation throughput (seeds x executed steps per minute): this tree against a baseline commit.

Each measurement is one child process that runs the same seeds the way a
`unicache simulate --jobs N` worker does (one torch thread, the worker's
start-up, then ``run_scenario`` per seed) and reports executed steps (the
scheduler steps of each seed, its end-of-run drain included) and seconds.
The baseline is the tree of ``--baseline`` (default: main before the sweep
throughput work of this stop), exported with ``git archive`` into a temporary
directory and put first on the child's ``PYTHONPATH``; baseline and this tree
alternate per repeat so both see the same machine load. ``--full-every-step``
adds this tree with the full sanity check and whole-tree oracle after every
step (``--full-check-every 1``).

Printed: per variant the executed steps (total, mean and min a seed), the wall
seconds and steps per wall minute, the child's CPU seconds and steps per
CPU-minute (what one idle core would do; far less sensitive to other load on
the machine than the wall rate), each with its ratio to the baseline.

    .venv/bin/python benchmarks/bench_simulate.py [--seeds 8] [--first-seed 2000] [--steps 200] [--repeats 1]
        [--baseline REV] [--full-every-step]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

BASELINE_REV = "b3bb14f6cca6d2464162cda7f17a372f06de8e5a"
"""main before this stop's sweep throughput work (reference model on numpy, row cache, frozen start-up)."""

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, sys, time
from unicache.engine import sweep
from unicache.engine.simulate import SimulateOptions, run_scenario, scenario_for
init = getattr(sweep, "init_worker", None) or getattr(sweep, "_init_worker")
init()
seeds, steps, every = json.loads(sys.argv[1])
opts = SimulateOptions(steps=steps, full_check_every=every)
per_seed = []
t0 = time.perf_counter()
c0 = time.process_time()
for seed in seeds:
    r = run_scenario(scenario_for(seed, opts))
    if r.error is not None:
        raise SystemExit(f"seed {seed} failed: {r.error!r} ({r.scenario.command()})")
    per_seed.append(int(r.stats["steps"]))
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "steps": per_seed}))
"""


@dataclass(slots=True)
class Variant:
    """One configuration measured: which tree, how often the full checks run, and the totals so far."""

    label: str
    path: Path
    every: int
    seconds: float = 0.0
    cpu: float = 0.0
    steps: list[int] = field(default_factory=list)

    def rate(self) -> float:
        return 60.0 * sum(self.steps) / self.seconds if self.seconds else 0.0

    def cpu_rate(self) -> float:
        return 60.0 * sum(self.steps) / self.cpu if self.cpu else 0.0


def export_tree(rev: str, into: Path) -> Path:
    """The ``leases`` and ``unicache`` packages of commit ``rev``, unpacked under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "leases", "unicache"],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"cannot export baseline {rev!r}: {archive.stderr.decode(errors='replace').strip()}")
    tar_path = into / "baseline.tar"
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def measure(variant: Variant, seeds: list[int], steps: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(variant.path))
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([seeds, steps, variant.every])],
                          capture_output=True, text=True, env=env, cwd=variant.path, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{variant.label}: {proc.stderr.strip() or proc.stdout.strip()}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    variant.seconds += float(out["seconds"])
    variant.cpu += float(out["cpu"])
    variant.steps.extend(int(s) for s in out["steps"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--first-seed", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--baseline", default=BASELINE_REV, help="git revision to compare with")
    ap.add_argument("--full-every-step", action="store_true", help="also run this tree with --full-check-every 1")
    args = ap.parse_args(argv)
    from unicache.engine.simulate import FULL_CHECK_EVERY

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as tmp:
        base = Variant(f"baseline {args.baseline[:10]}", export_tree(args.baseline, Path(tmp)), FULL_CHECK_EVERY)
        variants = [base, Variant("this tree", ROOT, FULL_CHECK_EVERY)]
        if args.full_every_step:
            variants.append(Variant("this tree, full checks every step", ROOT, 1))
        for _ in range(args.repeats):
            for v in variants:
                measure(v, seeds, args.steps)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{len(seeds)} seeds x {args.repeats} repeat(s), --steps {args.steps}, one process at a time "
          f"(1-min load average at the end: {load:.1f})")
    for v in variants:
        n = len(v.steps)
        print(f"{v.label:36s} {sum(v.steps):6d} steps (mean {sum(v.steps) / n:5.1f}, min {min(v.steps):3d} a seed) "
              f"{v.seconds:6.1f} s {v.rate():6.0f} steps/min {v.rate() / base.rate():5.2f}x | CPU {v.cpu:6.1f} s "
              f"{v.cpu_rate():6.0f} steps/CPU-min {v.cpu_rate() / base.cpu_rate():5.2f}x baseline")


if __name__ == "__main__":
    main()

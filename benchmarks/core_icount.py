"""Instructions our side of the peer replay executes: this core against a baseline core, counted by callgrind.

    python benchmarks/core_icount.py --harness ../shared/bench/sglang_harness.py --baseline DIR
        [--candidate DIR] [--configs full/1,full+mamba/1,full/16] [--policies write_back]
        [--replays 5] [--json PATH]

Wall-clock ratios on a shared 2-core machine move by 10-15% between two runs
of one build, which hides a 5% regression. Instruction counts do not move
with load: valgrind's callgrind counts every instruction the process
executes (`Ir`), the same on a busy machine as on a quiet one. This is the
load-free check of a hot-path change; `peer_sglang.py` on a quiet machine
stays the check of what users see (instructions are not time: cache misses
and branch mispredictions are not counted).

`--baseline` and `--candidate` are directories whose `unicache` and `leases`
packages are the cores to compare: a checkout (the pure build) or a mypyc
copy (`build/compiled` of a checkout; the default candidate is this
checkout's when it is compiled, else the checkout itself). Both replay with
this checkout's `peer_sglang.run_ours` (the same driver code on both sides),
on the harness's workload, with the peer settings (immediate acks, no data
movement, leases at their cheapest setting). For each side, configuration and
policy it runs two processes under callgrind: one builds `--replays` caches,
the other builds as many and replays the workload on each (no closing sanity
check), so the difference over `--replays` is the instructions of one
replay's timed part plus the driver's loop, which is the same code on both
sides. It prints both counts per replay, their ratio and the count per
request. Needs `valgrind` on PATH; each process takes a minute or more.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from unicache.outputs import write_atomic

REPO = Path(__file__).resolve().parent.parent
COMPILED = REPO / "build" / "compiled"

# Run under callgrind with PYTHONPATH=<core dir>:<this benchmarks dir>.
_DRIVER = r"""
import sys
from pathlib import Path
import peer_sglang as p
harness, spec, replays, replay = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "replay"
comp, ps, policy = spec.split("/")
cfg = p.PeerConfig(comp, int(ps), policy)
tokens, _, device = p.workload(p.load_harness(harness), 0, cfg.page_size)
for _ in range(replays):
    cache = p.build_ours(cfg, device)
    if replay:
        p.run_ours(cfg, tokens, device, cache=cache, check=False)
print(p.loaded_build(), len(tokens))
"""


@dataclass(frozen=True)
class Count:
    """Callgrind's total of one process, and what the driver printed."""

    instructions: int
    build: str
    requests: int


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def count(core: Path, harness: Path, spec: str, replays: int, replay: bool, out: Path) -> Count:
    """Run the driver on `core` under callgrind; its instruction total."""
    env = dict(os.environ, PYTHONPATH=f"{core}{os.pathsep}{REPO / 'benchmarks'}")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", _DRIVER,
           str(harness), spec, str(replays), "replay" if replay else "build"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=core)
    if proc.returncode != 0:
        raise RuntimeError(f"callgrind run failed on {core} ({spec}):\n{proc.stderr[-3000:]}")
    totals = re.search(r"^(?:totals|summary): (\d+)", out.read_text(), re.MULTILINE)
    if totals is None:
        raise RuntimeError(f"no instruction total in {out}")
    build, requests = proc.stdout.split()[-2:]
    return Count(int(totals.group(1)), build, int(requests))


def per_replay(core: Path, harness: Path, spec: str, replays: int, work: Path) -> tuple[float, str, int]:
    """Instructions of one replay on `core`: (with replays - without) / replays."""
    name = core.as_posix().strip("/").replace("/", "_")
    without = count(core, harness, spec, replays, False, work / f"{name}.{spec.replace('/', '_')}.build")
    with_ = count(core, harness, spec, replays, True, work / f"{name}.{spec.replace('/', '_')}.replay")
    return (with_.instructions - without.instructions) / replays, with_.build, with_.requests


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--harness", type=Path, required=True, help="the SGLang CPU harness (its gen_workload)")
    parser.add_argument("--baseline", type=Path, required=True, help="directory of the baseline core")
    parser.add_argument("--candidate", type=Path, default=None,
                        help="directory of the core to compare (default: build/compiled when compiled, else here)")
    parser.add_argument("--configs", default="full/1,full+mamba/1,full/16")
    parser.add_argument("--policies", default="write_back")
    parser.add_argument("--replays", type=_positive, default=5)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not on PATH (apt install valgrind)")
    candidate = args.candidate
    if candidate is None:
        marker = COMPILED / "BUILD"
        candidate = COMPILED if marker.exists() and marker.read_text().strip() == "compiled" else REPO
    for what, core in (("--baseline", args.baseline), ("--candidate", candidate), ("--harness", args.harness)):
        if not core.exists():
            parser.error(f"{what} {core}: no such file or directory")
    for what, core in (("--baseline", args.baseline), ("--candidate", candidate)):
        if not (core / "unicache" / "__init__.py").exists():
            parser.error(f"{what} {core}: no unicache package there")
    specs = [f"{c}/{p}" for c in args.configs.split(",") for p in args.policies.split(",")]
    table = Table(title=f"instructions (callgrind Ir) per replay of the harness workload, {args.replays} replays a side")
    for col in ("config", "baseline", "candidate", "candidate/baseline", "baseline / request", "candidate / request"):
        table.add_column(col, justify="right")
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="core-icount-") as tmp:
        work = Path(tmp)
        for spec in specs:
            base, base_build, n = per_replay(args.baseline.resolve(), args.harness.resolve(), spec, args.replays, work)
            cand, cand_build, _ = per_replay(candidate.resolve(), args.harness.resolve(), spec, args.replays, work)
            table.add_row(spec, f"{base:,.0f} ({base_build})", f"{cand:,.0f} ({cand_build})", f"{cand / base:.4f}",
                          f"{base / n:,.0f}", f"{cand / n:,.0f}")
            rows.append({"config": spec, "baseline": base, "candidate": cand, "baseline_build": base_build,
                         "candidate_build": cand_build, "requests": n})
    Console(width=200).print(table)
    if args.json:
        write_atomic(args.json, json.dumps(rows, indent=2).encode(), "--json")


if __name__ == "__main__":
    main()

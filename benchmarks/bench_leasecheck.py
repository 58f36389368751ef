"""leasecheck vs plain mypy on the project tree: cold and warm cache, same options, one run.

Both tools run as subprocesses (interpreter start included) over a snapshot
of the tree copied to a temporary directory, each with its own empty cache
directory: one cold run each, then `--repeat` warm runs each, interleaved,
best of them. Prints the wall times and the leasecheck/mypy ratios; the
targets are warm <= 1.3x and cold <= 1.5x. Also checks that leasecheck printed mypy's lines
unchanged before its own.

mypy ships compiled; leasecheck is Python, whose modules an installed tool
runs from bytecode (pip compiles it at install, an editable checkout on first
import). So the runs may write bytecode (`PYTHONDONTWRITEBYTECODE` is taken
out of their environment) and the first, untimed or cold, run writes it;
`--no-bytecode-cache` keeps the variable as this process has it, and where it
is set every run recompiles leasecheck's sources (about 80 ms here).

    python benchmarks/bench_leasecheck.py [--repeat 3] [--no-cold] [--no-bytecode-cache] [TARGET ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGETS = ("leases", "unicache", "tests")
WARM_TARGET = 1.3
COLD_TARGET = 1.5


@dataclass(slots=True)
class Timing:
    seconds: float
    status: int
    stdout: str


def run_tool(module: str, workdir: Path, cache: Path, targets: list[str], env: dict[str, str]) -> Timing:
    cmd = [sys.executable, "-m", module, "--config-file", "mypy.ini", f"--cache-dir={cache}",
           *targets]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode == 2:
        raise SystemExit(f"{module} failed (exit 2):\n{done.stdout}\n{done.stderr}")
    return Timing(elapsed, done.returncode, done.stdout)


def snapshot(targets: list[str], into: Path) -> None:
    for name in ("mypy.ini", "pyproject.toml"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, into / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache")
    for target in targets:
        src = ROOT / target
        if src.is_dir():
            shutil.copytree(src, into / target, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, into / target)


def mypy_lines_preserved(plain: str, combined: str) -> bool:
    mypy_lines = [line for line in plain.splitlines() if not line.startswith(("Found ", "Success"))]
    ours = combined.splitlines()
    return ours[: len(mypy_lines)] == mypy_lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=list(DEFAULT_TARGETS))
    parser.add_argument("--repeat", type=int, default=3, help="warm runs per tool (best counts)")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold runs")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE as it is here (set: leasecheck recompiles every run)")
    args = parser.parse_args(argv)
    console = Console()
    env = dict(os.environ)
    if not args.no_bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    bytecode = "recompiled every run" if env.get("PYTHONDONTWRITEBYTECODE") else "cached after the first run"
    with tempfile.TemporaryDirectory(prefix="bench-leasecheck-") as tmp:
        work = Path(tmp) / "tree"
        work.mkdir()
        snapshot(args.targets, work)
        caches = {"mypy": Path(tmp) / "cache-mypy", "leases.check": Path(tmp) / "cache-leasecheck"}
        cold: dict[str, Timing] = {}
        warm: dict[str, list[Timing]] = {name: [] for name in caches}
        with console.status("cold runs (empty caches)...") as status:
            for name, cache in caches.items():
                if args.no_cold:
                    run_tool(name, work, cache, args.targets, env)
                else:
                    cold[name] = run_tool(name, work, cache, args.targets, env)
            for i in range(args.repeat):
                status.update(f"warm runs {i + 1}/{args.repeat}...")
                for name, cache in caches.items():
                    warm[name].append(run_tool(name, work, cache, args.targets, env))
    best = {name: min(t.seconds for t in runs) for name, runs in warm.items()}
    table = Table(title=f"leasecheck vs mypy on {' '.join(args.targets)} (same options; leasecheck's "
                        f"bytecode {bytecode})")
    table.add_column("cache")
    table.add_column("mypy [s]", justify="right")
    table.add_column("leasecheck [s]", justify="right")
    table.add_column("ratio", justify="right")
    if cold:
        ratio = cold["leases.check"].seconds / cold["mypy"].seconds
        table.add_row("cold", f"{cold['mypy'].seconds:.2f}", f"{cold['leases.check'].seconds:.2f}",
                      f"{ratio:.2f}x")
    warm_ratio = best["leases.check"] / best["mypy"]
    table.add_row(f"warm (best of {args.repeat})", f"{best['mypy']:.2f}",
                  f"{best['leases.check']:.2f}", f"{warm_ratio:.2f}x")
    console.print(table)
    last_mypy, last_lc = warm["mypy"][-1], warm["leases.check"][-1]
    preserved = mypy_lines_preserved(last_mypy.stdout, last_lc.stdout)
    console.print(f"mypy's diagnostics reproduced unchanged by leasecheck: {preserved}")
    verdict = "meets" if warm_ratio <= WARM_TARGET else "MISSES"
    console.print(f"warm ratio {warm_ratio:.2f}x {verdict} the target (<= {WARM_TARGET}x)")
    if cold:
        cold_ratio = cold["leases.check"].seconds / cold["mypy"].seconds
        verdict = "meets" if cold_ratio <= COLD_TARGET else "MISSES"
        console.print(f"cold ratio {cold_ratio:.2f}x {verdict} the target (<= {COLD_TARGET}x)")
    return 0 if preserved else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""SGLang 0.5.23's own cache on the harness workload: tree cores "leases" and "unicache" vs "python" vs "rust".

Run (in the SGLang venv, from the checkout): `make bench-sglang`, or
`.venv-sglang/bin/python benchmarks/bench_sglang_cores.py [--rounds R] [--sessions N]
[--clock wall|cpu] [--harness PATH/sglang_harness.py] [--json PATH] [--compiled DIR|none]
[--configs FULL,FULL+MAMBA,FULL+SWA] [--page-size P] [--policy write_back|write_through]`.

Part 1, throughput: each round runs the cores back to back (order
rotated per round) on the same requests: "python", "leases", "rust",
"unicache" (each of `--configs`, at `--page-size`, under `--policy`) on the pure build, and
"unicache-compiled": tree core "unicache" on the compiled build (the copy
`--compiled`, by default `build/compiled-sglang` of `make setup-sglang`,
run in a worker process started once whose modules are checked to be
extensions; skipped, saying so, where that copy is pure); requests/s are
medians over the rounds, and the ratios of "leases", "unicache" and
"unicache-compiled" to "python" and "rust" are printed, both as
the ratio of the medians and as the median of the per-round ratios (each
taken from runs seconds apart, so less exposed to a shared machine's load
swings). FULL+SWA runs with sliding window `--swa-window` and an SWA pool
of `--swa-ratio` times the Full pool (SGLang's `swa_full_tokens_ratio`,
default 0.8 as in SGLang), so SWA's own eviction walk runs. At
`--page-size` above 1 the workload is generated page-aligned (as the
harness does) and Mamba uses SGLang's extra buffer. `--clock cpu` times the replay loop in process CPU time instead of
wall time (other jobs on the machine then cost less noise). Digests must
agree across cores, or the run aborts (different work is not compared).

Part 2, overlapping load-backs: acks are deferred (`--ack-every`, started and
acked every N requests, as while GPU copies are in flight); the stock Python
core refuses a load-back that touches a node another load-back pins, so the
request recomputes host-resident tokens; the lease core serves it. Printed:
refused load-backs and the host-hit tokens lost to them, per core, on the
harness workload and on a variant whose new sessions fork from a running
one (`--fork`, a branched chat: the shared node holds a Mamba state).

`--transfer noop` (default, like the harness's anchor) moves no bytes, so the
figures are bookkeeping; `copy` runs the torch index copies.

`--harness` imports the harness's own `gen_workload` and checks that it
yields the very requests used here (the workload is a copy, see
`unicache.integrations.sglang.workload`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import unicache.integrations.sglang  # noqa: E402,F401  (registers "leases" and "unicache")
from unicache.integrations.sglang.workload import (  # noqa: E402
    CacheSetup,
    Request,
    ReplayResult,
    build_cache,
    gen_workload,
    pool_sizes,
    replay,
)

CORES = ("python", "leases", "rust", "unicache")
COMPILED = "unicache-compiled"
"""Tree core "unicache" on the compiled build (a `CompiledWorker`)."""
OURS = ("leases", "unicache", COMPILED)
ROOT = Path(__file__).resolve().parents[1]
POLICY = ["write_back"]
CONFIGS = ("FULL", "FULL+MAMBA", "FULL+SWA")


class Shape:
    """What every replay of a run shares: page size, SWA window and SWA pool ratio (set once by `main`)."""

    page_size = 1
    swa_window = 512
    swa_ratio = 0.8


def _check_harness(path: str, seed: int, sessions: int, page_size: int, reqs: list[Request]) -> None:
    spec = importlib.util.spec_from_file_location("sglang_harness", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import the harness at {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    theirs, _ = mod.gen_workload(seed, sessions=sessions, page_size=page_size)
    if [list(t) for _, _, t in theirs] != [list(t) for _, _, t in reqs]:
        raise SystemExit("the harness generates a different workload for these parameters")
    print(f"# workload identical to {path}'s gen_workload(seed={seed}, sessions={sessions}, page_size={page_size})")


COPY_BYTES = [False]


CLOCK: list[Callable[[], int]] = [time.perf_counter_ns]


def _run(core: str, mamba: bool, device: int, ctx: int, reqs: list[Request], ack_every: int,
         swa_window: int | None = None, swa_tokens: int | None = None,
         on_setup: Callable[[CacheSetup], None] | None = None) -> ReplayResult:
    setup = build_cache(backend=core, mamba=mamba, device_tokens=device, max_context_len=ctx,
                        copy_bytes=COPY_BYTES[0], swa_window=swa_window, swa_tokens=swa_tokens,
                        policy=POLICY[0], page_size=Shape.page_size)
    if on_setup is not None:
        on_setup(setup)
    try:
        return replay(setup, reqs, ack_every=ack_every, clock=CLOCK[0])
    finally:
        setup.cache.release_host_resources()


class CompiledWorker:
    """This script as a worker process inside the compiled copy `directory`, replaying tree core "unicache".

    Started once; each `run` sends it a configuration on stdin and reads
    one line of JSON back (requests, seconds, digest). The worker imports
    the copy's modules (its root first on `sys.path`) and refuses to start
    unless the tree core and the core it uses are extensions.
    """

    def __init__(self, directory: Path, argv: list[str]) -> None:
        env = dict(os.environ, PYTHONPATH=str(directory), UNICACHE_BUILD="compiled")
        self.proc = subprocess.Popen(
            [sys.executable, str(directory / "benchmarks" / "bench_sglang_cores.py"), "--worker", *argv],
            cwd=directory, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.banner = self._line()

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{COMPILED}: the worker exited (status {self.proc.wait()})")
        return line.strip()

    def run(self, label: str) -> tuple[float, int]:
        """Requests/s and digest of one replay of `label` (one of `CONFIGS`)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(label + "\n")
        self.proc.stdin.flush()
        got = json.loads(self._line())
        return got["requests"] / got["wall_s"], int(got["digest"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def _serve(reqs: list[Request], unique: int, stdin: IO[str], stdout: IO[str]) -> None:
    """The worker's loop: one replay of tree core "unicache" per configuration read (see `CompiledWorker`)."""
    import unicache.integrations.sglang.treecore.unguarded as core
    import unicache.tree.radix as radix

    for module in (core, radix):
        if not (module.__file__ or "").endswith(".so"):
            raise SystemExit(f"{COMPILED} worker: {module.__name__} is not compiled ({module.__file__})")
    device, ctx = pool_sizes(reqs, unique, page_size=Shape.page_size)
    print(f"# {COMPILED}: {core.__file__}", file=stdout, flush=True)
    for line in stdin:
        res = run_config("unicache", line.strip(), device, ctx, reqs)
        print(json.dumps({"requests": res.requests, "wall_s": res.wall_s, "digest": res.digest}), file=stdout,
              flush=True)


def run_config(core: str, label: str, device: int, ctx: int, reqs: list[Request],
               on_setup: Callable[[CacheSetup], None] | None = None) -> ReplayResult:
    """One throughput replay of configuration `label` (one of `CONFIGS`) on tree core `core`, acks at once.

    `on_setup` sees the cache before the replay (`bench_sglang_methods.py` instruments its tree core there).
    """
    if label not in CONFIGS:
        raise SystemExit(f"unknown configuration {label!r} (choose from {', '.join(CONFIGS)})")
    if label == "FULL+SWA":
        swa_tokens = int(device * Shape.swa_ratio) // Shape.page_size * Shape.page_size
        return _run(core, False, device, ctx, reqs, 1, Shape.swa_window, swa_tokens, on_setup)
    return _run(core, label == "FULL+MAMBA", device, ctx, reqs, 1, on_setup=on_setup)


def throughput(reqs: list[Request], unique: int, rounds: int, configs: tuple[str, ...],
               worker: CompiledWorker | None) -> list[dict[str, Any]]:
    device, ctx = pool_sizes(reqs, unique, page_size=Shape.page_size)
    rows: list[dict[str, Any]] = []
    for label in configs:
        cores = CORES + ((COMPILED,) if worker is not None else ())
        rps: dict[str, list[float]] = {c: [] for c in cores}
        digests: dict[str, int] = {}
        for r in range(rounds):
            k = r % len(cores)
            for core in cores[k:] + cores[:k]:
                if core == COMPILED:
                    assert worker is not None
                    rate, digest = worker.run(label)
                else:
                    res = run_config(core, label, device, ctx, reqs)
                    rate, digest = res.requests / res.wall_s, res.digest
                rps[core].append(rate)
                if digests.setdefault(core, digest) != digest:
                    raise SystemExit(f"{label}/{core}: digest changed between rounds")
        if len(set(digests.values())) != 1:
            raise SystemExit(f"{label}: cores did different work: {digests}")
        med = {c: statistics.median(v) for c, v in rps.items()}
        row: dict[str, Any] = {
            "config": f"{label}/ps{Shape.page_size}/{POLICY[0]}",
            "req_per_s": med,
            "req_per_s_all": {c: [round(x, 1) for x in v] for c, v in rps.items()},
            "digest": next(iter(digests.values())),
        }
        ratios = []
        for ours in (c for c in OURS if c in cores):
            for base in ("python", "rust"):
                paired = statistics.median(a / b for a, b in zip(rps[ours], rps[base]))
                row[f"{ours}_vs_{base}"] = med[ours] / med[base]
                row[f"{ours}_vs_{base}_paired"] = paired
                ratios.append(f"{ours}/{base}={med[ours] / med[base]:.3f}x (paired {paired:.3f}x)")
        rows.append(row)
        print(f"{row['config']:26s} " + "  ".join(f"{c}={med[c]:7.1f} req/s" for c in cores)
              + "  " + "  ".join(ratios))
    return rows


def overlap(
    reqs: list[Request], unique: int, ack_every: int, variant: str, swa_window: int
) -> list[dict[str, Any]]:
    device, ctx = pool_sizes(reqs, unique, floor_requests=3, page_size=Shape.page_size)
    rows: list[dict[str, Any]] = []
    kinds: tuple[tuple[str, bool, int | None], ...] = (
        ("FULL", False, None), ("FULL+MAMBA", True, None), (f"FULL+SWA(w={swa_window})", False, swa_window))
    for name, mamba, window in kinds:
        label = name + variant
        for core in ("python", "leases"):
            res = _run(core, mamba, device, ctx, reqs, ack_every, window)
            row = {
                "config": f"{label}/ack_every={ack_every}", "core": core,
                "load_backs": res.load_backs, "refused": res.load_backs_declined,
                "host_hit_tokens": res.host_hit_tokens,
                "host_hit_tokens_lost": res.declined_host_hit_tokens,
                "loaded_tokens": res.loaded_tokens,
            }
            rows.append(row)
            print(f"{row['config']:38s} {core:7s} load-backs={res.load_backs:4d} refused={res.load_backs_declined:3d} "
                  f"host-hit tokens={res.host_hit_tokens:7d} lost={res.declined_host_hit_tokens:6d} "
                  f"loaded={res.loaded_tokens:7d}")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-throughput", action="store_true", help="only the overlap part")
    ap.add_argument("--ack-every", type=int, default=4)
    ap.add_argument("--fork", type=float, default=0.5, help="fork probability of the overlap variant")
    ap.add_argument("--swa-window", type=int, default=512, help="sliding window of the FULL+SWA runs")
    ap.add_argument("--swa-ratio", type=float, default=0.8,
                    help="SWA pool / Full pool of the FULL+SWA throughput runs (SGLang's swa_full_tokens_ratio)")
    ap.add_argument("--page-size", type=int, default=1, help="page size of the workload, pools and tree")
    ap.add_argument("--transfer", choices=["noop", "copy"], default="noop")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="time the replay loop in wall time or in process CPU time")
    ap.add_argument("--harness", help="path of sglang_harness.py, to confirm the workload is the same")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help=f"throughput configurations, comma-separated: {', '.join(CONFIGS)}")
    ap.add_argument("--policy", choices=["write_back", "write_through"], default="write_back",
                    help="HiCache write policy of the throughput runs")
    ap.add_argument("--skip-overlap", action="store_true", help="only the throughput part")
    ap.add_argument("--compiled", default=str(ROOT / "build" / "compiled-sglang"),
                    help="the compiled copy whose tree core 'unicache' runs as unicache-compiled "
                         "(make setup-sglang), or 'none'")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    configs = tuple(c.strip() for c in args.configs.split(",") if c.strip())
    bad = [c for c in configs if c not in CONFIGS]
    if bad:
        ap.error(f"--configs: unknown configuration {bad[0]!r} (choose from {', '.join(CONFIGS)})")
    if args.page_size < 1:
        ap.error(f"--page-size: {args.page_size} is not a positive page size")
    if args.swa_window < 1:
        ap.error(f"--swa-window: {args.swa_window} is not a positive window")
    if not 0.0 < args.swa_ratio <= 1.0:
        ap.error(f"--swa-ratio: {args.swa_ratio} is not in (0, 1]")
    POLICY[0] = args.policy
    Shape.page_size, Shape.swa_window, Shape.swa_ratio = args.page_size, args.swa_window, args.swa_ratio
    torch.set_num_threads(1)
    COPY_BYTES[0] = args.transfer == "copy"
    CLOCK[0] = time.process_time_ns if args.clock == "cpu" else time.perf_counter_ns
    reqs, unique = gen_workload(args.seed, sessions=args.sessions, page_size=args.page_size)
    if args.worker:
        _serve(reqs, unique, sys.stdin, sys.stdout)
        return
    if args.harness:
        _check_harness(args.harness, args.seed, args.sessions, args.page_size, reqs)
    print(f"# {len(reqs)} requests, {unique} unique tokens; transfers: {args.transfer}; "
          f"clock: {args.clock}; load average {os.getloadavg()[0]:.1f}")
    worker = None
    if not args.skip_throughput and args.compiled != "none":
        build = Path(args.compiled) / "BUILD"
        state = build.read_text().strip() if build.is_file() else "missing"
        if state == "compiled":
            worker = CompiledWorker(Path(args.compiled).resolve(), [
                "--seed", str(args.seed), "--sessions", str(args.sessions), "--clock", args.clock,
                "--transfer", args.transfer, "--policy", args.policy, "--page-size", str(args.page_size),
                "--swa-window", str(args.swa_window), "--swa-ratio", str(args.swa_ratio)])
            print(worker.banner)
        else:
            print(f"# {COMPILED}: skipped ({build}: {state}; `make setup-sglang` builds it)")
    forked, forked_unique = gen_workload(args.seed, sessions=args.sessions, fork=args.fork, page_size=args.page_size)
    out = {"throughput": [] if args.skip_throughput else throughput(reqs, unique, args.rounds, configs, worker),
           "overlap": [] if args.skip_overlap else (
               overlap(reqs, unique, args.ack_every, "", args.swa_window)
               + overlap(forked, forked_unique, args.ack_every, f"/fork={args.fork}", args.swa_window))}
    if worker is not None:
        worker.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(f"# load average at the end {os.getloadavg()[0]:.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

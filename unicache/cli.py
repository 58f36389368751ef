"""The `unicache` command: `replay`, `simulate` and `repl` subcommands.

Parsing only; the work lives in :mod:`unicache.engine` (imported when a
subcommand runs, so `unicache --help` stays fast). `unicache repl ...` hands
its arguments to :func:`unicache.repl.main` untouched.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from unicache.arguments import in_range, non_negative, positive, positive_number
from unicache.engine.interrupt import stop_on_signals

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
MAX_SEED = 2**32 - 1
MOONCAKE_BLOCK_TOKENS = 512
MAX_SEEDS = 10_000_000
MAX_SIM_STEPS = 1_000_000
MAX_SIM_PAGE_SIZE = 64
MAX_HISTORY = 1 << 24
MAX_MEMORY_LIMIT_GIB = 1 << 20
MAX_PORT = 65535


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip().lower() for part in text.split(",") if part.strip())


def _indices(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of integers") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: indices must be >= 0")
    seen: set[int] = set()
    for v in values:
        if v in seen:
            raise argparse.ArgumentTypeError(f"{text!r}: index {v} is given twice (give each request once)")
        seen.add(v)
    return values


def _seed(text: str) -> int:
    return in_range(text, 0, MAX_SEED)


def _bounded(text: str, limit: int, what: str) -> int:
    value = positive(text)
    if value > limit:
        raise argparse.ArgumentTypeError(f"{value} {what} is more than the bound of {limit}")
    return value


def _history(text: str) -> int:
    value = non_negative(text)
    if value > MAX_HISTORY:
        raise argparse.ArgumentTypeError(f"{value} entries is more than the bound of {MAX_HISTORY}")
    return value


def _memory_limit(text: str) -> float:
    value = positive_number(text)
    if value > MAX_MEMORY_LIMIT_GIB:
        raise argparse.ArgumentTypeError(f"{value} GiB is more than the bound of {MAX_MEMORY_LIMIT_GIB} GiB")
    return value


def _port(text: str) -> int:
    value = non_negative(text)
    if value > MAX_PORT:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0..{MAX_PORT}; 0: any free port)")
    return value


def _add_metrics_options(p: argparse.ArgumentParser, *, watchdog: bool) -> None:
    g = p.add_argument_group("observability")
    g.add_argument("--metrics-port", type=_port, default=None, metavar="PORT",
                   help="serve Prometheus metrics on http://ADDR:PORT/metrics while the run lasts (0: any free "
                        "port; the URL is printed on stderr); a port in use is refused before the run")
    g.add_argument("--metrics-addr", default=None, metavar="ADDR",
                   help="address the metrics endpoint listens on (default 127.0.0.1; 0.0.0.0 for every "
                        "interface; only with --metrics-port)")
    if watchdog:
        g.add_argument("--lease-age-limit", type=positive_number, default=None, metavar="SECONDS",
                       help="report every lease held longer than this (a stderr line naming lease, component, "
                            "owner, nodes and age; a metric; live dumps list them); never released by force")


def _seed_count(text: str) -> int:
    return _bounded(text, MAX_SEEDS, "seeds")


def max_jobs() -> int:
    """The most `simulate --jobs` allows: twice the CPUs this process may use, at least 4.

    The sweep is CPU-bound and every worker is a process with its own torch
    (about 150 MB), so hundreds of them only thrash the machine.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(4, 2 * cpus)


def _jobs(text: str) -> int:
    value, bound = positive(text), max_jobs()
    if value > bound:
        raise argparse.ArgumentTypeError(
            f"{value} worker processes is more than the bound of {bound} (twice the CPUs this process may use, "
            "at least 4: the sweep is CPU-bound and every worker holds its own torch)")
    return value


def _steps(text: str) -> int:
    return _bounded(text, MAX_SIM_STEPS, "steps")


def _sim_page_size(text: str) -> int:
    return _bounded(text, MAX_SIM_PAGE_SIZE, "tokens a page")


def _block_tokens(text: str) -> int:
    value = positive(text)
    if value > MOONCAKE_BLOCK_TOKENS:
        raise argparse.ArgumentTypeError(f"{value} must be in 1..{MOONCAKE_BLOCK_TOKENS} "
                                         f"(a Mooncake block holds {MOONCAKE_BLOCK_TOKENS} tokens)")
    return value


def _add_cache_options(p: argparse.ArgumentParser, *, components: str) -> None:
    g = p.add_argument_group("cache")
    g.add_argument("--components", type=_csv, default=_csv(components), metavar="LIST",
                   help=f"comma list of full, swa, mamba (full is required; default {components})")
    g.add_argument("--page-size", type=positive, default=1, metavar="N", help="tokens per page (default 1)")
    g.add_argument("--device-tokens", type=positive, default=None, metavar="N",
                      help="Full device capacity in tokens (default: unique prompt tokens / ratio, "
                           "at least twice the longest request)")
    g.add_argument("--hicache-ratio", type=positive_number, default=12.0, metavar="R",
                   help="host:device capacity ratio (default 12)")
    g.add_argument("--mamba-slots", type=positive, default=None, metavar="N",
                   help="device Mamba state slots (default 64; only with mamba in --components)")
    g.add_argument("--swa-window", type=positive, default=None, metavar="W",
                   help="SWA window in tokens (default 64; only with swa in --components)")
    g.add_argument("--write-policy", choices=("write_back", "write_through"), default="write_back",
                   help="host backup policy (default write_back)")
    g.add_argument("--load-back-threshold", type=non_negative, default=0, metavar="N",
                   help="Full host tokens a load-back must move to be worth it (default 0, i.e. 1)")
    g.add_argument("--memory-limit", type=_memory_limit, default=8.0, metavar="GiB",
                   help="refuse a configuration whose cache pools would take more (default 8 GiB)")


def _add_transfer_options(p: argparse.ArgumentParser, *, faults: str) -> None:
    g = p.add_argument_group("transfers")
    g.add_argument("--transfer", choices=("auto", "immediate", "simulated", "threaded", "cuda"), default="auto",
                   help="transfer engine (auto: cuda when a GPU is present, else simulated; threaded: copies on "
                        "worker threads that post acks to the cache's inbox)")
    g.add_argument("--faults", type=_csv, default=None, metavar="LIST",
                   help=f"simulated faults: comma list of delay, reorder, duplicate, fail, lose, or none "
                        f"(default {faults} on the simulated engine, none on the others, which inject no "
                        f"faults: any other value needs --transfer simulated)")
    g.add_argument("--ack-timeout", type=non_negative, default=256, metavar="STEPS",
                   help="time out a ticket whose ack has not come after this many steps: its request "
                        "recomputes, its rows stay quarantined until the late ack (default 256, above "
                        "--max-delay; 0: never)")
    g.add_argument("--seed", type=_seed, default=0, help="seed of the simulated engine and reference model")


def _add_delay_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("simulated delays")
    g.add_argument("--mean-delay", type=positive_number, default=None, metavar="STEPS",
                   help="mean steps a delayed copy takes (default 16: long enough for load-backs to overlap; "
                        "only with the delay fault)")
    g.add_argument("--max-delay", type=positive, default=None, metavar="STEPS",
                   help="most steps a delayed copy takes (default 64; only with the delay or lose fault)")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unicache", description="Unified hierarchical radix prefix cache with leased pins.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    rp = sub.add_parser("replay", help="replay a trace through a cache and report",
                        description="Replay a trace (the bundled Mooncake trace by default), checking every "
                                    "reused byte against the reference model.")
    g = rp.add_argument_group("trace")
    g.add_argument("--trace", default="mooncake", metavar="PATH",
                   help="mooncake (bundled, default), multiturn:SEED (synthetic), or a JSONL file "
                        "(Mooncake hash_ids or explicit tokens, optionally .gz)")
    g.add_argument("--requests", type=positive, default=1000, metavar="N", help="requests to replay (default 1000)")
    g.add_argument("--start", type=non_negative, default=0, metavar="K", help="skip the first K requests")
    g.add_argument("--tokens-per-block", type=_block_tokens, default=None, metavar="B",
                   help="tokens per 512-token Mooncake block (scale; default 512, the real size; only for a "
                        "Mooncake trace)")
    _add_cache_options(rp, components="full,mamba")
    _add_transfer_options(rp, faults="delay,reorder")
    _add_delay_options(rp)
    g = rp.add_argument_group("engine")
    g.add_argument("--max-running", type=positive, default=64, metavar="N", help="requests in flight (default 64)")
    g.add_argument("--decode-per-step", type=positive, default=None, metavar="N",
                   help="output tokens each request decodes per step (default: tokens per block / 4 for "
                        "Mooncake, so a request lasts as many steps at every scale; else 4)")
    g.add_argument("--cache-chunk", type=positive, default=None, metavar="N",
                   help="cache prompts up to a multiple of N tokens after prefill (default: the block "
                        "size for Mooncake, else the page size)")
    g.add_argument("--no-branch-states", action="store_true",
                   help="Mamba: cache states only where requests end, not also at branch points (only with "
                        "mamba in --components)")
    g.add_argument("--check-every", type=non_negative, default=0, metavar="N",
                   help="run the sanity check every N steps (default: only at the end)")
    g.add_argument("--no-verify", action="store_true", help="skip the data oracle (benchmarks only)")
    g.add_argument("--no-data", action="store_true",
                   help="bookkeeping only: no KV/state computed, stored, copied or checked (benchmarks only)")
    g = rp.add_argument_group("leases")
    g.add_argument("--strict", action="store_true", help="strict lease ledger (a leak raises)")
    g.add_argument("--debug", action="store_true", help="record acquisition sites of leases")
    g.add_argument("--history", type=_history, default=1024, metavar="N", help="flight-recorder size")
    g = rp.add_argument_group("output")
    g.add_argument("--report", type=Path, default=None, metavar="PATH.json", help="write the JSON report")
    g.add_argument("--plot", type=Path, default=None, metavar="PATH.png",
                   help="plot occupancy, in-flight load-backs and live leases over the run")
    g.add_argument("--crash-dir", type=Path, default=Path("unicache-crash"), metavar="DIR",
                   help="where crash dumps go (default ./unicache-crash)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    _add_metrics_options(rp, watchdog=True)

    sp = sub.add_parser("simulate", help="deterministic fault-injection runs with invariants after every step",
                        description="Run seeded simulations: small caches, synthetic multi-turn requests, every "
                                    "transfer fault, resets, aborts and forced evictions; the sanity check, "
                                    "ownership invariants and the whole-tree data oracle run after every step.")
    sp.add_argument("--seeds", type=_seed_count, default=None, metavar="N", help="number of seeds (default 10)")
    sp.add_argument("--first-seed", type=_seed, default=None, metavar="S",
                    help=f"first seed (default 0; the last, S+N-1, must be at most {MAX_SEED})")
    sp.add_argument("--seed", type=_seed, default=None, metavar="S",
                    help="run exactly this one seed (not with --seeds or --first-seed)")
    sp.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                    help="worker processes (default: one per core, at most twice the cores or 4; 1 runs in this process)")
    sp.add_argument("--minutes", type=positive_number, default=None, metavar="M",
                    help="wall-time budget: start no seed after M minutes (default: none)")
    sp.add_argument("--workload", choices=("multiturn", "mooncake"), default=None,
                    help="synthetic multi-turn chats or mutated windows of the bundled Mooncake trace "
                         "(default: alternate by seed)")
    sp.add_argument("--report", type=Path, default=None, metavar="PATH.json",
                    help="write every finished seed's result as JSON (also when interrupted)")
    sp.add_argument("--steps", type=_steps, default=200, metavar="M", help="steps per seed (default 200)")
    sp.add_argument("--components", type=_csv, default=None, metavar="LIST",
                    help="comma list of full, swa, mamba (default: rotate Full, Full+Mamba, Full+SWA, "
                         "Full+SWA+Mamba by seed)")
    sp.add_argument("--faults", type=_csv, default=None, metavar="LIST",
                    help="simulated faults: delay, reorder, duplicate, fail, lose (acks that come after "
                         "--ack-timeout, or never), allocfail (allocators refusing inside cache operations), "
                         "or none (default delay,reorder,duplicate,fail; none with --transfer threaded)")
    sp.add_argument("--ack-timeout", type=non_negative, default=24, metavar="STEPS",
                    help="time out a ticket whose ack has not come after this many steps (default 24, above "
                         "every seed's longest delay; 0: never; must be > 12 with lose)")
    sp.add_argument("--write-back", choices=("sync", "async"), default=None,
                    help="under write-back, whether eviction waits for the backups it starts (sync) or leaves "
                         "a victim until its backup's ack (async); default: by seed")
    sp.add_argument("--transfer", choices=("simulated", "threaded"), default="simulated",
                    help="simulated: the seeded, fault-injecting engine (reproducible step by step); threaded: "
                         "copies on worker threads posting acks to the cache's inbox (real concurrency: the "
                         "oracle stays exact but a seed's steps are not reproducible; transfer faults are "
                         "refused)")
    sp.add_argument("--page-size", type=_sim_page_size, default=None, metavar="N",
                    help=f"page size, at most {MAX_SIM_PAGE_SIZE} (default: 1 or 2 by seed)")
    sp.add_argument("--write-policy", choices=("write_back", "write_through"), default=None,
                    help="default: by seed")
    sp.add_argument("--chaos", type=_csv, default=_csv("reset,evict,evict_host,reclaim,backup,abort"),
                    metavar="LIST", help="operations injected between steps: reset, evict, evict_host, reclaim, "
                                         "backup, abort, or none (default all)")
    sp.add_argument("--keep", type=_indices, default=None, metavar="I,J,...",
                    help="replay only these requests of the seed's workload (what shrinking prints)")
    sp.add_argument("--crash-dir", type=Path, default=Path("unicache-crash"), metavar="DIR",
                    help="where crash dumps and shrunk scripts go")
    sp.add_argument("--full-check-every", type=int, default=16, metavar="K",
                    help="full sanity check and whole-tree oracle every K steps and at the end; the steps "
                         "between check only what they touched (default 16; 1: full after every step)")
    sp.add_argument("--no-shrink", action="store_true", help="do not shrink a failing seed")
    sp.add_argument("--inject", default=None, help=argparse.SUPPRESS)
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_metrics_options(sp, watchdog=False)

    from unicache.explore.command import add_explore_parser

    add_explore_parser(sub)
    sub.add_parser("repl", help="the lease debugging REPL (unicache repl --help)", add_help=False)
    return parser


def _run_repl(argv: list[str]) -> int:
    """Hand over to the REPL package (imported only now)."""
    import importlib

    try:
        module = importlib.import_module("unicache.repl")
    except ImportError as exc:
        print(f"unicache repl: the REPL is not available ({exc})", file=sys.stderr)
        return EXIT_USAGE
    entry = getattr(module, "main", None)
    if not callable(entry):
        print("unicache repl: unicache.repl has no main()", file=sys.stderr)
        return EXIT_USAGE
    result = entry(argv)
    return result if isinstance(result, int) else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `unicache` console script; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "repl":
        return _run_repl(args_list[1:])
    parser = _build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        with stop_on_signals() as stop:
            if args.command == "replay":
                from unicache.engine.commands import replay_command
                from unicache.engine.live import dump_on_signal

                with dump_on_signal() as dumps:
                    return replay_command(args, stop, dumps)
            if args.command == "explore":
                from unicache.explore.command import explore_command

                return explore_command(args, stop)
            from unicache.engine.commands import simulate_command
            from unicache.repl.script_check import write_script

            return simulate_command(args, stop, scripter=write_script)
    except KeyboardInterrupt:
        print(f"unicache {args.command}: interrupted twice, stopped at once (nothing written)", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())

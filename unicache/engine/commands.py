"""The bodies of `unicache replay` and `unicache simulate` (argument namespace -> run -> output)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from unicache.engine.capacity import CapacityError
from unicache.engine.interrupt import EXIT_INTERRUPTED, StopFlag
from unicache.engine.live import DumpRequest, LiveHooks
from unicache.engine.progress_log import ProgressLog
from unicache.engine.replay import (
    DEFAULT_FAULTS,
    DEFAULT_MAMBA_SLOTS,
    DEFAULT_MAX_DELAY,
    DEFAULT_MEAN_DELAY,
    DEFAULT_SWA_WINDOW,
    DEFAULT_TOKENS_PER_BLOCK,
    ReplayOptionError,
    ReplayOptions,
    cache_config,
    load_replay_trace,
    run_replay,
)
from unicache.engine.report import Report, healthy, render_report, write_report
from unicache.engine.scheduler import Scheduler
from unicache.engine.timeline import Timeline
from unicache.engine.transfers import resolve_transfer
from unicache.errors import ConfigError
from unicache.metrics.exporter import MetricsPortError, MetricsServer, SnapshotCollector, serve_metrics
from unicache.metrics.families import Family
from unicache.outputs import OutputPathError, OutputSet, OutputWriteError, write_atomic
from unicache.traces.loader import BUNDLED, MOONCAKE, MULTITURN_PREFIX, trace_format
from unicache.traces.request import Trace, TraceFormatError
from unicache.transfer.cuda import CudaUnavailableError
from unicache.transfer.simulated import FaultSpecError

if TYPE_CHECKING:
    from unicache.engine.simulate import ScriptWriter
    from unicache.engine.sweep import SeedOutcome, SweepResult

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
MAX_SEED = 2**32 - 1
"""The largest seed `simulate --seed` and `replay --seed` accept (`unicache.cli` parses to the same bound)."""
DEFAULT_SEEDS = 10
_T = TypeVar("_T")


def replay_options(args: argparse.Namespace) -> ReplayOptions:
    """`unicache replay` arguments -> options (raises ReplayOptionError / FaultSpecError).

    An option given explicitly that the run would ignore is refused
    (:func:`check_replay_combinations`); an option left out takes the default
    of the run it is in (``--faults``: ``delay,reorder`` on the simulated
    engine, none on the others).
    """
    check_replay_combinations(args)
    if args.faults is None:
        faults = DEFAULT_FAULTS if resolve_transfer(args.transfer) == "simulated" else ()
    else:
        faults = tuple(f for f in args.faults if f != "none")
    return ReplayOptions(
        trace=args.trace,
        requests=args.requests,
        start=args.start,
        tokens_per_block=args.tokens_per_block or DEFAULT_TOKENS_PER_BLOCK,
        components=tuple(args.components),
        page_size=args.page_size,
        device_tokens=args.device_tokens,
        hicache_ratio=args.hicache_ratio,
        mamba_slots=_given(args.mamba_slots, DEFAULT_MAMBA_SLOTS),
        swa_window=_given(args.swa_window, DEFAULT_SWA_WINDOW),
        write_policy=args.write_policy,
        load_back_threshold=args.load_back_threshold,
        transfer=args.transfer,
        faults=faults,
        mean_delay=_given(args.mean_delay, DEFAULT_MEAN_DELAY),
        max_delay=_given(args.max_delay, DEFAULT_MAX_DELAY),
        seed=args.seed,
        strict=args.strict,
        debug=args.debug,
        history=args.history,
        max_running=args.max_running,
        decode_per_step=args.decode_per_step,
        cache_chunk=args.cache_chunk,
        branch_states=not args.no_branch_states,
        data=not args.no_data,
        verify=not args.no_verify,
        check_every=args.check_every,
        crash_dir=args.crash_dir,
        memory_limit_gib=args.memory_limit,
        ack_timeout=args.ack_timeout,
    )


def _given(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def check_replay_combinations(args: argparse.Namespace) -> None:
    """Refuse (ReplayOptionError) an option given explicitly that this run would ignore.

    ``--faults`` (other than none) needs the simulated engine (``--transfer
    auto`` picks cuda when a GPU is present); ``--mean-delay`` needs the delay
    fault, ``--max-delay`` the delay or lose fault; ``--mamba-slots`` and
    ``--no-branch-states`` need mamba, ``--swa-window`` swa in ``--components``;
    ``--tokens-per-block`` needs a Mooncake trace. ``--no-verify`` with
    ``--no-data`` is accepted: no data means nothing to verify, as asked.
    """
    faults = None if args.faults is None else tuple(f for f in args.faults if f != "none")
    engine = resolve_transfer(args.transfer)
    if faults and engine != "simulated":
        picked = f" (--transfer auto picked {engine}: a GPU is present)" if args.transfer == "auto" else ""
        raise ReplayOptionError(f"--faults {','.join(faults)}: the {engine} transfer engine injects no faults"
                                f"{picked}; pass --transfer simulated to inject them, or drop --faults")
    injected = (DEFAULT_FAULTS if engine == "simulated" else ()) if faults is None else faults
    for option, value, needs in (("--mean-delay", args.mean_delay, ("delay",)),
                                 ("--max-delay", args.max_delay, ("delay", "lose"))):
        if value is not None and not set(needs) & set(injected):
            on = f"the {engine} transfer engine injects none" if engine != "simulated" else \
                f"the faults are {','.join(injected) or 'none'}"
            raise ReplayOptionError(f"{option} {value}: only the {' or '.join(needs)} fault delays copies and "
                                    f"{on}; drop {option} or add {needs[0]} to --faults (with --transfer simulated)")
    components = tuple(args.components)
    for option, given, component in (("--mamba-slots", args.mamba_slots is not None, "mamba"),
                                     ("--no-branch-states", args.no_branch_states, "mamba"),
                                     ("--swa-window", args.swa_window is not None, "swa")):
        if given and component not in components:
            raise ReplayOptionError(f"{option}: --components {','.join(components)} has no {component}; "
                                    f"drop {option} or add {component} to --components")
    if args.tokens_per_block is not None:
        kind = trace_format(args.trace)
        if kind != MOONCAKE:
            raise ReplayOptionError(f"--tokens-per-block {args.tokens_per_block}: trace {args.trace} is a {kind} "
                                    f"trace, not Mooncake block ids, so it has no blocks to scale; "
                                    f"drop --tokens-per-block")


def _sim_faults(args: argparse.Namespace) -> tuple[str, ...]:
    """`--faults` as given, or by default every transfer fault but ``lose`` (none with ``--transfer threaded``)."""
    from unicache.engine.simulate import DEFAULT_FAULTS

    if args.faults is None:
        return DEFAULT_FAULTS if args.transfer == "simulated" else ()
    return tuple(f for f in args.faults if f != "none")


def _usage(err: Console, command: str, exc: BaseException) -> int:
    err.print(f"[bold red]unicache {command}:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return EXIT_USAGE


def check_replay_outputs(args: argparse.Namespace) -> None:
    """Refuse --report, --plot, --crash-dir before the run (OutputPathError; see :mod:`unicache.outputs`).

    Each must be writable, and no two of them, nor one and a ``--trace`` file, the same file.
    """
    paths = OutputSet()
    if args.trace != BUNDLED and not args.trace.startswith(MULTITURN_PREFIX):
        paths.input(args.trace, "--trace")
    if args.report is not None:
        paths.file(args.report, "--report")
    if args.plot is not None:
        paths.file(args.plot, "--plot")
        check_plot_format(args.plot)
    paths.directory(args.crash_dir, "--crash-dir")


def check_simulate_outputs(args: argparse.Namespace) -> None:
    """Refuse --crash-dir and --report before the run, as :func:`check_replay_outputs` does."""
    paths = OutputSet()
    paths.directory(args.crash_dir, "--crash-dir")
    if args.report is not None:
        paths.file(args.report, "--report")


def _not_written(err: Console, command: str, exc: OutputPathError | OutputWriteError) -> None:
    err.print(f"[bold red]unicache {command}:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)


def check_plot_format(path: Path) -> None:
    """Refuse a --plot suffix matplotlib cannot write (before the run, not after)."""
    from matplotlib.figure import Figure

    kinds = Figure().canvas.get_supported_filetypes()
    suffix = path.suffix.lstrip(".").lower()
    if suffix not in kinds:
        raise OutputPathError("--plot", path, f"unknown image format {suffix or '(no suffix)'!r} "
                                              f"(choose from {', '.join(sorted(kinds))})")


def metrics_address(args: argparse.Namespace) -> str:
    """``--metrics-addr`` (default 127.0.0.1), refused (ValueError) without ``--metrics-port``."""
    addr = getattr(args, "metrics_addr", None)
    if addr is not None and getattr(args, "metrics_port", None) is None:
        raise ValueError(f"--metrics-addr {addr}: there is no endpoint without --metrics-port; give --metrics-port "
                         f"PORT or drop --metrics-addr")
    if addr is not None and not addr.strip():
        raise ValueError("--metrics-addr: an empty address (give 127.0.0.1, 0.0.0.0 or a host name)")
    return "127.0.0.1" if addr is None else str(addr)


def start_metrics(args: argparse.Namespace, err: Console, command: str) -> MetricsServer | None:
    """Bind the ``--metrics-port`` endpoint (MetricsPortError when it cannot) and say where it is."""
    if getattr(args, "metrics_port", None) is None:
        return None
    server = serve_metrics(args.metrics_port, metrics_address(args))
    print(f"unicache {command}: metrics at {server.url}", file=err.file, flush=True)
    return server


def replay_command(args: argparse.Namespace, stop: StopFlag | None = None, dumps: DumpRequest | None = None) -> int:
    """`unicache replay`; ``stop`` (set by SIGINT/SIGTERM) ends the run early with exit 130.

    ``dumps`` (set by SIGUSR1, see `unicache.engine.live`) asks for a live dump
    into ``--crash-dir`` between two steps; the run carries on.
    """
    err = Console(stderr=True)
    try:
        opts = replay_options(args)
        metrics_address(args)
        check_replay_outputs(args)
        trace = load_replay_trace(opts)
        cache_config(opts, trace)
    except (ReplayOptionError, FaultSpecError, OutputPathError, TraceFormatError, FileNotFoundError,
            ConfigError, CudaUnavailableError, CapacityError, ValueError) as exc:
        return _usage(err, "replay", exc)
    try:
        server = start_metrics(args, err, "replay")
    except MetricsPortError as exc:
        return _usage(err, "replay", exc)
    try:
        return _replay(args, opts, trace, err, stop, LiveHooks(
            collector=None if server is None else server.collector, lease_age_limit=args.lease_age_limit,
            dumps=dumps, dump_dir=args.crash_dir, seed=opts.seed, reproduce=opts.command()))
    finally:
        if server is not None:
            server.close()


def _replay(args: argparse.Namespace, opts: ReplayOptions, trace: Trace, err: Console, stop: StopFlag | None,
            live: LiveHooks) -> int:
    timelines: list[Timeline] = []
    stop = stop if stop is not None else StopFlag()
    try:
        if args.no_progress:
            report = run_replay(opts, trace=trace, timeline_out=timelines, stop=stop, live=live)
        elif not err.is_terminal:
            log = ProgressLog("replay", "requests", len(trace), err.file)

            def log_progress(sched: Scheduler) -> None:
                log.update(sched.stats.finished, f"step {sched.step_no}")

            report = run_replay(opts, trace=trace, progress=log_progress, timeline_out=timelines, stop=stop,
                                live=live)
        else:
            with Progress(TextColumn("[bold]replay"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("requests · step {task.fields[step]} · loading {task.fields[loading]}"),
                          TimeElapsedColumn(), console=err, transient=False) as bar:
                task = bar.add_task("replay", total=len(trace), step=0, loading=0)

                def progress(sched: Scheduler) -> None:
                    bar.update(task, completed=sched.stats.finished, total=sched.total,
                               step=sched.step_no, loading=len(sched.loading))

                report = run_replay(opts, trace=trace, progress=progress, timeline_out=timelines, stop=stop,
                                    live=live)
    except (ConfigError, CudaUnavailableError) as exc:
        return _usage(err, "replay", exc)
    written: list[str] = []
    failed = False
    try:
        if args.report is not None:
            write_report(report, args.report)
            written.append(f"report: {args.report}")
    except (OutputPathError, OutputWriteError) as exc:
        _not_written(err, "replay", exc)
        failed = True
    try:
        if args.plot is not None and timelines:
            from unicache.engine.plot import plot_timeline

            plot_timeline(timelines[0], args.plot, title=f"{report['trace']} — {report['configuration']}",
                          interrupted=_interruption(report))
            written.append(f"plot: {args.plot}")
    except (OutputPathError, OutputWriteError) as exc:
        _not_written(err, "replay", exc)
        failed = True
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        render_report(report, Console())
        for line in written:
            print(line)
    if report.get("crash_dump"):
        print(f"unicache: crash dump written to {report['crash_dump']}", file=sys.stderr)
    if report.get("crash_dump_error"):
        print(f"unicache replay: crash dump not written: {report['crash_dump_error']}", file=sys.stderr)
    if report.get("interrupted"):
        print(f"unicache replay: interrupted by {report.get('interrupted_by')}", file=sys.stderr)
    if failed:
        return EXIT_FAILED
    if report.get("interrupted"):
        return EXIT_INTERRUPTED
    return EXIT_OK if healthy(report) else EXIT_FAILED


def _interruption(report: Report) -> str | None:
    """What the plot says of a run that did not finish: the signal and how far it got (None: it finished)."""
    if not report.get("interrupted"):
        return None
    return (f"interrupted by {report.get('interrupted_by')} after {report.get('requests')} of "
            f"{report.get('requests_in_trace')} requests (step {report.get('steps')})")


def simulate_seeds(args: argparse.Namespace) -> list[int]:
    """The seeds `unicache simulate` runs: ``--seed``, or ``--seeds`` from ``--first-seed`` (default 10 from 0).

    Refused (ValueError): ``--seed`` with either of the others (it would
    ignore them), and a range whose last seed ``--seed`` would refuse (its
    reproduce command could not run).
    """
    if args.seed is not None:
        given = [option for option, value in (("--seeds", args.seeds), ("--first-seed", args.first_seed))
                 if value is not None]
        if given:
            raise ValueError(f"--seed {args.seed} runs that one seed and would ignore {' and '.join(given)}; "
                             f"give --seed alone, or --first-seed and --seeds")
        return [args.seed]
    first = 0 if args.first_seed is None else args.first_seed
    count = DEFAULT_SEEDS if args.seeds is None else args.seeds
    last = first + count - 1
    if last > MAX_SEED:
        raise ValueError(f"--first-seed {first} --seeds {count} would run seeds up to {last}, past the largest "
                         f"seed {MAX_SEED} (what --seed accepts); use --seeds {MAX_SEED - first + 1} or a lower "
                         f"--first-seed")
    return list(range(first, last + 1))


def simulate_command(args: argparse.Namespace, stop: StopFlag | None = None, *,
                     scripter: ScriptWriter | None = None) -> int:
    """`unicache simulate`; ``stop`` (set by SIGINT/SIGTERM) reports the finished seeds, exit 130.

    ``scripter`` writes a shrunk failure as a REPL script (the CLI passes the REPL's; None: no script).
    """
    from unicache.engine.simulate import SimulateOptions, SimulationError
    from unicache.engine.sweep import WorkerDiedError, default_jobs, render_sweep, run_sweep, sweep_report_bytes

    err = Console(stderr=True)
    try:
        seeds = simulate_seeds(args)
        opts = SimulateOptions(steps=args.steps, components=tuple(args.components) if args.components else None,
                               faults=_sim_faults(args), page_size=args.page_size,
                               write_policy=args.write_policy, inject=args.inject,
                               chaos=tuple(c for c in args.chaos if c != "none"), keep=args.keep,
                               workload=args.workload, full_check_every=args.full_check_every,
                               ack_timeout=args.ack_timeout, transfer=args.transfer,
                               sync_write_back=None if args.write_back is None else args.write_back == "sync")
        check_simulate_outputs(args)
        metrics_address(args)
    except (SimulationError, FaultSpecError, OutputPathError, ValueError) as exc:
        return _usage(err, "simulate", exc)
    try:
        server = start_metrics(args, err, "simulate")
    except MetricsPortError as exc:
        return _usage(err, "simulate", exc)
    jobs = min(args.jobs or default_jobs(), len(seeds))
    try:
        on_outcome = None if server is None else sweep_publisher(server.collector)
        result = run_sweep(seeds, opts, crash_dir=args.crash_dir, jobs=jobs, minutes=args.minutes,
                           shrink_failures=not args.no_shrink, stop=stop if stop is not None else StopFlag(),
                           progress=not args.no_progress, console=err, scripter=scripter, on_outcome=on_outcome)
    except WorkerDiedError as exc:
        err.print(f"[bold red]unicache simulate:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_FAILED
    finally:
        if server is not None:
            server.close()
    out = Console()
    if not out.is_terminal:
        out.width = max(out.width, 140)
    render_sweep(result, opts, out)
    if args.report is not None:
        try:
            write_atomic(args.report, sweep_report_bytes(result), "--report")
        except (OutputPathError, OutputWriteError) as exc:
            _not_written(err, "simulate", exc)
            return EXIT_FAILED
        print(f"report: {args.report}")
    if result.stopped_by is not None:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if result.failures else EXIT_OK


def sweep_publisher(collector: SnapshotCollector) -> Callable[[SeedOutcome, SweepResult], None]:
    """What `simulate --metrics-port` publishes after every finished seed: the sweep's progress.

    Seeds run in worker processes, each on its own cache, so the endpoint
    serves the sweep (seeds by outcome, executed steps), not one cache.
    """

    def publish(outcome: SeedOutcome, result: SweepResult) -> None:
        seeds = Family("unicache_simulate_seeds", "counter", "Seeds finished, by outcome.", ("outcome",))
        failed = len(result.failures)
        seeds.add(("passed",), len(result.outcomes) - failed)
        seeds.add(("failed",), failed)
        steps = Family("unicache_simulate_executed_steps", "counter", "Scheduler steps the finished seeds ran.")
        steps.add((), result.executed_steps)
        requested = Family("unicache_simulate_seeds_requested", "gauge", "Seeds this sweep was asked to run.")
        requested.add((), result.requested)
        collector.replace([seeds, steps, requested])

    return publish

"""The bodies of `unicache replay` and `unicache simulate` (argument namespace -> run -> output)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from unicache.engine.interrupt import EXIT_INTERRUPTED, StopFlag
from unicache.engine.progress_log import ProgressLog
from unicache.engine.outputs import OutputPathError, check_output_dir, check_output_file, write_atomic
from unicache.engine.replay import (
    DEFAULT_TOKENS_PER_BLOCK,
    ReplayOptionError,
    ReplayOptions,
    cache_config,
    load_replay_trace,
    run_replay,
)
from unicache.engine.report import healthy, render_report, write_report
from unicache.engine.scheduler import Scheduler
from unicache.engine.timeline import Timeline
from unicache.errors import ConfigError
from unicache.traces.request import TraceFormatError
from unicache.transfer.cuda import CudaUnavailableError
from unicache.transfer.simulated import FaultSpecError

if TYPE_CHECKING:
    from unicache.engine.simulate import ScriptWriter

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def replay_options(args: argparse.Namespace) -> ReplayOptions:
    """`unicache replay` arguments -> options (raises ReplayOptionError / FaultSpecError)."""
    return ReplayOptions(
        trace=args.trace,
        requests=args.requests,
        start=args.start,
        tokens_per_block=args.tokens_per_block or DEFAULT_TOKENS_PER_BLOCK,
        components=tuple(args.components),
        page_size=args.page_size,
        device_tokens=args.device_tokens,
        hicache_ratio=args.hicache_ratio,
        mamba_slots=args.mamba_slots,
        swa_window=args.swa_window,
        write_policy=args.write_policy,
        load_back_threshold=args.load_back_threshold,
        transfer=args.transfer,
        faults=tuple(f for f in args.faults if f != "none"),
        mean_delay=args.mean_delay,
        max_delay=args.max_delay,
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
    """Refuse unwritable --report, --plot, --crash-dir before the run (OutputPathError)."""
    if args.report is not None:
        check_output_file(args.report, "--report")
    if args.plot is not None:
        check_output_file(args.plot, "--plot")
        check_plot_format(args.plot)
    check_output_dir(args.crash_dir, "--crash-dir")


def check_plot_format(path: Path) -> None:
    """Refuse a --plot suffix matplotlib cannot write (before the run, not after)."""
    from matplotlib.figure import Figure

    kinds = Figure().canvas.get_supported_filetypes()
    suffix = path.suffix.lstrip(".").lower()
    if suffix not in kinds:
        raise OutputPathError(f"--plot {path}: unknown image format {suffix or '(no suffix)'!r} "
                              f"(choose from {', '.join(sorted(kinds))})")


def replay_command(args: argparse.Namespace, stop: StopFlag | None = None) -> int:
    """`unicache replay`; ``stop`` (set by SIGINT/SIGTERM) ends the run early with exit 130."""
    err = Console(stderr=True)
    try:
        opts = replay_options(args)
        check_replay_outputs(args)
        trace = load_replay_trace(opts)
        cache_config(opts, trace)
    except (ReplayOptionError, FaultSpecError, OutputPathError, TraceFormatError, FileNotFoundError,
            ConfigError, CudaUnavailableError, ValueError) as exc:
        return _usage(err, "replay", exc)
    timelines: list[Timeline] = []
    stop = stop if stop is not None else StopFlag()
    try:
        if args.no_progress:
            report = run_replay(opts, trace=trace, timeline_out=timelines, stop=stop)
        elif not err.is_terminal:
            log = ProgressLog("replay", "requests", len(trace), err.file)

            def log_progress(sched: Scheduler) -> None:
                log.update(sched.stats.finished, f"step {sched.step_no}")

            report = run_replay(opts, trace=trace, progress=log_progress, timeline_out=timelines, stop=stop)
        else:
            with Progress(TextColumn("[bold]replay"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("requests · step {task.fields[step]} · loading {task.fields[loading]}"),
                          TimeElapsedColumn(), console=err, transient=False) as bar:
                task = bar.add_task("replay", total=len(trace), step=0, loading=0)

                def progress(sched: Scheduler) -> None:
                    bar.update(task, completed=sched.stats.finished, total=sched.total,
                               step=sched.step_no, loading=len(sched.loading))

                report = run_replay(opts, trace=trace, progress=progress, timeline_out=timelines, stop=stop)
    except (ConfigError, CudaUnavailableError) as exc:
        return _usage(err, "replay", exc)
    if args.report is not None:
        write_report(report, args.report)
    if args.plot is not None and timelines:
        from unicache.engine.plot import plot_timeline

        plot_timeline(timelines[0], args.plot, title=f"{report['trace']} — {report['configuration']}")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        render_report(report, Console())
        if args.report is not None:
            print(f"report: {args.report}")
        if args.plot is not None:
            print(f"plot: {args.plot}")
    if report.get("crash_dump"):
        print(f"unicache: crash dump written to {report['crash_dump']}", file=sys.stderr)
    if report.get("interrupted"):
        print(f"unicache replay: interrupted by {report.get('interrupted_by')}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if healthy(report) else EXIT_FAILED


def simulate_command(args: argparse.Namespace, stop: StopFlag | None = None, *,
                     scripter: ScriptWriter | None = None) -> int:
    """`unicache simulate`; ``stop`` (set by SIGINT/SIGTERM) reports the finished seeds, exit 130.

    ``scripter`` writes a shrunk failure as a REPL script (the CLI passes the REPL's; None: no script).
    """
    from unicache.engine.simulate import SimulateOptions, SimulationError
    from unicache.engine.sweep import WorkerDiedError, default_jobs, render_sweep, run_sweep, sweep_report_bytes

    err = Console(stderr=True)
    seeds = [args.seed] if args.seed is not None else list(range(args.first_seed, args.first_seed + args.seeds))
    try:
        opts = SimulateOptions(steps=args.steps, components=tuple(args.components) if args.components else None,
                               faults=_sim_faults(args), page_size=args.page_size,
                               write_policy=args.write_policy, inject=args.inject,
                               chaos=tuple(c for c in args.chaos if c != "none"), keep=args.keep,
                               workload=args.workload, full_check_every=args.full_check_every,
                               ack_timeout=args.ack_timeout, transfer=args.transfer,
                               sync_write_back=None if args.write_back is None else args.write_back == "sync")
        check_output_dir(args.crash_dir, "--crash-dir")
        if args.report is not None:
            check_output_file(args.report, "--report")
    except (SimulationError, FaultSpecError, OutputPathError, ValueError) as exc:
        return _usage(err, "simulate", exc)
    jobs = min(args.jobs or default_jobs(), len(seeds))
    try:
        result = run_sweep(seeds, opts, crash_dir=args.crash_dir, jobs=jobs, minutes=args.minutes,
                           shrink_failures=not args.no_shrink, stop=stop if stop is not None else StopFlag(),
                           progress=not args.no_progress, console=err, scripter=scripter)
    except WorkerDiedError as exc:
        err.print(f"[bold red]unicache simulate:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_FAILED
    out = Console()
    if not out.is_terminal:
        out.width = max(out.width, 140)
    render_sweep(result, opts, out)
    if args.report is not None:
        write_atomic(args.report, sweep_report_bytes(result))
        print(f"report: {args.report}")
    if result.stopped_by is not None:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if result.failures else EXIT_OK

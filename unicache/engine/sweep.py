"""Run many simulation seeds: in parallel processes, within a wall-time budget, stoppable by a signal.

:func:`run_sweep` runs seeds with ``jobs`` worker processes (``jobs=1`` runs in
this process), starts no new seed once ``minutes`` have passed or a stop signal
arrived, and returns a :class:`SweepResult`: one :class:`SeedOutcome` per
finished seed (a failing seed is dumped, shrunk and scripted inside its worker),
and the throughput. A seed cut short by a stop is not reported. A stop
terminates the workers; what finished is kept.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from unicache.engine.interrupt import StopFlag
from unicache.engine.progress_log import ProgressLog
from unicache.engine.simulate import Scenario, ScriptWriter, SimulateOptions, run_scenario, scenario_for, shrink
from unicache.engine.workloads import bundled_records
from unicache.outputs import OutputPathError, OutputWriteError


class SweepStopped(BaseException):
    """Raised inside an in-process seed when a stop signal arrived (the seed is dropped)."""


class WorkerDiedError(RuntimeError):
    """A worker process ended without a result (killed from outside, or out of memory)."""


@dataclass(slots=True)
class SeedOutcome:
    """What one finished seed reports (plain data, so it crosses process boundaries)."""

    scenario: Scenario
    steps: int
    error_type: str | None
    error: str | None
    stats: dict[str, object]
    seconds: float
    cpu_seconds: float = 0.0
    dump: str | None = None
    script: str | None = None
    shrunk: Scenario | None = None
    output_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error_type is None

    @property
    def executed_steps(self) -> int:
        """Scheduler steps the seed ran (its end-of-run drain included)."""
        steps = self.stats.get("steps", 0)
        return steps if isinstance(steps, int) else 0

    @property
    def reached_step_limit(self) -> bool:
        """The seed ran its loop up to ``--steps`` (not cut short because its workload ran out)."""
        return self.steps >= self.scenario.steps

    def to_json(self) -> dict[str, object]:
        return {"seed": self.scenario.seed, "scenario": self.scenario.describe(), "ok": self.ok,
                "error_type": self.error_type, "error": self.error, "steps": self.steps,
                "stats": self.stats, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3), "reproduce": self.scenario.command(),
                "crash_dump": self.dump, "script": self.script, "output_errors": self.output_errors,
                "shrunk": None if self.shrunk is None else self.shrunk.command()}


@dataclass(slots=True)
class SweepResult:
    """Finished seeds (in seed order), how many were asked for, and the wall time."""

    outcomes: list[SeedOutcome] = field(default_factory=list)
    requested: int = 0
    wall_seconds: float = 0.0
    jobs: int = 1
    stopped_by: str | None = None
    out_of_time: bool = False

    @property
    def failures(self) -> list[SeedOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def executed_steps(self) -> int:
        return sum(o.executed_steps for o in self.outcomes)

    def steps_per_minute(self) -> float:
        """Seeds x executed steps per wall minute, over every process."""
        return 60.0 * self.executed_steps / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def steps_per_cpu_minute(self) -> float:
        """Executed steps per minute of the seeds' own CPU time (one core's rate, whatever else ran)."""
        cpu = sum(o.cpu_seconds for o in self.outcomes)
        return 60.0 * self.executed_steps / cpu if cpu > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        n = len(self.outcomes)
        return {"seeds_requested": self.requested, "seeds_finished": n, "failures": len(self.failures),
                "jobs": self.jobs, "wall_seconds": round(self.wall_seconds, 3),
                "executed_steps": self.executed_steps,
                "mean_executed_steps": round(self.executed_steps / n, 1) if n else 0.0,
                "min_executed_steps": min((o.executed_steps for o in self.outcomes), default=0),
                "seeds_short_of_step_limit": sum(1 for o in self.outcomes if not o.reached_step_limit),
                "seed_steps_per_minute": round(self.steps_per_minute(), 1),
                "seed_steps_per_cpu_minute": round(self.steps_per_cpu_minute(), 1),
                "interrupted": self.stopped_by is not None, "interrupted_by": self.stopped_by,
                "out_of_time": self.out_of_time, "seeds": [o.to_json() for o in self.outcomes]}


def run_seed(seed: int, opts: SimulateOptions, crash_dir: Path, shrink_failures: bool,
             stop: StopFlag | None = None, scripter: ScriptWriter | None = None) -> SeedOutcome:
    """Run one seed; a failure is dumped to ``crash_dir``, shrunk and (given a ``scripter``) written as a REPL script.

    ``scripter`` crosses into worker processes, so it must be a module-level function.
    """

    def check_stop(step: int) -> None:
        if stop:
            raise SweepStopped

    sc = scenario_for(seed, opts)
    t0 = time.perf_counter()
    c0 = time.process_time()
    r = run_scenario(sc, dump_dir=crash_dir, on_step=check_stop if stop is not None else None)
    out = SeedOutcome(sc, r.steps, None if r.error is None else type(r.error).__name__,
                      None if r.error is None else str(r.error), r.stats, 0.0,
                      dump=None if r.dump is None else str(r.dump), output_errors=list(r.output_errors))
    if r.error is not None and shrink_failures:
        out.shrunk = shrink(r)
        minimal = run_scenario(out.shrunk, record=True)
        if minimal.oplog is not None and scripter is not None:
            try:
                out.script = str(scripter(minimal, crash_dir / f"unicache-sim-seed{seed}.repl"))
            except (OutputPathError, OutputWriteError) as failed:
                out.output_errors.append(str(failed))
    out.seconds = time.perf_counter() - t0
    out.cpu_seconds = time.process_time() - c0
    return out


def init_worker() -> None:
    """Workers leave signals to the parent, use one torch thread each and freeze what they start with."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    import torch

    torch.set_num_threads(1)
    _freeze_startup()


def _freeze_startup() -> None:
    """Load what every seed shares (the bundled Mooncake records), then move everything alive to the
    collector's permanent generation.

    Each seed ends with a full ``gc.collect()`` (leaked leases are found by
    their finalizers); with torch's and the trace's ~175k objects frozen it
    scans only the seed's own objects: about 0.1 s less per seed.
    """
    bundled_records()
    gc.collect()
    gc.freeze()


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_sweep(seeds: list[int], opts: SimulateOptions, *, crash_dir: Path, jobs: int = 1,
              minutes: float | None = None, shrink_failures: bool = True, stop: StopFlag | None = None,
              progress: bool = False, console: Console | None = None,
              scripter: ScriptWriter | None = None,
              on_outcome: Callable[[SeedOutcome, SweepResult], None] | None = None) -> SweepResult:
    """Run ``seeds`` (see the module docstring); outcomes come back in seed order.

    ``on_outcome`` is called after each finished seed (metrics publish the sweep's progress).
    """
    result = SweepResult(requested=len(seeds), jobs=jobs)
    deadline = None if minutes is None else time.monotonic() + 60.0 * minutes
    t0 = time.perf_counter()
    console = console or Console(stderr=True)
    log = ProgressLog("simulate", "seeds", len(seeds), console.file) if progress and not console.is_terminal else None
    with Progress(console=console, disable=not progress or log is not None, transient=True) as bar:
        task = bar.add_task("simulate", total=len(seeds))
        runner = _run_serial if jobs <= 1 else _run_parallel
        for outcome in runner(seeds, opts, crash_dir, shrink_failures, jobs, deadline, stop, result, scripter):
            result.outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome, result)
            bar.update(task, advance=1)
            if log is not None:
                log.update(len(result.outcomes), f"seed {outcome.scenario.seed} {'passed' if outcome.ok else 'FAILED'}")
    result.wall_seconds = time.perf_counter() - t0
    result.outcomes.sort(key=lambda o: o.scenario.seed)
    if stop:
        result.stopped_by = stop.signal_name
    return result


def _time_left(deadline: float | None, result: SweepResult) -> bool:
    if deadline is not None and time.monotonic() >= deadline:
        result.out_of_time = True
        return False
    return True


def _run_serial(seeds: list[int], opts: SimulateOptions, crash_dir: Path, shrink_failures: bool, jobs: int,
                deadline: float | None, stop: StopFlag | None, result: SweepResult,
                scripter: ScriptWriter | None) -> Iterator[SeedOutcome]:
    """In this process, on one torch thread like a worker (the caller's setting is restored)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    _freeze_startup()
    try:
        for seed in seeds:
            if stop or not _time_left(deadline, result):
                return
            try:
                yield run_seed(seed, opts, crash_dir, shrink_failures, stop, scripter)
            except SweepStopped:
                return
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads)


def _run_parallel(seeds: list[int], opts: SimulateOptions, crash_dir: Path, shrink_failures: bool, jobs: int,
                  deadline: float | None, stop: StopFlag | None, result: SweepResult,
                scripter: ScriptWriter | None) -> Iterator[SeedOutcome]:
    ctx = multiprocessing.get_context("spawn")
    todo = iter(seeds)
    pending: set[Future[SeedOutcome]] = set()
    pool = ProcessPoolExecutor(max_workers=max(1, min(jobs, len(seeds))), mp_context=ctx, initializer=init_worker)
    try:
        while True:
            while len(pending) < 2 * jobs and not stop and _time_left(deadline, result):
                seed = next(todo, None)
                if seed is None:
                    break
                pending.add(pool.submit(run_seed, seed, opts, crash_dir, shrink_failures, None, scripter))
            if not pending or stop:
                break
            done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for fut in done:
                try:
                    outcome = fut.result()
                except BrokenProcessPool:
                    if stop:
                        return
                    raise WorkerDiedError("a simulate worker process died without a result (killed from "
                                          "outside or out of memory); rerun with --jobs 1 to see the seed") from None
                yield outcome
    finally:
        if stop:
            for child in multiprocessing.active_children():
                child.terminate()
        try:
            pool.shutdown(wait=True, cancel_futures=True)
        except BrokenProcessPool:
            pass


def render_sweep(result: SweepResult, opts: SimulateOptions, console: Console) -> None:
    """The per-seed table (failures and at most 50 seeds), the failures with reproduce commands, the totals."""
    shown = result.outcomes if len(result.outcomes) <= 50 else result.failures
    table = Table(title=f"unicache simulate — {len(result.outcomes)} of {result.requested} seed(s), "
                        f"{opts.steps} steps max",
                  caption="lb: load-backs · pins: most leases on one node · 2-comp: nodes pinned by two components")
    for col in ("seed", "workload", "components", "ps", "policy", "steps", "done", "lb", "failed", "stale+dup",
                "resets", "pins", "2-comp", "result"):
        table.add_column(col, justify="left" if col in ("workload", "components", "policy", "result") else "right",
                         no_wrap=True)
    for r in shown:
        s = r.stats
        table.add_row(str(r.scenario.seed), r.scenario.workload, "+".join(r.scenario.components),
                      str(r.scenario.page_size), r.scenario.write_policy.replace("write_", "w-"), str(s["steps"]),
                      str(s["finished"]), str(s["load_backs"]), str(s["failed_transfers"]),
                      f"{s['stale_acks']}+{s['duplicate_acks']}", str(s["resets"]),
                      str(s["max_leases_on_one_node"]), str(s["nodes_pinned_by_two_components"]),
                      "ok" if r.ok else f"[bold red]{r.error_type}[/]")
    if shown:
        console.print(table)
    for r in result.failures:
        sc = r.scenario
        message = escape(r.error or "")
        console.print(f"[bold red]seed {sc.seed} failed at step {r.steps}:[/] {r.error_type}: {message}",
                      highlight=False)
        console.print(f"  reproduce: {sc.command()}", highlight=False)
        if r.dump is not None:
            console.print(f"  crash dump: {r.dump}  (unicache repl --dump {r.dump})", highlight=False)
        if r.shrunk is not None:
            kept = "all" if r.shrunk.keep is None else str(len(r.shrunk.keep))
            console.print(f"  shrunk: {r.shrunk.steps} steps, requests kept {kept}, faults "
                          f"{','.join(r.shrunk.faults) or 'none'}, chaos {','.join(r.shrunk.chaos) or 'none'}",
                          highlight=False)
        if r.script is not None:
            console.print(f"  REPL script: {r.script}  (unicache repl --script {r.script})", highlight=False)
        for failed in r.output_errors:
            console.print(f"  [bold red]not written:[/] {escape(failed)}", highlight=False)
    summary = result.to_json()
    console.print(f"{summary['seeds_finished']} seed(s) in {summary['wall_seconds']} s on {result.jobs} "
                  f"process(es): {summary['executed_steps']} executed steps (mean {summary['mean_executed_steps']}, "
                  f"min {summary['min_executed_steps']} a seed; {summary['seeds_short_of_step_limit']} short of "
                  f"--steps {opts.steps}), {summary['seed_steps_per_minute']} seed-steps/minute "
                  f"({summary['seed_steps_per_cpu_minute']} per CPU-minute of the seeds)", highlight=False)
    if result.stopped_by is not None:
        console.print(f"[bold yellow]interrupted by {result.stopped_by}:[/] {len(result.outcomes)} finished "
                      f"seed(s) reported, unfinished ones dropped")
    elif result.out_of_time:
        console.print(f"[yellow]wall-time budget reached:[/] {len(result.outcomes)} of {result.requested} "
                      f"seed(s) run")
    if not result.failures and result.outcomes:
        console.print(f"[bold green]all {len(result.outcomes)} seed(s) passed[/]")


def sweep_report_bytes(result: SweepResult) -> bytes:
    return (json.dumps(result.to_json(), indent=2) + "\n").encode("utf-8")

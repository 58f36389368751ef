"""`unicache replay`: run a trace through a configured cache and report what happened.

:class:`ReplayOptions` holds every knob of the command; :func:`build_replay`
turns them into a cache, transfer engine and scheduler; :func:`run_replay`
steps the scheduler to the end (with an optional progress callback), runs the
final checks (sanity, whole-tree data oracle, no lease left live), and
returns the report. Any error inside the loop — a corruption, a lease
error, an invariant — stops the run, writes a crash dump and is reported
(``errors``/``corruptions`` > 0); it is never swallowed silently.
"""

from __future__ import annotations

import gc
import math
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import torch

from unicache.cache import UniCache
from unicache.config import CacheConfig, WritePolicy
from unicache.engine.budget import (
    DEFAULT_MEMORY_LIMIT_GIB,
    GIB,
    MAX_HISTORY,
    MAX_MEMORY_LIMIT_GIB,
    cache_bytes,
    describe_bytes,
)
from unicache.engine.capacity import check_capacity
from unicache.engine.config import EngineConfig
from unicache.engine.crashdump import write_engine_dump
from unicache.engine.errors import CorruptionError
from unicache.engine.interrupt import StopFlag
from unicache.engine.live import LiveHooks
from unicache.engine.reference import ReferenceModel
from unicache.engine.report import Report
from unicache.engine.scheduler import Scheduler
from unicache.engine.timeline import Timeline
from unicache.engine.transfers import bind_transfer, make_transfer, resolve_transfer
from unicache.outputs import OutputPathError, OutputWriteError
from unicache.traces.loader import MOONCAKE, TraceSpec, load_trace, trace_format
from unicache.traces.mooncake import MOONCAKE_BLOCK_TOKENS
from unicache.traces.request import Trace
from unicache.transfer.simulated import FaultSpec
from unicache.tree.keys import token_bytes_for

COMPONENT_NAMES: tuple[str, ...] = ("full", "swa", "mamba")
DEFAULT_TOKENS_PER_BLOCK = 512
DEFAULT_FAULTS: tuple[str, ...] = ("delay", "reorder")
"""The simulated engine's faults when none are given (other engines inject none)."""
DEFAULT_MEAN_DELAY = 16.0
DEFAULT_MAX_DELAY = 64
DEFAULT_MAMBA_SLOTS = 64
DEFAULT_SWA_WINDOW = 64
DEFAULT_DECODE_PER_STEP = 4
BLOCK_TOKENS_PER_DECODE_TOKEN = 4


class ReplayOptionError(ValueError):
    """A replay option is invalid or inconsistent with another; the message names it."""

DEFAULT_ACK_TIMEOUT = 256
"""Steps a replay waits for an ack before timing its ticket out (4x the default ``--max-delay``)."""
MAX_ACK_TIMEOUT = 1_000_000

@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """Everything `unicache replay` can be told (defaults = `make run`)."""

    trace: str = "mooncake"
    requests: int | None = 1000
    start: int = 0
    tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK
    components: tuple[str, ...] = ("full", "mamba")
    page_size: int = 1
    device_tokens: int | None = None
    hicache_ratio: float = 12.0
    mamba_slots: int = DEFAULT_MAMBA_SLOTS
    swa_window: int = DEFAULT_SWA_WINDOW
    write_policy: WritePolicy = "write_back"
    load_back_threshold: int = 0
    transfer: str = "auto"
    faults: tuple[str, ...] = DEFAULT_FAULTS
    mean_delay: float = DEFAULT_MEAN_DELAY
    max_delay: int = DEFAULT_MAX_DELAY
    seed: int = 0
    strict: bool = False
    debug: bool = False
    history: int = 1024
    max_running: int = 64
    decode_per_step: int | None = None
    cache_chunk: int | None = None
    branch_states: bool = True
    data: bool = True
    verify: bool = True
    check_every: int = 0
    kv_width: int = 4
    mamba_width: int = 8
    crash_dir: Path = field(default_factory=lambda: Path("unicache-crash"))
    memory_limit_gib: float = DEFAULT_MEMORY_LIMIT_GIB
    ack_timeout: int = DEFAULT_ACK_TIMEOUT

    def __post_init__(self) -> None:
        if type(self.ack_timeout) is not int or not 0 <= self.ack_timeout <= MAX_ACK_TIMEOUT:
            raise ReplayOptionError(f"--ack-timeout must be an int in 0..{MAX_ACK_TIMEOUT} (0: never), "
                                    f"got {self.ack_timeout!r}")
        if self.ack_timeout and "delay" in self.faults and self.ack_timeout <= self.max_delay:
            raise ReplayOptionError(f"--ack-timeout ({self.ack_timeout}) must exceed --max-delay "
                                    f"({self.max_delay}), or every slow copy times out")
        if "lose" in self.faults and not self.ack_timeout:
            raise ReplayOptionError("--faults lose needs --ack-timeout > 0 (a lost ack is only ever given up on "
                                    "by a timeout)")
        unknown = [c for c in self.components if c not in COMPONENT_NAMES]
        if unknown:
            raise ReplayOptionError(f"--components: unknown component(s) {unknown} (choose from full, swa, mamba)")
        if "full" not in self.components:
            raise ReplayOptionError("--components must include full (every other component needs it)")
        if self.requests is not None and self.requests < 1:
            raise ReplayOptionError(f"--requests must be >= 1, got {self.requests}")
        if self.start < 0:
            raise ReplayOptionError(f"--start must be >= 0, got {self.start}")
        if self.decode_per_step is not None and self.decode_per_step < 1:
            raise ReplayOptionError(f"--decode-per-step must be >= 1, got {self.decode_per_step}")
        if not math.isfinite(self.hicache_ratio) or self.hicache_ratio <= 0:
            raise ReplayOptionError(f"--hicache-ratio must be a finite number > 0, got {self.hicache_ratio}")
        if not 1 <= self.tokens_per_block <= MOONCAKE_BLOCK_TOKENS:
            raise ReplayOptionError(f"--tokens-per-block must be in 1..{MOONCAKE_BLOCK_TOKENS}, "
                                    f"got {self.tokens_per_block}")
        if not 0 < self.memory_limit_gib <= MAX_MEMORY_LIMIT_GIB:
            raise ReplayOptionError(f"--memory-limit must be in (0, {MAX_MEMORY_LIMIT_GIB}] GiB, "
                                    f"got {self.memory_limit_gib}")
        if not 0 <= self.history <= MAX_HISTORY:
            raise ReplayOptionError(f"--history must be in 0..{MAX_HISTORY}, got {self.history}")
        self.fault_spec()
        resolve_transfer(self.transfer)

    def injected_faults(self) -> tuple[str, ...]:
        """The faults the transfer engine will inject: ``faults`` on the simulated engine, none on the others."""
        return self.faults if resolve_transfer(self.transfer) == "simulated" else ()

    def fault_spec(self) -> FaultSpec:
        """The simulated engine's faults (raises on an unknown kind or an out-of-range delay)."""
        late = 3 * self.ack_timeout if self.ack_timeout else 4 * self.max_delay
        return FaultSpec.parse(self.faults, mean_delay=self.mean_delay, max_delay=self.max_delay,
                               late_delay=max(late, self.max_delay + 1))

    def decode_tokens_per_step(self) -> int:
        """``decode_per_step``, or by default one decode token per 4 block tokens of the Mooncake scale.

        Output lengths scale with ``tokens_per_block``; decoding in proportion
        keeps a request's lifetime in steps, and so how load-backs (whose
        delays are in steps) overlap, the same at every scale.
        """
        if self.decode_per_step is not None:
            return self.decode_per_step
        if self.trace_format() == MOONCAKE:
            return max(1, self.tokens_per_block // BLOCK_TOKENS_PER_DECODE_TOKEN)
        return DEFAULT_DECODE_PER_STEP

    def trace_format(self) -> str:
        """The trace's format (``mooncake``, ``tokens``, ``multiturn``): defaults follow it."""
        return trace_format(self.trace)

    def cache_chunk_tokens(self) -> int | None:
        """``cache_chunk``, or by default the block size for a Mooncake trace (bundled or a file)."""
        if self.cache_chunk is None and self.trace_format() == MOONCAKE:
            return self.tokens_per_block
        return self.cache_chunk

    def label(self) -> str:
        comps = "+".join(c.upper() if c != "mamba" else "Mamba" for c in self.components)
        return f"{comps.replace('FULL', 'Full')} ps={self.page_size} {self.write_policy}"

    def command(self) -> str:
        """The `unicache replay` command line that reproduces these options.

        It names only options that take effect (the faults the engine injects,
        delays only with the faults that use them, Mamba and SWA settings only
        with those components, the block scale only for a Mooncake trace), so
        the command passes the checks of :mod:`unicache.engine.commands`.
        """
        faults = self.injected_faults()
        args = ["unicache", "replay", "--trace", self.trace, "--start", str(self.start)]
        if self.trace_format() == MOONCAKE:
            args += ["--tokens-per-block", str(self.tokens_per_block)]
        args += ["--components", ",".join(self.components), "--page-size", str(self.page_size),
                 "--hicache-ratio", str(self.hicache_ratio)]
        if "mamba" in self.components:
            args += ["--mamba-slots", str(self.mamba_slots)]
        if "swa" in self.components:
            args += ["--swa-window", str(self.swa_window)]
        args += ["--write-policy", self.write_policy, "--transfer", self.transfer,
                 "--faults", ",".join(faults) or "none"]
        if "delay" in faults:
            args += ["--mean-delay", str(self.mean_delay)]
        if "delay" in faults or "lose" in faults:
            args += ["--max-delay", str(self.max_delay)]
        args += ["--seed", str(self.seed), "--max-running", str(self.max_running),
                 "--decode-per-step", str(self.decode_tokens_per_step())]
        if self.requests is not None:
            args += ["--requests", str(self.requests)]
        if self.device_tokens is not None:
            args += ["--device-tokens", str(self.device_tokens)]
        if self.cache_chunk is not None:
            args += ["--cache-chunk", str(self.cache_chunk)]
        if self.load_back_threshold:
            args += ["--load-back-threshold", str(self.load_back_threshold)]
        if self.strict:
            args.append("--strict")
        if not self.branch_states and "mamba" in self.components:
            args.append("--no-branch-states")
        if not self.data:
            args.append("--no-data")
        elif not self.verify:
            args.append("--no-verify")
        return shlex.join(args)


def auto_device_tokens(trace: Trace, ratio: float, page_size: int) -> int:
    """Device capacity like the SGLang harness: unique prompt tokens / ratio, at least 2x the longest request."""
    longest = trace.max_request_tokens + 2 * page_size
    tokens = max(int(trace.unique_tokens() / ratio), 2 * longest)
    return max(page_size, tokens - tokens % page_size)


def cache_config(opts: ReplayOptions, trace: Trace) -> CacheConfig:
    """The cache configuration a replay of ``trace`` with ``opts`` uses, refused when it cannot serve ``trace``.

    Refused: pools above ``opts.memory_limit_gib`` (ReplayOptionError), two
    requests with one id (TraceFormatError), a request the device can never
    fit (:class:`~unicache.engine.capacity.CapacityError`).

    Its keys are 4 bytes a token id when every prompt id of the trace is
    below 2**31 (the Mooncake loader's ids always are; the engine decodes
    ids below its vocabulary), else 8 (an explicit-token trace with larger ids).
    """
    device = opts.device_tokens if opts.device_tokens is not None else auto_device_tokens(
        trace, opts.hicache_ratio, opts.page_size)
    swa = "swa" in opts.components
    mamba = "mamba" in opts.components
    trace.check_unique_ids()
    config = checked_config(opts, CacheConfig(
        device_tokens=device,
        page_size=opts.page_size,
        host_ratio=opts.hicache_ratio,
        swa_window=opts.swa_window if swa else None,
        mamba=mamba,
        mamba_device_slots=opts.mamba_slots,
        write_policy=opts.write_policy,
        load_back_threshold=opts.load_back_threshold,
        kv_width=opts.kv_width,
        mamba_width=opts.mamba_width,
        dtype="int32",
        token_bytes=token_bytes_for(trace.max_token_id),
        strict=opts.strict,
        debug=opts.debug,
        history=opts.history,
        ledger_name=f"replay-seed{opts.seed}",
    ))
    check_capacity(config, trace)
    return config


def checked_config(opts: ReplayOptions, config: CacheConfig) -> CacheConfig:
    """``config``, refused (ReplayOptionError) when its pools would exceed ``opts.memory_limit_gib``."""
    need = cache_bytes(config)
    limit = int(opts.memory_limit_gib * GIB)
    if need > limit:
        host = config.host_capacity(config.components[0]) * config.page_size
        raise ReplayOptionError(
            f"the cache would allocate {describe_bytes(need)} ({config.device_tokens:,} device and {host:,} host "
            f"tokens); the bound is {describe_bytes(limit)} (--memory-limit GiB); "
            f"check --hicache-ratio, --device-tokens and --mamba-slots")
    return config


def reference_for(config: CacheConfig, seed: int) -> ReferenceModel:
    """The reference model whose rows fit ``config``'s pools."""
    dtype = getattr(torch, config.dtype)
    assert isinstance(dtype, torch.dtype)
    return ReferenceModel(kv_width=config.kv_width, swa_width=config.kv_width, mamba_width=config.mamba_width,
                          dtype=dtype, seed=seed)


def load_replay_trace(opts: ReplayOptions) -> Trace:
    return load_trace(TraceSpec(opts.trace, opts.tokens_per_block, opts.start, opts.requests))


def build_replay(opts: ReplayOptions, trace: Trace, *, timeline: bool = True,
                 clock: Callable[[], float] | None = None) -> Scheduler:
    """Cache + transfer engine + scheduler for one replay (nothing run yet); `clock` is the ledger's."""
    config = cache_config(opts, trace)
    engine = make_transfer(opts.transfer, faults=opts.fault_spec(), seed=opts.seed, copy=opts.data)
    cache = UniCache(config, engine, clock=clock)
    bind_transfer(cache)
    chunk = opts.cache_chunk_tokens()
    engine_cfg = EngineConfig(max_running=opts.max_running, decode_per_step=opts.decode_tokens_per_step(),
                              cache_chunk=chunk, branch_states=opts.branch_states, data=opts.data,
                              verify=opts.verify, check_every=opts.check_every, ack_timeout=opts.ack_timeout)
    return Scheduler(cache, trace.requests, model=reference_for(config, opts.seed), config=engine_cfg,
                     timeline=Timeline() if timeline else None)


def finish_checks(sched: Scheduler) -> None:
    """End-of-run checks: drain transfers, sanity check, ownership, whole-tree oracle, no lease live."""
    gc.collect()
    sched.drain()
    sched.check_cache()
    if sched.config.data and sched.config.verify:
        sched.check_tree()
    live = sched.cache.ledger.live()
    if live:
        from unicache.engine.errors import InvariantError

        raise InvariantError(sched.step_no, f"{len(live)} lease(s) still live after every request finished: "
                                            f"{[lease.id for lease in live[:8]]}")


def shut_down(sched: Scheduler) -> None:
    """After a failed run: give back what every request holds, let the copies finish.

    Best effort (the cache may be inconsistent): errors here are not reported
    again, the first one already was.
    """
    for req in list(sched.in_flight_requests()):
        try:
            sched.abort(req)
        except Exception:  # already reported; keep releasing the rest
            continue
    try:
        sched.drain()
    except Exception:  # already reported
        return


def run_replay(opts: ReplayOptions, *, trace: Trace | None = None,
               progress: Callable[[Scheduler], None] | None = None,
               timeline_out: list[Timeline] | None = None, stop: StopFlag | None = None,
               live: LiveHooks | None = None) -> Report:
    """Run a whole replay and return its report (see the module docstring).

    When ``stop`` is set (a signal arrived) the loop ends at the next step
    boundary: requests in flight are aborted, transfers drained, the end-of-run
    checks still run, and the report says ``interrupted`` and by which signal.
    ``live`` watches the run between steps (metrics, the lease watchdog, dumps
    on SIGUSR1: :mod:`unicache.engine.live`).
    """
    trace = trace if trace is not None else load_replay_trace(opts)
    sched = build_replay(opts, trace, clock=live.clock if live is not None and live.timed else None)
    if live is not None:
        live.attach(sched)
    error: BaseException | None = None
    interrupted = False
    t0 = time.perf_counter()
    try:
        while not sched.done:
            if stop:
                interrupted = True
                for req in list(sched.in_flight_requests()):
                    sched.abort(req)
                break
            sched.step()
            if live is not None:
                live.after_step(sched)
            if progress is not None:
                progress(sched)
        finish_checks(sched)
    except Exception as exc:  # reported (errors/corruptions, crash dump), never swallowed
        error = exc
    wall = time.perf_counter() - t0
    if live is not None:
        live.finish(sched)
    report = build_report(opts, trace, sched, wall, error)
    if live is not None and live.watchdog is not None:
        report["lease_watchdog"] = {"age_limit_seconds": live.watchdog.max_age, "reported": live.watchdog.reported,
                                    "overdue_at_end": [entry.to_json() for entry in live.overdue()]}
    if live is not None and live.dumps is not None and live.dumps.written:
        report["live_dumps"] = [str(path) for path in live.dumps.written]
    if interrupted:
        report["interrupted"] = True
        report["interrupted_by"] = stop.signal_name if stop is not None else None
    if error is not None:
        try:
            path = write_engine_dump(sched, opts.crash_dir, error=error, seed=opts.seed,
                                     reproduce=opts.command())
        except (OutputPathError, OutputWriteError) as failed:
            report["crash_dump_error"] = str(failed)
        else:
            report["crash_dump"] = str(path)
        shut_down(sched)
    if timeline_out is not None and sched.timeline is not None:
        timeline_out.append(sched.timeline)
    sched.cache.engine.close()
    return report


def build_report(opts: ReplayOptions, trace: Trace, sched: Scheduler, wall: float,
                 error: BaseException | None) -> Report:
    """The JSON report of a finished (or stopped) replay."""
    cache = sched.cache
    c = cache.counters
    ledger = cache.ledger
    st = sched.stats
    corruption = isinstance(error, CorruptionError)
    finished = st.finished
    report: Report = {
        "trace": trace.name,
        "configuration": opts.label(),
        "requests": finished,
        "requests_in_trace": len(trace),
        "input_tokens": st.device_hit_tokens + st.host_hit_tokens + st.computed_tokens,
        "output_tokens": st.decoded_tokens,
        "device_hit_tokens": st.device_hit_tokens,
        "host_hit_tokens": st.host_hit_tokens,
        "computed_tokens": st.computed_tokens,
        "load_backs": c.load_backs,
        "load_backs_failed": c.load_backs_failed,
        "load_backs_refused": c.load_backs_refused,
        "load_back_joins": c.load_back_joins,
        "evictions": c.device_evictions,
        "host_evictions": c.host_evictions,
        "reclaims": c.reclaimed_pages,
        "backups": c.backups,
        "leases_acquired": ledger.acquired,
        "leases_released": ledger.released,
        "max_leases_on_one_node": sched.pins.max_leases_on_one_node,
        "nodes_pinned_by_two_components": sched.pins.nodes_pinned_by_two_components,
        "load_back_cross_component_nodes": sched.pins.load_back_cross_component_nodes,
        "overlap_observations": sched.pins.overlap_observations,
        "stale_acks": c.stale_acks + c.duplicate_acks,
        "duplicate_acks": c.duplicate_acks,
        "failed_transfers": c.failed_acks,
        "leaked_leases": ledger.leaked,
        "live_leases_at_end": len(ledger.live()),
        "corruptions": 1 if corruption else 0,
        "errors": 0 if error is None or corruption else 1,
        "error": None if error is None else f"{type(error).__name__}: {error}",
        "steps": sched.step_no,
        "verified_tokens": st.verified_tokens,
        "verified_states": st.verified_states,
        "mamba_skipped": c.mamba_skipped,
        "evict_blocked": c.evict_blocked,
        "reclaim_blocked": c.reclaim_blocked,
        "duplicates": {
            "full_pages": c.duplicate_pages_freed + c.load_back_duplicate_pages + c.backup_duplicate_pages,
            "swa_pages": c.load_back_duplicate_swa_pages + c.backup_duplicate_swa_pages,
            "mamba_slots": c.mamba_duplicates,
        },
        "refusals": cache.reasons.counts(),
        "requests_per_second": round(finished / wall, 2) if wall > 0 else 0.0,
        "wall_seconds": round(wall, 3),
        "interrupted": False,
        "options": options_json(opts),
        "cache_config": cache.config.to_json(),
        "transfer": type(cache.engine).__name__,
        "engine": st.to_json(),
        "cache_counters": c.as_dict(),
        "ledger": ledger.counters(),
        "peaks": sched.timeline.peaks() if sched.timeline is not None else {},
        "reproduce": opts.command(),
    }
    return report


def options_json(opts: ReplayOptions) -> dict[str, object]:
    """The options as JSON values (paths as strings, tuples as lists)."""
    out: dict[str, object] = {}
    for f in fields(opts):
        value = getattr(opts, f.name)
        out[f.name] = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
    return out


def with_overrides(opts: ReplayOptions, **changes: object) -> ReplayOptions:
    """A copy of ``opts`` with fields replaced (validated again)."""
    return replace(opts, **changes)  # type: ignore[arg-type]

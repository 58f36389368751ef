"""`unicache simulate`: seeded fault-injection runs with every invariant checked after every step.

A seed fully determines a :class:`Scenario`: the components, page size,
write policy, tiny pool sizes, a synthetic multi-turn workload, the
simulated engine's faults (delay, reorder, duplicate, fail, lose: acks that
come long after the scheduler's ``ack_timeout`` timed their ticket out, or
never), the cache's own faults (allocfail: allocators refusing inside cache
operations) and a stream of
"chaos" operations injected between steps (reset, forced device and host
eviction, reclaim, backup of a random node, aborting a random request).
After every step the cache's sanity check, the engine's ownership invariants
(every live lease owned by a ticket or receipt someone holds; request-owned
slots agree with the cache) and the whole-tree data oracle run. At the end
every transfer is drained and no lease may stay live.

A failing seed prints the command that reproduces it, writes a crash dump,
and is shrunk: the scenario is cut down (steps, fault kinds, chaos kinds,
requests) while it still fails the same way, and the minimal run's cache
operations are written as a REPL script by the ``scripter`` the caller passes
(:mod:`unicache.repl.script_check`; the REPL is a layer above the engine).
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeAlias

from unicache.cache import UniCache
from unicache.markers import SWA, Full, Mamba
from unicache.config import CacheConfig, WritePolicy
from unicache.engine.config import EngineConfig
from unicache.engine.crashdump import write_engine_dump
from unicache.engine.oplog import OpLog, OpLogObserver
from unicache.engine.replay import finish_checks, reference_for, shut_down
from unicache.engine.scheduler import Scheduler
from unicache.engine.workloads import SIZING_REQUESTS, WORKLOADS, build_workload
from unicache.outputs import OutputPathError, OutputWriteError
from unicache.traces.request import Trace
from unicache.transfer.base import Tier
from unicache.transfer.base import TransferEngine
from unicache.transfer.simulated import FAULT_KINDS, FaultSpec, SimulatedEngine
from unicache.transfer.threaded import ThreadedEngine
from unicache.tree.keys import token_bytes_for

COMPONENT_SETS: tuple[tuple[str, ...], ...] = (
    ("full",), ("full", "mamba"), ("full", "swa"), ("full", "swa", "mamba"),
)
CHAOS_KINDS: tuple[str, ...] = ("reset", "evict", "evict_host", "reclaim", "backup", "abort")
CHAOS_RATE: dict[str, float] = {
    "reset": 0.05, "evict": 0.12, "evict_host": 0.06, "reclaim": 0.06, "backup": 0.06, "abort": 0.03,
}
INJECTIONS: tuple[str, ...] = ("corrupt", "leak", "badcopy", "badload", "pinset", "allocator")
ACK_TIMEOUT = 24
"""Default steps after which the simulated scheduler times out a ticket (above every seed's ``max_delay``)."""
FULL_CHECK_EVERY = 16
TRANSFERS: tuple[str, ...] = ("simulated", "threaded")
"""Transfer engines a simulation can run on (``threaded``: real worker threads, no injected transfer faults)."""
DEFAULT_FAULTS: tuple[str, ...] = ("delay", "reorder", "duplicate", "fail")
CACHE_FAULTS: tuple[str, ...] = ("allocfail",)
"""Faults injected into the cache itself, not the transfer engine: ``allocfail`` makes a random
allocator (device or host, any component) refuse its next 1-3 allocations (`SlotAllocator.refuse`)."""
ALLOCFAIL_RATE = 0.2
"""Default steps between full sanity checks and whole-tree oracles; the steps between get `StepCheck`."""
_MARKERS = {"full": Full, "swa": SWA, "mamba": Mamba}


class SimulationError(ValueError):
    """Invalid simulate options (the message names the option)."""


def transfer_faults(faults: tuple[str, ...]) -> tuple[str, ...]:
    """The fault kinds the transfer engine injects (every one but the cache faults)."""
    return tuple(f for f in faults if f not in CACHE_FAULTS)


@dataclass(frozen=True, slots=True)
class SimulateOptions:
    """What `unicache simulate` varies; None means "chosen by seed"."""

    steps: int = 200
    components: tuple[str, ...] | None = None
    faults: tuple[str, ...] = DEFAULT_FAULTS
    page_size: int | None = None
    write_policy: WritePolicy | None = None
    inject: str | None = None
    chaos: tuple[str, ...] = CHAOS_KINDS
    keep: tuple[int, ...] | None = None
    workload: str | None = None
    full_check_every: int = FULL_CHECK_EVERY
    ack_timeout: int = ACK_TIMEOUT
    transfer: str = "simulated"
    sync_write_back: bool | None = None

    def __post_init__(self) -> None:
        if self.transfer not in TRANSFERS:
            raise SimulationError(f"--transfer must be one of {', '.join(TRANSFERS)}, got {self.transfer!r}")
        if self.transfer == "threaded" and transfer_faults(self.faults):
            raise SimulationError(f"--transfer threaded injects no transfer faults (its copies really run on "
                                  f"threads); got --faults {','.join(self.faults)}: pass --faults none")
        if self.transfer == "threaded" and self.inject in ("badcopy", "badload"):
            raise SimulationError(f"--inject {self.inject} needs --transfer simulated")
        if self.sync_write_back is not None and self.write_policy == "write_through":
            raise SimulationError(f"--write-back {'sync' if self.sync_write_back else 'async'} chooses how "
                                  f"write-back eviction waits for its backups and --write-policy write_through "
                                  f"has none; drop --write-back or use --write-policy write_back")
        if type(self.ack_timeout) is not int or not 0 <= self.ack_timeout <= 10_000:
            raise SimulationError(f"--ack-timeout must be an int in [0, 10000] (0: never), got {self.ack_timeout!r}")
        if "lose" in self.faults and not self.ack_timeout:
            raise SimulationError("--faults lose needs --ack-timeout > 0 (a lost ack is only ever given up on "
                                  "by a timeout)")
        if "lose" in self.faults and self.ack_timeout <= 12:
            raise SimulationError(f"--ack-timeout must be > 12 (the longest simulated delay) with --faults lose, "
                                  f"got {self.ack_timeout}")
        if not 1 <= self.full_check_every <= 10_000:
            raise SimulationError(f"--full-check-every must be in [1, 10000], got {self.full_check_every}")
        if self.workload is not None and self.workload not in WORKLOADS:
            raise SimulationError(f"--workload must be one of {', '.join(WORKLOADS)}, got {self.workload!r}")
        bad_chaos = [c for c in self.chaos if c not in CHAOS_KINDS]
        if bad_chaos:
            raise SimulationError(f"--chaos: unknown kind(s) {bad_chaos} (choose from {', '.join(CHAOS_KINDS)})")
        if self.keep is not None and any(i < 0 for i in self.keep):
            raise SimulationError(f"--keep: request indices must be >= 0, got {self.keep}")
        if self.steps < 1:
            raise SimulationError(f"--steps must be >= 1, got {self.steps}")
        if self.components is not None:
            bad = [c for c in self.components if c not in _MARKERS]
            if bad or "full" not in self.components:
                raise SimulationError(f"--components must include full and only full/swa/mamba, got {self.components}")
        known = (*FAULT_KINDS, *CACHE_FAULTS, "none")
        unknown = [f for f in self.faults if f.strip().lower() not in known]
        if unknown:
            raise SimulationError(f"--faults: unknown fault kind(s) {unknown} (choose from {', '.join(known)})")
        FaultSpec.parse(transfer_faults(self.faults))
        if self.page_size is not None and self.page_size < 1:
            raise SimulationError(f"--page-size must be >= 1, got {self.page_size}")
        if self.inject is not None and self.inject not in INJECTIONS:
            raise SimulationError(f"--inject must be one of {INJECTIONS}, got {self.inject!r}")


@dataclass(frozen=True, slots=True)
class Scenario:
    """Everything one simulation run depends on (the shrinker edits it)."""

    seed: int
    steps: int
    components: tuple[str, ...]
    page_size: int
    write_policy: WritePolicy
    faults: tuple[str, ...]
    chaos: tuple[str, ...] = CHAOS_KINDS
    keep: tuple[int, ...] | None = None
    inject: str | None = None
    workload: str = "multiturn"
    full_check_every: int = FULL_CHECK_EVERY
    ack_timeout: int = ACK_TIMEOUT
    transfer: str = "simulated"
    sync_write_back: bool = True

    def command(self) -> str:
        """The `unicache simulate` command that runs exactly this scenario."""
        parts = ["unicache", "simulate", "--seed", str(self.seed), "--steps", str(self.steps),
                 "--workload", self.workload,
                 "--components", ",".join(self.components), "--page-size", str(self.page_size),
                 "--write-policy", self.write_policy, "--faults", ",".join(self.faults) or "none"]
        if tuple(self.chaos) != CHAOS_KINDS:
            parts += ["--chaos", ",".join(self.chaos) or "none"]
        if self.keep is not None:
            parts += ["--keep", ",".join(str(i) for i in self.keep)]
        if self.inject:
            parts += ["--inject", self.inject]
        if self.full_check_every != FULL_CHECK_EVERY:
            parts += ["--full-check-every", str(self.full_check_every)]
        if self.ack_timeout != ACK_TIMEOUT:
            parts += ["--ack-timeout", str(self.ack_timeout)]
        if self.transfer != "simulated":
            parts += ["--transfer", self.transfer]
        if self.write_policy == "write_back":
            parts += ["--write-back", "sync" if self.sync_write_back else "async"]
        return " ".join(parts)

    def describe(self) -> dict[str, object]:
        return {"seed": self.seed, "steps": self.steps, "components": list(self.components),
                "page_size": self.page_size, "write_policy": self.write_policy, "faults": list(self.faults),
                "chaos": list(self.chaos), "requests_kept": None if self.keep is None else list(self.keep),
                "inject": self.inject, "workload": self.workload, "full_check_every": self.full_check_every,
                "ack_timeout": self.ack_timeout, "transfer": self.transfer,
                "sync_write_back": self.sync_write_back}


def scenario_for(seed: int, opts: SimulateOptions) -> Scenario:
    """The scenario a seed stands for under ``opts``."""
    rng = random.Random(seed * 7919 + 1)
    components = opts.components or COMPONENT_SETS[seed % len(COMPONENT_SETS)]
    page_size = opts.page_size or rng.choice((1, 1, 2))
    policy: WritePolicy
    if opts.write_policy is not None:
        policy = opts.write_policy
    else:
        policy = "write_back" if rng.random() < 0.5 else "write_through"
    workload = opts.workload or WORKLOADS[(seed // len(COMPONENT_SETS)) % len(WORKLOADS)]
    sync = opts.sync_write_back
    if sync is None:
        sync = random.Random(seed * 7907 + 11).random() < 0.5
    return Scenario(seed, opts.steps, tuple(components), page_size, policy, tuple(opts.faults),
                    tuple(opts.chaos), opts.keep, opts.inject, workload, opts.full_check_every, opts.ack_timeout,
                    opts.transfer, sync)


@dataclass(slots=True)
class World:
    """A built scenario: its workload, cache config and engine knobs (all from the seed)."""

    trace: Trace
    config: CacheConfig
    engine: EngineConfig
    fault_params: dict[str, float]


def build_world(sc: Scenario) -> World:
    """The seed's workload (see :mod:`unicache.engine.workloads`), cache config and engine knobs.

    The load-back threshold comes from its own generator so that adding it kept
    every other knob of every seed as it was (so does the scenario's
    ``sync_write_back``: whether write-back eviction waits for its backups, or
    leaves a victim until its backup's ack).
    """
    rng = random.Random(sc.seed)
    ps = sc.page_size
    trace = build_workload(sc.workload, sc.seed, ps)
    if sc.keep is not None:
        trace = Trace(trace.name, [trace.requests[i] for i in sc.keep if i < len(trace.requests)], trace.source)
    longest = max((len(r.tokens) + r.output_tokens for r in trace.requests), default=ps) + 2 * ps
    sizing = Trace(trace.name, trace.requests[:SIZING_REQUESTS])
    device = max(2 * longest, sizing.unique_tokens() // rng.randint(3, 6)) if trace.requests else 4 * ps
    device -= device % ps
    swa = "swa" in sc.components
    mamba = "mamba" in sc.components
    load_back_threshold = random.Random(sc.seed * 104729 + 3).choice((0, 0, ps, 4 * ps, 16 * ps))
    # Keys of either width (the tree must behave the same); drawn apart from `rng` so seeds keep their runs.
    key_width = max(random.Random(sc.seed * 7919 + 11).choice((4, 8)), token_bytes_for(trace.max_token_id))
    config = CacheConfig(
        device_tokens=device, page_size=ps, host_ratio=rng.choice((1.5, 2.0, 4.0)),
        load_back_threshold=load_back_threshold,
        swa_window=rng.randint(2, 12) * ps if swa else None, mamba=mamba,
        mamba_device_slots=rng.randint(8, 16), write_policy=sc.write_policy, sync_write_back=sc.sync_write_back,
        write_through_threshold=rng.randint(1, 2), kv_width=2, mamba_width=3, dtype="int32",
        token_bytes=4 if key_width == 4 else 8, device="cpu", strict=False, debug=True, history=4096, ledger_name=f"sim-seed{sc.seed}",
    )
    engine = EngineConfig(max_running=rng.randint(2, 6), decode_per_step=rng.randint(1, 3),
                          check_every=sc.full_check_every, tree_check_every=sc.full_check_every,
                          step_checks=sc.full_check_every > 1, vocab=40, ack_timeout=sc.ack_timeout)
    params = {"mean_delay": rng.choice((1.5, 3.0)), "max_delay": rng.randint(3, 8),
              "duplicate_rate": 0.2, "fail_rate": 0.15}
    if sc.ack_timeout:
        params.update(lose_rate=0.08, never_rate=0.3, late_delay=3 * sc.ack_timeout)
    return World(trace, config, engine, params)


@dataclass(slots=True)
class SimResult:
    """One run's outcome (``steps``: loop iterations run, the failing one included)."""

    scenario: Scenario
    steps: int
    error: BaseException | None
    stats: dict[str, object] = field(default_factory=dict)
    dump: Path | None = None
    script: Path | None = None
    shrunk: Scenario | None = None
    oplog: OpLog | None = None
    sched: Scheduler | None = None
    output_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


ScriptWriter: TypeAlias = Callable[[SimResult, Path], Path]
"""Writes a failing run's recorded operations as a checked REPL script at the path; returns the path."""


def _chaos(sc: Scenario, rng: random.Random, sched: Scheduler, log: OpLog | None) -> None:
    cache = sched.cache
    comps = [_MARKERS[c] for c in sc.components]
    for kind in sc.chaos:
        if rng.random() >= CHAOS_RATE[kind]:
            continue
        if kind == "reset":
            if log is not None:
                log.add("reset")
            cache.reset()
        elif kind == "evict":
            comp = rng.choice(comps)
            n = rng.randint(1, 6)
            if log is not None:
                log.add("evict", comp.__name__.lower(), "device", n)
            cache.evict_device(comp, n)
        elif kind == "evict_host":
            comp = rng.choice(comps)
            n = rng.randint(1, 6)
            if log is not None:
                log.add("evict", comp.__name__.lower(), "host", n)
            cache.evict_host(comp, n)
        elif kind == "reclaim":
            n = rng.randint(1, 8)
            if log is not None:
                log.add("reclaim", n)
            cache.reclaim_host_duplicates(n)
        elif kind == "backup":
            nodes = [x for x in cache.nodes() if x.parent is not None]
            if nodes:
                node = rng.choice(nodes)
                if log is not None:
                    log.add("backup", OpLog.path_tokens(node))
                cache.backup(node)
        elif kind == "abort":
            reqs = sched.in_flight_requests()
            if reqs:
                req = rng.choice(reqs)
                if log is not None:
                    log.add("abort", req.rid)
                sched.abort(req)


def _inject(kind: str, rng: random.Random, sched: Scheduler) -> bool:
    """Plant a deliberate bug (tests prove the checks catch it); True once planted."""
    cache = sched.cache
    if kind in ("badcopy", "badload"):
        engine = cache.engine
        assert isinstance(engine, SimulatedEngine)
        engine.corrupt_generation = cache.ledger.epoch
        if kind == "badload":
            engine.corrupt_kinds = frozenset({"load_back"})
        return True
    if kind == "pinset":
        for x in cache.nodes():
            pins = cache.components.full.pins(x)
            if pins is not None and (ids := pins.ids()) and pins.forget(ids[0]):
                return True
        return False
    if kind == "allocator":
        full = cache.components.full
        nodes = [x for x in cache.nodes() if x.parent is not None and full.device_slots(x)]
        if not nodes:
            return False
        held = full.device_slots(rng.choice(nodes))
        assert held is not None
        cache.pools.device_pool(Full).alloc.free([held[0]])
        return True
    if kind == "corrupt":
        full = cache.components.full
        nodes = [x for x in cache.nodes() if x.parent is not None and full.device_slots(x)]
        if not nodes:
            return False
        pages = full.device_slots(rng.choice(nodes))
        assert pages is not None
        page = pages[0]
        data = cache.read_slots(Full, [page], Tier.DEVICE)
        cache.write_slots(Full, [page], data + 1)
        return True
    for req in [*sched.running, *sched.loading]:
        if sched.holdings.receipt(req.rid) is not None:
            sched.holdings.take_receipt(req.rid)  # lease: ignore[lease-discarded]  (the injected fault: a dropped lock)
        elif sched.holdings.ticket(req.rid) is not None:
            sched.holdings.take_ticket(req.rid)  # lease: ignore[lease-discarded]  (the injected fault: a dropped ticket)
            sched.loading.remove(req)
        else:
            continue
        gc.collect()
        return True
    return False


def run_scenario(sc: Scenario, *, record: bool = False, on_step: Callable[[int], None] | None = None,
                 dump_dir: Path | None = None) -> SimResult:
    """Run one scenario to its step limit or the end of its workload, checking after every step.

    On failure a crash dump goes to ``dump_dir`` (when given) while the state is
    still the failing one; then every request gives back what it holds.
    """
    world = build_world(sc)
    log = OpLog(world.config) if record else None
    engine: TransferEngine
    sim: SimulatedEngine | None = None
    if sc.transfer == "threaded":
        engine = ThreadedEngine(workers=2)
    else:
        engine = sim = SimulatedEngine(FaultSpec.parse(transfer_faults(sc.faults), **world.fault_params),
                                       seed=sc.seed)
        if log is not None:
            sim.ack_log = log
    cache = UniCache(world.config, engine)
    if isinstance(engine, ThreadedEngine):
        engine.bind(cache.inbox)
    sched = Scheduler(cache, world.trace.requests, model=reference_for(world.config, sc.seed),
                      config=world.engine)
    if log is not None:
        sched.observe(OpLogObserver(log))
    chaos_rng = random.Random(sc.seed * 31 + 17)
    alloc_rng = random.Random(sc.seed * 131 + 7) if "allocfail" in sc.faults else None
    allocators = [p.alloc for p in cache.pools.pools()]
    planted = False
    error: BaseException | None = None
    step = 0
    try:
        while not sched.done and step < sc.steps:
            step += 1
            if alloc_rng is not None and alloc_rng.random() < ALLOCFAIL_RATE:
                alloc_rng.choice(allocators).refuse = alloc_rng.randint(1, 3)
            _chaos(sc, chaos_rng, sched, log)
            if sc.inject and not planted:
                planted = _inject(sc.inject, chaos_rng, sched)
                if planted and sched.config.step_checks:
                    sched.check_step()
                elif planted:
                    sched.check_cache()
                    sched.check_tree()
            if log is not None:
                log.add("step", sched.step_no + 1)
            sched.step()
            if on_step is not None:
                on_step(step)
        for req in list(sched.in_flight_requests()):
            sched.abort(req)
        for a in allocators:
            a.refuse = 0
        finish_checks(sched)
    except Exception as exc:  # the failure is the result; reported with dump and shrink
        error = exc
    finally:
        if error is None:
            engine.close()
    c = cache.counters
    stats: dict[str, object] = {
        "steps": sched.step_no, "finished": sched.stats.finished, "aborted": sched.stats.aborted,
        "admitted": sched.stats.finished + sched.stats.aborted + len(sched.in_flight_requests()),
        "requests": len(world.trace.requests),
        "load_backs": c.load_backs, "failed_transfers": c.failed_acks, "stale_acks": c.stale_acks,
        "duplicate_acks": c.duplicate_acks, "resets": c.resets, "backups": c.backups,
        "timed_out": c.timed_out_tickets, "late_acks": c.late_acks, "lost_acks": len(sim.lost_acks) if sim is not None else 0,
        "lost_ack_waits": sched.stats.lost_ack_waits,
        "injected_alloc_refusals": sum(a.injected_refusals for a in allocators),
        "max_leases_on_one_node": sched.pins.max_leases_on_one_node,
        "nodes_pinned_by_two_components": sched.pins.nodes_pinned_by_two_components,
        "leases_acquired": cache.ledger.acquired, "leaked": cache.ledger.leaked,
        "load_back_threshold": world.config.load_back_threshold,
        "sync_write_back": world.config.sync_write_back,
    }
    result = SimResult(sc, step, error, stats, oplog=log, sched=sched)
    if error is not None:
        if dump_dir is not None:
            try:
                result.dump = write_engine_dump(sched, dump_dir, error=error, seed=sc.seed,
                                                reproduce=sc.command(), more={"scenario": sc.describe()})
            except (OutputPathError, OutputWriteError) as failed:
                result.output_errors.append(str(failed))
        shut_down(sched)
        engine.close()
    return result


def _same_failure(a: BaseException | None, b: BaseException | None) -> bool:
    return a is not None and b is not None and type(a) is type(b)


def shrink(result: SimResult, *, budget: int = 60, deadline_s: float = 60.0) -> Scenario:
    """Cut the failing scenario down while it keeps failing with the same error type."""
    assert result.error is not None
    target = result.error
    best = replace(result.scenario, steps=max(1, result.steps))
    runs = 0
    t_end = time.monotonic() + deadline_s

    def fails(sc: Scenario) -> SimResult | None:
        nonlocal runs
        if runs >= budget or time.monotonic() > t_end:
            return None
        runs += 1
        r = run_scenario(sc)
        return r if _same_failure(r.error, target) else None

    for field_name, kinds in (("faults", best.faults), ("chaos", best.chaos)):
        for kind in kinds:
            current = tuple(getattr(best, field_name))
            if kind not in current:
                continue
            rest = tuple(k for k in current if k != kind)
            cand = replace(best, faults=rest) if field_name == "faults" else replace(best, chaos=rest)
            r = fails(cand)
            if r is not None:
                best = replace(cand, steps=max(1, r.steps))
    admitted = result.stats.get("admitted")
    total = len(build_world(replace(best, keep=None)).trace.requests)
    keep = list(range(min(total, admitted + 1) if isinstance(admitted, int) else total))
    if best.keep is not None:
        keep = list(best.keep)
    chunk = max(1, len(keep) // 2)
    while chunk >= 1 and keep:
        i = 0
        progressed = False
        while i < len(keep):
            cand_keep = keep[:i] + keep[i + chunk:]
            if not cand_keep:
                i += chunk
                continue
            r = fails(replace(best, keep=tuple(cand_keep)))
            if r is not None:
                keep = cand_keep
                best = replace(best, keep=tuple(keep), steps=max(1, r.steps))
                progressed = True
            else:
                i += chunk
        if not progressed:
            chunk //= 2
        if runs >= budget or time.monotonic() > t_end:
            break
    return best

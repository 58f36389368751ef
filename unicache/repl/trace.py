"""`--trace` mode: the engine's replay scheduler as the session's driver, one engine step per `step`."""

from __future__ import annotations

import time

from typing import TYPE_CHECKING

from unicache.dump.schema import JSONObject
from unicache.repl.errors import TraceUnavailableError
from unicache.repl.parser import Args
from unicache.repl.session import Driver, Session, StepReport

if TYPE_CHECKING:
    from unicache.engine.replay import ReplayOptions
    from unicache.engine.scheduler import Scheduler


class TraceDriver(Driver):
    """Steps a replay `Scheduler`; the scheduler owns the cache, its requests and their leases."""

    name = "trace"
    owns_cache = True

    def __init__(self, sched: Scheduler, options: ReplayOptions) -> None:
        self.sched = sched
        self.options = options

    def step(self) -> StepReport | None:
        sched = self.sched
        if sched.done:
            return None
        sched.step()
        stats = sched.stats
        return StepReport(sched.step_no, {
            "finished": stats.finished,
            "active": sched.active,
            "waiting": len(sched.waiting),
            "in_flight": sched.cache.in_flight(),
            "live_leases": sched.cache.ledger.live_count,
        })

    def data_check(self) -> JSONObject:
        """The engine's whole-tree data oracle."""
        from unicache.engine.errors import CorruptionError

        try:
            checked = self.sched.oracle.verify_tree()
        except CorruptionError as exc:
            return {"checked": None, "mismatches": [
                {"node": exc.node_id, "component": exc.component, "tier": exc.tier, "detail": str(exc)}
            ]}
        return {"checked": checked, "mismatches": []}

    def close(self) -> None:
        """Abort every admitted request and drain the transfers, so no lease outlives the session."""
        sched = self.sched
        try:
            for req in list(sched.in_flight_requests()):
                sched.abort(req)
            sched.drain()
        except Exception:  # a run that crashed may not drain; its leases are reported as leaks
            pass
        finally:
            sched.cache.engine.close()


def open_trace(session: Session, trace: str, args: Args) -> None:
    """Build the replay of `trace` with the command-line options and attach it to `session`."""
    try:
        from unicache.engine.replay import ReplayOptions, build_replay, load_replay_trace, with_overrides
    except ImportError as exc:
        raise TraceUnavailableError(f"--trace needs the engine (unicache.engine.replay): {exc}") from None
    from unicache.repl.options import check_cache_options

    comps = tuple(check_cache_options(args, "repl"))
    faults_text = args.get_str("faults")
    faults = () if faults_text in ("", "none") else tuple(f.strip() for f in faults_text.split(",") if f.strip())
    given: dict[str, object] = {
        "device_tokens": args.opt_int("device_tokens"),
        "hicache_ratio": args.opt_float("host_ratio"),
        "mamba_slots": args.opt_int("mamba_slots"),
        "swa_window": args.opt_int("swa_window"),
        "kv_width": args.opt_int("kv_width"),
        "mamba_width": args.opt_int("mamba_width"),
    }
    options = ReplayOptions(
        trace=trace,
        requests=args.get_int("requests"),
        start=args.get_int("start"),
        tokens_per_block=args.get_int("tokens_per_block"),
        components=comps,
        page_size=args.get_int("page_size"),
        write_policy="write_through" if args.get_str("write_policy") == "write_through" else "write_back",
        load_back_threshold=args.get_int("load_back_threshold"),
        transfer=args.get_str("trace_transfer"),
        faults=faults,
        seed=session.seed if session.seed is not None else 0,
        strict=args.flag("strict"),
        debug=not args.flag("no_debug"),
        history=args.get_int("history"),
        max_running=args.get_int("max_running"),
        decode_per_step=args.get_int("decode_per_step"),
    )
    options = with_overrides(options, **{k: v for k, v in given.items() if v is not None})
    loaded = load_replay_trace(options)
    sched = build_replay(options, loaded, timeline=False, clock=time.monotonic)
    session.attach(sched.cache, TraceDriver(sched, options),
                   f"trace {trace} ({len(loaded.requests)} requests, seed {options.seed})")
    session.reproduce = options.command()

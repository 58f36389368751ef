"""Crash dumps from the engine: the cache's dump (``unicache.dump``) plus the engine's own state.

The document is the versioned format of :mod:`unicache.dump` (readable by
``unicache repl --dump``); the engine adds, under ``extra``: the step, the
request being processed, every request in flight with what it owns, the
engine counters, the overlap statistics, and the command that reproduces
the run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from unicache.dump import write_crash_dump
from unicache.dump.signal import live_dump_name
from unicache.engine.holdings import Holdings
from unicache.engine.scheduler import Request, Scheduler


def describe_request(req: Request, holdings: Holdings) -> dict[str, object]:
    """What one in-flight request holds (ids only; JSON-friendly)."""
    ticket = holdings.ticket(req.rid)
    receipt = holdings.receipt(req.rid)
    return {
        "rid": req.rid,
        "phase": req.phase.value,
        "prompt_tokens": req.prompt_len,
        "output_tokens": req.src.output_tokens,
        "decoded": req.decoded,
        "prefix": req.prefix,
        "cached_end": req.cached_end,
        "load_backs": req.load_backs,
        "ticket": None if ticket is None else ticket.id,
        "receipt": None if receipt is None else receipt.id,
        "receipt_leases": [] if receipt is None else receipt.lease_ids(),
        "full_pages": len(req.full_pages),
        "swa_pages": len(req.swa_pages),
        "mamba_slot": req.mamba_slot,
    }


def engine_extra(sched: Scheduler, *, reproduce: str | None = None,
                 more: Mapping[str, object] | None = None) -> dict[str, object]:
    """The engine section of a crash dump."""
    extra: dict[str, object] = {
        "engine_step": sched.step_no,
        "current_request": None if sched.current is None else describe_request(sched.current, sched.holdings),
        "requests_in_flight": [describe_request(r, sched.holdings) for r in sched.in_flight_requests()],
        "engine_stats": sched.stats.to_json(),
        "engine_config": sched.config.to_json(),
        "pins": sched.pins.to_json(),
    }
    if reproduce:
        extra["reproduce"] = reproduce
    if more:
        extra.update(more)
    return extra


def write_engine_dump(sched: Scheduler, directory: Path, *, error: BaseException, seed: int | None,
                      reproduce: str | None = None, more: Mapping[str, object] | None = None) -> Path:
    """Write one crash dump for ``sched``'s cache into ``directory`` (``--crash-dir``); returns its path.

    Raises :class:`unicache.outputs.OutputPathError` / :class:`~unicache.outputs.OutputWriteError`
    when it cannot be written.
    """
    return write_crash_dump(sched.cache, os.path.join(directory, ""), error=error, seed=seed, step=sched.step_no,
                            extra=engine_extra(sched, reproduce=reproduce, more=more), announce=False,
                            option="--crash-dir")


def write_live_dump(sched: Scheduler, directory: Path, *, seed: int | None, reproduce: str | None = None,
                    more: Mapping[str, object] | None = None) -> Path:
    """Write a dump of the running engine (no error) as ``unicache-live-<time>-seed<S>-step<N>-<pid>.json``.

    The same document as a crash dump (``unicache repl --dump`` opens it), with
    ``extra.live_dump`` true; the run carries on. Raises what `write_engine_dump` raises.
    """
    name = live_dump_name(seed, sched.step_no)
    extra = engine_extra(sched, reproduce=reproduce, more={"live_dump": True, **(more or {})})
    return write_crash_dump(sched.cache, Path(directory) / name, seed=seed, step=sched.step_no, extra=extra,
                            announce=False, option="--crash-dir")

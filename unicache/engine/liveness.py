"""When the loop may wait and when it is stuck: the scheduler's liveness oracle.

A request that cannot get device memory waits at the head of its queue. That
is progress only while something can free memory:

- a running request (it decodes every step and finishes);
- a load-back in flight (its ack settles it);
- a transfer the cache still waits on: a ticket of this epoch, or a ticket a
  reset quarantined (its slots come back when its stale ack arrives).

Transfers are progress only if their acks can still come: the engine must
hold a job or an undelivered ack (``engine.pending``), or the cache's inbox an
ack. And they must come in time: an engine that knows how late an ack can be
(:class:`BoundedAcks`, the simulated engine: its ``max_delay``) gives every
run a liveness bound, and a request that waited more steps than that without
a single ack while nothing ran is stuck. Any of these failing raises
:class:`SchedulerStuckError` naming what was awaited. Draining (no new work)
must see every transfer acked, stale ones of older epochs included, within a
step budget.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from unicache.cache import UniCache
from unicache.engine.errors import InvariantError, SchedulerStuckError
from unicache.engine.request import Request


@runtime_checkable
class BoundedAcks(Protocol):
    """A transfer engine that acks every job within a known number of steps (``tick()`` calls)."""

    @property
    def ack_bound(self) -> int: ...


def liveness_bound(cache: UniCache) -> int | None:
    """Steps without any ack after which a waiting loop is stuck; None if the engine gives no bound."""
    engine = cache.engine
    if isinstance(engine, BoundedAcks):
        return engine.ack_bound + 1
    return None


def awaited(cache: UniCache) -> str:
    """What the cache waits on, in words (for errors)."""
    q = cache.quarantine_records()
    slots = sum(len(op.src) + len(op.dst) for r in q for op in r.copies)
    return (f"{cache.in_flight()} ticket(s) of this epoch, {len(q)} quarantined of older epochs "
            f"({slots} slots), {cache.engine.pending} job(s) or ack(s) held by the engine")


def check_not_stuck(cache: UniCache, req: Request, step: int, *, loading: int, running: int,
                    idle_steps: int = 0) -> None:
    """``req`` could not start: raise if nothing running or in flight can ever make room for it.

    ``idle_steps``: consecutive steps in which no ack arrived and nothing ran.
    """
    if running:
        return
    need = f"needs {req.total_len - req.prefix} tokens of device memory (device holds {cache.config.device_tokens})"
    waiting = loading + cache.in_flight() + len(cache.quarantine_records())
    if not waiting:
        raise SchedulerStuckError(req.rid, step, need)
    if cache.engine.pending == 0 and len(cache.inbox) == 0:
        raise SchedulerStuckError(req.rid, step, f"{need}; waits on {awaited(cache)}: no ack can come")
    bound = liveness_bound(cache)
    if bound is not None and idle_steps > bound:
        raise SchedulerStuckError(
            req.rid, step, f"{need}; no ack for {idle_steps} steps, past the liveness bound of {bound} "
                           f"while waiting on {awaited(cache)}")


def drained(cache: UniCache, *, loading: int) -> bool:
    """No transfer of this or an older epoch is outstanding, and no request waits on a load-back."""
    return (cache.in_flight() == 0 and not loading and not cache.quarantine_records()
            and cache.engine.pending == 0)


def never_acked(cache: UniCache, step: int) -> InvariantError:
    """The error for a drain that ran out of steps."""
    return InvariantError(step, f"{cache.in_flight()} transfer(s) of this epoch and "
                                f"{len(cache.quarantine_records())} of older epochs never acked")

"""When the loop may wait and when it is stuck: the scheduler's liveness oracle.

A request that cannot get device memory waits at the head of its queue. That
is progress only while something can free memory:

- a running request (it decodes every step and finishes);
- a load-back in flight (its ack settles it);
- a transfer the cache still waits on: a ticket of this epoch, or a ticket a
  reset quarantined (its slots come back when its stale ack arrives).

Transfers are progress only if their acks can still come: the engine must
hold a job or an undelivered ack (``engine.pending``), or the cache's inbox an
ack, or the scheduler times out overdue tickets (``ack_timeout``: a ticket of
this epoch then settles within that many steps even if its ack is lost). And
they must come in time: an engine that knows how late an ack can be
(:class:`BoundedAcks`, the simulated engine: its ``max_delay``, or its
``late_delay`` when it loses acks) gives every run a liveness bound, and a
request that waited more steps than that without a single ack while nothing
ran is stuck. Any of these failing raises :class:`SchedulerStuckError` naming
what was awaited.

One wait is not stuck although it may never end: rows quarantined under a
ticket that timed out (``UniCache.time_out``), or under a copy whose ack the
engine says it lost (:class:`LosesAcks`), wait on an ack that may never come.
:func:`check_not_stuck` returns True for it (the scheduler counts it) instead
of raising. Draining (no new work) must see every transfer acked, stale ones
of older epochs included, within a step budget; only acks the engine lost may
stay missing, with their rows quarantined for good.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from unicache.cache import UniCache
from unicache.engine.errors import InvariantError, SchedulerStuckError
from unicache.engine.request import Request
from unicache.results import TicketStatus


@runtime_checkable
class BoundedAcks(Protocol):
    """A transfer engine that acks every job within a known number of steps (``tick()`` calls)."""

    @property
    def ack_bound(self) -> int: ...


@runtime_checkable
class LosesAcks(Protocol):
    """A transfer engine that says which acks it lost for good: (ticket, generation) pairs."""

    @property
    def lost_acks(self) -> set[tuple[int, int]]: ...


def _lost(cache: UniCache) -> set[tuple[int, int]]:
    engine = cache.engine
    return engine.lost_acks if isinstance(engine, LosesAcks) else set()


def waits_on_lost_acks(cache: UniCache) -> bool:
    """Whether some quarantined rows wait on an ack that may never come (a timed-out ticket's, or one
    the engine lost)."""
    lost = _lost(cache)
    return any(q.ticket.status is TicketStatus.TIMED_OUT or (q.ticket.id, q.generation) in lost
               for q in cache.quarantine_records())


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
    timed_out = sum(r.ticket.status is TicketStatus.TIMED_OUT for r in q)
    return (f"{cache.in_flight()} ticket(s) of this epoch, {len(q)} quarantined ({timed_out} timed out, "
            f"{slots} slots), {cache.engine.pending} job(s) or ack(s) held by the engine")


def check_not_stuck(cache: UniCache, req: Request, step: int, *, loading: int, running: int,
                    idle_steps: int = 0, ack_timeout: int = 0, injected_refusal: bool = False) -> bool:
    """``req`` could not start: raise if nothing running or in flight can ever make room for it.

    ``idle_steps``: consecutive steps in which no ack arrived and nothing ran;
    ``ack_timeout``: steps after which the scheduler times a ticket out (0: never);
    ``injected_refusal``: an allocator refused on purpose while ``req`` tried to start (the
    simulator's ``allocfail``): it retries next step, so not stuck.
    True when the loop waits on acks that may never come (see the module docstring).
    """
    if running or injected_refusal:
        return False
    need = f"needs {req.total_len - req.prefix} tokens of device memory (device holds {cache.config.device_tokens})"
    waiting = loading + cache.in_flight() + len(cache.quarantine_records())
    if not waiting:
        raise SchedulerStuckError(req.rid, step, need)
    if cache.engine.pending == 0 and len(cache.inbox) == 0:
        if waits_on_lost_acks(cache):
            return True
        if ack_timeout and (cache.in_flight() or loading):
            return False
        raise SchedulerStuckError(req.rid, step, f"{need}; waits on {awaited(cache)}: no ack can come")
    bound = liveness_bound(cache)
    if bound is not None and ack_timeout:
        bound = max(bound, ack_timeout + 1)
    if bound is not None and idle_steps > bound:
        if waits_on_lost_acks(cache):
            return True
        raise SchedulerStuckError(
            req.rid, step, f"{need}; no ack for {idle_steps} steps, past the liveness bound of {bound} "
                           f"while waiting on {awaited(cache)}")
    return False


def drained(cache: UniCache, *, loading: int) -> bool:
    """No transfer of this or an older epoch is outstanding, and no request waits on a load-back.

    Rows quarantined under an ack the engine lost for good stay quarantined: they are not outstanding.
    """
    if cache.in_flight() or loading or cache.engine.pending or len(cache.inbox):
        return False
    q = cache.quarantine_records()
    if not q:
        return True
    lost = _lost(cache)
    return all((r.ticket.id, r.generation) in lost for r in q)


def never_acked(cache: UniCache, step: int) -> InvariantError:
    """The error for a drain that ran out of steps."""
    return InvariantError(step, f"{cache.in_flight()} transfer(s) of this epoch and "
                                f"{len(cache.quarantine_records())} quarantined never acked "
                                f"(waiting on {awaited(cache)})")

"""When the loop may wait and when it is stuck: the scheduler's liveness checks.

A request that cannot get device memory waits at the head of its queue. That
is progress only while something can free memory: a load-back in flight, a
running request, or a transfer the cache still waits on. With none of those
the loop raises :class:`SchedulerStuckError` instead of spinning. Draining
(no new work) must see every transfer acked, stale ones of older epochs
included, within a step budget.
"""

from __future__ import annotations

from unicache.cache import UniCache
from unicache.engine.errors import InvariantError, SchedulerStuckError
from unicache.engine.request import Request


def check_not_stuck(cache: UniCache, req: Request, step: int, *, loading: int, running: int) -> None:
    """``req`` could not start: raise if nothing in flight or running can ever make room for it."""
    if not loading and not running and cache.in_flight() == 0:
        raise SchedulerStuckError(
            req.rid, step,
            f"needs {req.total_len - req.prefix} tokens of device memory "
            f"(device holds {cache.config.device_tokens})")


def drained(cache: UniCache, *, loading: int) -> bool:
    """No transfer of this or an older epoch is outstanding, and no request waits on a load-back."""
    return (cache.in_flight() == 0 and not loading and not cache.quarantine_records()
            and cache.engine.pending == 0)


def never_acked(cache: UniCache, step: int) -> InvariantError:
    """The error for a drain that ran out of steps."""
    return InvariantError(step, f"{cache.in_flight()} transfer(s) of this epoch and "
                                f"{len(cache.quarantine_records())} of older epochs never acked")

"""`AckTimer`: which tickets have waited too long for their ack (the scheduler then times them out).

A ticket's age counts from the step the loop first saw it waiting: live (a
joiner goes with the ticket whose copy it joined), or quarantined by a reset
(timing that out releases its revoked leases; its rows stay quarantined).
"""

from __future__ import annotations

from unicache.cache import UniCache


class AckTimer:
    """First-seen steps of the tickets waiting for an ack; `overdue` lists those past ``limit`` steps."""

    __slots__ = ("limit", "_seen")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: dict[int, int] = {}

    def overdue(self, cache: UniCache, step: int) -> list[int]:
        """Ids of the tickets that have waited ``limit`` steps or more (none when ``limit`` is 0)."""
        limit = self.limit
        if not limit:
            return []
        seen = self._seen
        waiting = cache.ticket_table.awaiting()
        if not waiting and not seen:
            return []
        out = [tid for tid in waiting if step - seen.setdefault(tid, step) >= limit]
        if len(seen) > len(waiting):
            ids = set(waiting)
            self._seen = {k: v for k, v in seen.items() if k in ids}
        return out


def lost_for_good(cache: UniCache) -> list[int]:
    """After a drain, the tickets still waiting: reset-quarantined ones whose acks were lost for good."""
    return cache.ticket_table.awaiting()

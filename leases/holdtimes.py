"""`HoldTimes`: a fixed-bucket histogram of how long leases of one component were held.

A ledger with a clock (``LeaseLedger(clock=...)``) keeps one per component
and adds each lease's hold time when it is released (revoked or leaked
leases are not released, so they are not counted). The buckets are fixed
and cumulative readings are derived when asked, so a release costs one
bisection and two additions; exporters (Prometheus) read `cumulative()`.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

BUCKETS: Final[tuple[float, ...]] = (
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0,
)
"""Upper bounds in seconds (a last, unbounded bucket follows): from a fast lock to LMCache's 300 s force-unpin."""


class HoldTimes:
    """Counts of hold times per bucket of `BUCKETS` (and one past the last), their sum and count."""

    __slots__ = ("counts", "total", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        """Add one hold time (what the ledger's release does, inlined there)."""
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, hold times <= it) per bucket, the last bound `inf`: Prometheus' `le` form."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*BUCKETS, float("inf")), self.counts):
            running += n
            out.append((bound, running))
        return out

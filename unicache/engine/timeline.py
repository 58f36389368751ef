"""Per-step samples of occupancy, load-backs in flight and live leases (what ``--plot`` draws)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from unicache.cache import UniCache


@dataclass(slots=True)
class Timeline:
    """Columns of samples, one entry per sampled step."""

    steps: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    device_used: dict[str, list[float]] = field(default_factory=dict)
    host_used: dict[str, list[float]] = field(default_factory=dict)
    load_backs_in_flight: list[int] = field(default_factory=list)
    backups_in_flight: list[int] = field(default_factory=list)
    live_leases: dict[str, list[int]] = field(default_factory=dict)

    def sample(self, step: int, finished: int, cache: UniCache, load_backs: int) -> None:
        """Record one step: pool fill fractions, transfers in flight, live leases per component."""
        self.steps.append(step)
        self.finished.append(finished)
        for name, stats in cache.pools.stats().items():
            component, _, tier = name.partition(".")
            frac = stats.used / stats.capacity if stats.capacity else 0.0
            target = self.device_used if tier == "device" else self.host_used
            target.setdefault(component, []).append(frac)
        self.load_backs_in_flight.append(load_backs)
        self.backups_in_flight.append(max(0, cache.in_flight() - load_backs))
        counts = Counter(lease.component.__name__.lower() for lease in cache.ledger.live())
        for comp in cache.config.components:
            name = comp.__name__.lower()
            self.live_leases.setdefault(name, []).append(counts.get(name, 0))

    def peaks(self) -> dict[str, object]:
        """The maximum of every series (for the report)."""
        return {
            "device_used": {k: round(max(v, default=0.0), 4) for k, v in self.device_used.items()},
            "host_used": {k: round(max(v, default=0.0), 4) for k, v in self.host_used.items()},
            "load_backs_in_flight": max(self.load_backs_in_flight, default=0),
            "live_leases": {k: max(v, default=0) for k, v in self.live_leases.items()},
        }

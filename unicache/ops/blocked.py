"""`BlockLog`: how an eviction candidate held back by pins is counted, explained and recorded."""

from __future__ import annotations

from leases import EventKind, LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.reasons import Reason, ReasonKind, ReasonLog
from unicache.tree.node import Node


class BlockLog:
    """Notes a pinned eviction candidate: `evict_blocked`, a `PINNED` reason, a flight-recorder event."""

    __slots__ = ("_components", "_counters", "_reasons", "_ledger")

    def __init__(
        self, components: ComponentSet, counters: CacheCounters, reasons: ReasonLog, ledger: LeaseLedger
    ) -> None:
        self._components = components
        self._counters = counters
        self._reasons = reasons
        self._ledger = ledger

    def note(self, node: Node, component: str, tier: str) -> None:
        """Count `node` as held back from eviction on `tier` by the leases pinning it."""
        self._counters.evict_blocked += 1
        ids = tuple(
            lease_id
            for store in self._components.configured
            if (p := store.pins(node)) is not None
            for lease_id in p.ids()
        )
        op = "evict" if tier == "device" else "evict_host"
        self._reasons.note(Reason(op, ReasonKind.PINNED, component.lower(), (node.id,), leases=ids))
        ledger = self._ledger
        if ledger.history:
            ledger.record(
                EventKind.EVICT_BLOCKED, nodes=(node.id,), component=component,
                detail=f"pinned by leases {list(ids)} (tier {tier})",
            )

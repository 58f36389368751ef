"""`SplitCarrier`: on a node split, the new upper fragment inherits every pin and heap entry."""

from __future__ import annotations

from leases import LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.tree.node import Node


class SplitCarrier:
    """The tree's split callback: carries pins, heap entries and the duplicate index to the upper fragment."""

    __slots__ = ("_ledger", "_counters", "_components")

    def __init__(self, ledger: LeaseLedger, counters: CacheCounters, components: ComponentSet) -> None:
        self._ledger = ledger
        self._counters = counters
        self._components = components

    def on_split(self, upper: Node, lower: Node) -> None:
        """Carry every pin of `lower` to the new `upper` fragment; each store files `upper` in its heaps."""
        self._counters.splits += 1
        ledger = self._ledger
        for store in self._components.configured:
            pins = store.pins(lower)
            if pins is not None and pins:
                target = store.pin_set(upper)
                for lease in pins:
                    ledger.pin(lease, target)
            store.file_split(upper)

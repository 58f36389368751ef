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
        """Carry every pin of `lower` to the new `upper` fragment, with its heap entries."""
        self._counters.splits += 1
        ledger = self._ledger
        comps = self._components
        for store in comps.configured:
            pins = store.pins(lower)
            if pins is not None and pins:
                target = store.pin_set(upper)
                for lease in pins:
                    ledger.pin(lease, target)
        full = comps.full
        if full.on_device(upper):
            full.lru_device.push(upper)
            if full.on_host(upper):
                full.note_duplicate(upper)
        if comps.has_swa:
            swa = comps.swa
            if swa.device_slots(upper) is not None:
                swa.lru_device.push(upper)
            if swa.host_slots(upper) is not None:
                swa.lru_host.push(upper)

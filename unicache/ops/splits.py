"""`SplitCarrier`: on a node split, the new upper fragment inherits every pin and heap entry."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from leases import LeaseLedger, PinSet

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.tree.node import Node
from unicache.tree.pins import pins_full, pins_mamba, pins_swa

C = TypeVar("C")


def _carry(
    ledger: LeaseLedger,
    pins: PinSet[C, Node] | None,
    upper: Node,
    pins_of: Callable[[Node], PinSet[C, Node]],
) -> None:
    """Pin `upper` with every live lease in `pins` (so each lease now covers it too)."""
    if pins is None or not pins:
        return
    target = pins_of(upper)
    for lease in pins:
        ledger.pin(lease, target)


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
        _carry(ledger, lower.pins_full, upper, pins_full)
        _carry(ledger, lower.pins_swa, upper, pins_swa)
        _carry(ledger, lower.pins_mamba, upper, pins_mamba)
        comps = self._components
        if upper.dev_full is not None:
            comps.full.lru_device.push(upper)
            if upper.host_pages is not None:
                comps.full.note_duplicate(upper)
        if upper.dev_swa is not None:
            comps.swa.lru_device.push(upper)
        if upper.host_swa_pages is not None:
            comps.swa.lru_host.push(upper)

"""Node splits: the new upper fragment inherits every pin and heap entry of the original."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from leases import PinSet

from unicache.markers import FULL, SWA_IDX
from unicache.tree.node import Node
from unicache.tree.pins import pins_full, pins_mamba, pins_swa

if TYPE_CHECKING:
    from unicache.cache import UniCache

C = TypeVar("C")


def on_split(cache: UniCache, upper: Node, lower: Node) -> None:
    """Carry every pin of `lower` to the new `upper` fragment, with its heap entries."""
    cache.counters.splits += 1
    _carry(cache, lower.pins_full, upper, pins_full)
    _carry(cache, lower.pins_swa, upper, pins_swa)
    _carry(cache, lower.pins_mamba, upper, pins_mamba)
    if upper.dev_full is not None:
        cache._stores[FULL].lru_device.push(upper)
        if upper.host_pages is not None:
            cache._dups[upper.id] = upper
    if upper.dev_swa is not None:
        cache._stores[SWA_IDX].lru_device.push(upper)
    if upper.host_swa_pages is not None:
        cache._stores[SWA_IDX].lru_host.push(upper)


def _carry(
    cache: UniCache,
    pins: PinSet[C, Node] | None,
    upper: Node,
    pins_of: Callable[[Node], PinSet[C, Node]],
) -> None:
    """Pin `upper` with every live lease in `pins` (so each lease now covers it too)."""
    if pins is None or not pins:
        return
    target = pins_of(upper)
    for lease in pins:
        cache.ledger.pin(lease, target)

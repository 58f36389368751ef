"""`HandedValues`: the engine-owned mode of a paged store — the engine's index values, recorded and handed back.

In its default mode a store's columns hold slots of unicache's own pools, and
dropping a node's data frees them to the store's `SlotAllocator`. In the
engine-owned mode (`PagedStore.engine_owned`) the engine that embeds the
cache (SGLang's allocators, say) allocates every device and host index
itself and hands the values in (insert, load-back, backup); the store
records them in the same columns, one value per token
(`values_per_page` = the tree's page size), and never allocates. Where the
default mode would free, the store appends the node's values to this
outbox instead, and the caller drains it (`take_device`, `take_host`) into
its eviction results: what goes in comes back exactly once.

A store in this mode refuses to hand back values a live lease pins
(`PinnedValuesError` naming the node and the leases, before anything
changes): device values by the store's own pin sets (device locks,
in-flight copies reading them), host values by the host pin sets kept here
(`host_pin_set`: host locks and load-backs reading a host copy). Its two
allocators have capacity 0, so nothing can be allocated from them and any
free to them raises.
"""

from __future__ import annotations

from array import array
from typing import Any

from leases import PinSet

from unicache.errors import PinnedValuesError
from unicache.tree.node import Node


class HandedValues:
    """The values an engine-owned store hands back, per tier, in the order it dropped them; and its host pins."""

    __slots__ = ("component", "device", "host", "host_pin_sets", "host_marker")

    component: str
    device: list[list[int]]
    host: list[array[int]]
    host_pin_sets: dict[int, PinSet[Any, Node]]
    """Host pin sets by node slot (sparse: created on a node's first host pin)."""
    host_marker: type
    """The marker typing the host pin sets (one per store: its host tier)."""

    def __init__(self, component: str, host_marker: type) -> None:
        self.component = component
        self.device = []
        self.host = []
        self.host_pin_sets = {}
        self.host_marker = host_marker

    def take_device(self) -> list[list[int]]:
        """The device values handed back since the last call (each node's values, in drop order)."""
        out = self.device
        self.device = []
        return out

    def take_host(self) -> list[array[int]]:
        """The host values handed back since the last call."""
        out = self.host
        self.host = []
        return out

    def host_pin_set(self, node: Node) -> PinSet[Any, Node]:
        """The node's host pin set, created on first use (to pin its host values)."""
        slot = node.slot
        p = self.host_pin_sets.get(slot)
        if p is None:
            assert slot, f"node {node.id} is dead: it cannot be pinned"
            p = self.host_pin_sets[slot] = PinSet(self.host_marker, node)
        return p

    def host_pins(self, node: Node) -> PinSet[Any, Node] | None:
        """The node's host pin set, or None if never pinned (or dropped)."""
        return self.host_pin_sets.get(node.slot)

    def hand_device(self, node: Node, values: list[int], pins: PinSet[Any, Node] | None) -> None:
        """Record `node`'s device `values` as handed back; refused while `pins` (its device pins) holds a lease."""
        if pins:
            raise PinnedValuesError(self.component, "device", node.id, pins.ids())
        self.device.append(values)

    def check_host(self, node: Node) -> None:
        """Refuse (before anything changes) to hand back host values of a node a host lease pins."""
        p = self.host_pin_sets.get(node.slot)
        if p:
            raise PinnedValuesError(self.component, "host", node.id, p.ids())

    def clear(self, slot: int) -> None:
        """Forget a removed node's host pin set."""
        self.host_pin_sets.pop(slot, None)

    def truncate(self) -> None:
        """Forget every host pin set (a reset)."""
        self.host_pin_sets.clear()

"""Mamba: its store (one state slot per node and tier) and its rule (a state is usable on either tier)."""

from __future__ import annotations

from array import array

from leases import PinSet

from unicache.components.store import ComponentStore
from unicache.markers import MAMBA, Mamba
from unicache.pools.allocator import SlotAllocator
from unicache.tree.node import Node

NONE = -1
"""The column entry of a node without a state on that tier."""


class MambaStore(ComponentStore):
    """Recurrent state: one slot per node and tier, the state after the node's last token.

    Columns indexed by `Node.slot`: `dev` and `host_col` are compact
    `array("i")` with `NONE` (-1) for no state; `pin_sets` maps a slot to
    its pin set (sparse, as for the paged components).
    """

    __slots__ = ("dev", "host_col", "pin_sets")
    marker = Mamba
    index = MAMBA
    unit = "state"

    dev: array[int]
    host_col: array[int]
    pin_sets: dict[int, PinSet[Mamba, Node]]

    def __init__(self, device: SlotAllocator, host: SlotAllocator) -> None:
        self.dev = array("i", (NONE,))
        self.host_col = array("i", (NONE,))
        self.pin_sets = {}
        super().__init__(device, host)

    def state_present(self, node: Node) -> bool:
        """Whether the state at `node`'s end exists on device or host (the root needs none)."""
        slot = node.slot
        return node.parent is None or self.dev[slot] >= 0 or self.host_col[slot] >= 0

    def state_on_device(self, node: Node) -> bool:
        return node.parent is None or self.dev[node.slot] >= 0

    def device_state(self, node: Node) -> int | None:
        """The node's device state slot, or None."""
        s = self.dev[node.slot]
        return None if s < 0 else s

    def host_state(self, node: Node) -> int | None:
        """The node's host state slot, or None."""
        s = self.host_col[node.slot]
        return None if s < 0 else s

    def set_device_state(self, node: Node, state: int) -> None:
        self.dev[node.slot] = state

    def set_host_state(self, node: Node, state: int) -> None:
        self.host_col[node.slot] = state

    def pins(self, node: Node) -> PinSet[Mamba, Node] | None:
        return self.pin_sets.get(node.slot)

    def pin_set(self, node: Node) -> PinSet[Mamba, Node]:
        """The node's Mamba pin set, created on first use (to pin the node)."""
        slot = node.slot
        p = self.pin_sets.get(slot)
        if p is None:
            assert slot, f"node {node.id} is dead: it cannot be pinned"
            p = self.pin_sets[slot] = PinSet(Mamba, node)
        return p

    def device_slots(self, node: Node) -> list[int] | None:
        s = self.dev[node.slot]
        return None if s < 0 else [s]

    def host_slots(self, node: Node) -> list[int] | None:
        s = self.host_col[node.slot]
        return None if s < 0 else [s]

    def drop_device(self, node: Node) -> int:
        slot = node.slot
        s = self.dev[slot]
        assert s >= 0, node.id
        self.device.free([s])
        self.dev[slot] = NONE
        return 1

    def drop_host(self, node: Node) -> int:
        slot = node.slot
        s = self.host_col[slot]
        assert s >= 0, node.id
        self.host.free([s])
        self.host_col[slot] = NONE
        return 1

    def columns(self) -> int:
        return len(self.dev)

    def null_slot_empty(self) -> bool:
        return self.dev[0] < 0 and self.host_col[0] < 0 and 0 not in self.pin_sets

    def grow(self) -> None:
        self.dev.append(NONE)
        self.host_col.append(NONE)

    def clear(self, slot: int) -> None:
        self.dev[slot] = NONE
        self.host_col[slot] = NONE
        self.pin_sets.pop(slot, None)

    def truncate(self) -> None:
        del self.dev[1:]
        del self.host_col[1:]
        self.pin_sets.clear()

    def split(self, upper: Node, lower: Node, pages: int) -> None:
        """The state stays with `lower` (the state after the original node's end)."""

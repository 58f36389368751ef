"""Mamba: its store (one state slot per node and tier) and its rule (a state is usable on either tier)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from typing import TypeVar

from leases import PinSet

from unicache.components.handed import HandedValues
from unicache.components.store import ComponentStore, LoadPlan
from unicache.markers import MAMBA, Mamba
from unicache.pools.allocator import SlotAllocator
from unicache.tree.lru import EvictionQueue
from unicache.tree.node import Node

NONE = -1
"""The column entry of a node without a state on that tier."""

M = TypeVar("M", bound="MambaStore")


class MambaStore(ComponentStore):
    """Recurrent state: one slot per node and tier, the state after the node's last token.

    Columns indexed by `Node.slot`: `dev` and `host_col` are compact
    `array("i")` with `NONE` (-1) for no state; `pin_sets` maps a slot to
    its pin set (sparse, as for the paged components).

    Engine-owned mode (`engine_owned`): the columns hold the engine's state
    slot indices, handed in by the caller; dropping a state appends it to
    `handed` instead of freeing it (see `unicache.components.handed`).
    """

    __slots__ = ("dev", "host_col", "pin_sets", "handed")
    marker = Mamba
    index = MAMBA
    unit = "state"

    dev: array[int]
    host_col: array[int]
    pin_sets: dict[int, PinSet[Mamba, Node]]
    handed: HandedValues | None
    """The outbox of the engine-owned mode; None when the store's allocators own the slots."""

    def __init__(self, device: SlotAllocator, host: SlotAllocator) -> None:
        self.dev = array("i", (NONE,))
        self.host_col = array("i", (NONE,))
        self.pin_sets = {}
        self.handed = None
        super().__init__(device, host)

    @classmethod
    def engine_owned(cls: type[M], host_marker: type) -> M:
        """A store in engine-owned mode: state indices handed in and back, none allocated.

        Its allocators have capacity 0; `host_marker` types its host pin sets.
        """
        store = cls(SlotAllocator("Mamba device (engine-owned)", 0),
                    SlotAllocator("Mamba host (engine-owned)", 0, compact=True))
        store.handed = HandedValues("Mamba", host_marker)
        return store

    def on_device(self, node: Node) -> bool:
        return self.dev[node.slot] >= 0

    def on_host(self, node: Node) -> bool:
        return self.host_col[node.slot] >= 0

    def gather_device(self, nodes: Sequence[Node]) -> list[int]:
        dev = self.dev
        return [dev[x.slot] for x in nodes]

    def gather_host(self, nodes: Sequence[Node]) -> array[int]:
        host = self.host_col
        return array("i", [host[x.slot] for x in nodes])

    def segments(self, nodes: Sequence[Node], dst: list[int]) -> list[tuple[int, list[int]]]:
        """One segment per node, keyed by the node's end (a split leaves the state with the lower part)."""
        return [(x.end, dst[k : k + 1]) for k, x in enumerate(nodes)]

    def host_segments(self, nodes: Sequence[Node], dst: array[int]) -> list[tuple[int, array[int]]]:
        return [(x.end, dst[k : k + 1]) for k, x in enumerate(nodes)]

    def covers(self, segments: Sequence[tuple[int, Sequence[int]]], nodes: Sequence[Node]) -> bool:
        ends = {end for end, _ in segments}
        return all(x.end in ends for x in nodes)

    def moved(self, slots: int) -> int:
        return slots

    def match_marks(self, path: Sequence[Node], usable: bytearray, on_device: bytearray) -> None:
        """A node ends a match only with its state: on device to be used from device, on some tier to be
        usable after a load-back."""
        dev = self.dev
        host = self.host_col
        for k, node in enumerate(path):
            slot = node.slot
            if dev[slot] < 0:
                on_device[k] = 0
                if host[slot] < 0:
                    usable[k] = 0

    def host_need(self, anchor: Node) -> int:
        """1 when a load-back of `anchor` would move its state."""
        return 1 if anchor.parent is not None and self.dev[anchor.slot] < 0 else 0

    def load_back_plan(self, anchor: Node, chain: Sequence[Node]) -> LoadPlan:
        """The anchor's state moves when it is on host only; missing when it is on neither tier."""
        slot = anchor.slot
        if self.dev[slot] >= 0:
            return [], (), ()
        if self.host_col[slot] < 0:
            return [], (), (anchor.id,)
        return [anchor], (anchor,), ()

    def _publish(
        self, col: array[int], lru: EvictionQueue, bottom: Node, segments: Sequence[tuple[int, Sequence[int]]]
    ) -> list[int]:
        """File each segment's state at the node on `bottom`'s path ending there (pushed into `lru` in
        segment order); returns the slots of nodes that had a state already."""
        left: list[int] = []
        taken: list[Node] = []
        x: Node | None = bottom
        for end, slots in reversed(segments):
            while x is not None and x.end > end:
                x = x.parent
            if x is not None and x.end == end and col[x.slot] < 0:
                col[x.slot] = slots[0]
                taken.append(x)
            else:
                left.append(slots[0])
        left.reverse()
        for node in reversed(taken):
            lru.push(node)
        return left

    def publish_device(self, bottom: Node, segments: Sequence[tuple[int, list[int]]], clock: int) -> int:
        left = self._publish(self.dev, self.lru_device, bottom, segments)
        if left:
            self.device.free(left)
        return len(left)

    def publish_host(self, bottom: Node, segments: Sequence[tuple[int, array[int]]]) -> int:
        left = self._publish(self.host_col, self.lru_host, bottom, segments)
        if left:
            self.host.free(left)
        return len(left)

    def adopt_device(self, node: Node, slots: list[int]) -> bool:
        slot = node.slot
        if self.dev[slot] < 0:
            self.dev[slot] = slots[0]
            self.lru_device.push(node)
            return True
        self.device.free(slots)
        return False

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
        handed = self.handed
        if handed is None:
            self.device.free([s])
        else:
            handed.hand_device(node, [s], self.pin_sets.get(slot))
        self.dev[slot] = NONE
        return 1

    def drop_host(self, node: Node) -> int:
        slot = node.slot
        s = self.host_col[slot]
        assert s >= 0, node.id
        handed = self.handed
        if handed is None:
            self.host.free([s])
        else:
            handed.check_host(node)
            handed.host.append(array("i", (s,)))
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
        if self.handed is not None:
            self.handed.clear(slot)

    def truncate(self) -> None:
        del self.dev[1:]
        del self.host_col[1:]
        self.pin_sets.clear()
        if self.handed is not None:
            self.handed.truncate()

    def split(self, upper: Node, lower: Node, pages: int) -> None:
        """The state stays with `lower` (the state after the original node's end)."""

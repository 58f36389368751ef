"""Mamba: its store (one state slot per node and tier) and its rule (a state is usable on either tier)."""

from __future__ import annotations

from leases import PinSet

from unicache.markers import MAMBA, Mamba
from unicache.components.store import ComponentStore
from unicache.tree.node import Node


def state_present(node: Node) -> bool:
    """Whether the state at `node`'s end exists on device or host (the root needs none)."""
    return node.parent is None or node.dev_mamba is not None or node.host_mamba is not None


def state_on_device(node: Node) -> bool:
    return node.parent is None or node.dev_mamba is not None


class MambaStore(ComponentStore):
    """Recurrent state: one slot per node and tier, the state after the node's last token."""

    __slots__ = ()
    marker = Mamba
    index = MAMBA
    unit = "state"

    def pins(self, node: Node) -> PinSet[Mamba, Node] | None:
        return node.pins_mamba

    def device_slots(self, node: Node) -> list[int] | None:
        slot = node.dev_mamba
        return None if slot is None else [slot]

    def host_slots(self, node: Node) -> list[int] | None:
        slot = node.host_mamba
        return None if slot is None else [slot]

    def drop_device(self, node: Node) -> int:
        slot = node.dev_mamba
        assert slot is not None, node.id
        self.device.free([slot])
        node.dev_mamba = None
        return 1

    def drop_host(self, node: Node) -> int:
        slot = node.host_mamba
        assert slot is not None, node.id
        self.host.free([slot])
        node.host_mamba = None
        return 1

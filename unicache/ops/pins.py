"""A node's pin sets, created on first pin (most nodes are never pinned)."""

from __future__ import annotations

from typing import TypeVar

from leases import PinSet

from unicache.components.markers import SWA, Full, Mamba
from unicache.tree.node import Node

C = TypeVar("C")


def pins_full(node: Node) -> PinSet[Full]:
    p = node.pins_full
    if p is None:
        p = node.pins_full = PinSet(Full, node.id)
    return p


def pins_swa(node: Node) -> PinSet[SWA]:
    p = node.pins_swa
    if p is None:
        p = node.pins_swa = PinSet(SWA, node.id)
    return p


def pins_mamba(node: Node) -> PinSet[Mamba]:
    p = node.pins_mamba
    if p is None:
        p = node.pins_mamba = PinSet(Mamba, node.id)
    return p


def has_pins(p: PinSet[C] | None) -> bool:
    return p is not None and bool(p)

"""A node's pin sets (created on first pin) and the walk from a lease to the nodes it covers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from leases import Borrowed, Held, Lease, PinSet

from unicache.markers import SWA, Full, Mamba
from unicache.owners import LeaseOwner, OwnerKind
from unicache.tree.node import Node

C = TypeVar("C")


def pins_full(node: Node) -> PinSet[Full, Node]:
    p = node.pins_full
    if p is None:
        p = node.pins_full = PinSet(Full, node)
    return p


def pins_swa(node: Node) -> PinSet[SWA, Node]:
    p = node.pins_swa
    if p is None:
        p = node.pins_swa = PinSet(SWA, node)
    return p


def pins_mamba(node: Node) -> PinSet[Mamba, Node]:
    p = node.pins_mamba
    if p is None:
        p = node.pins_mamba = PinSet(Mamba, node)
    return p


def has_pins(p: PinSet[C, Node] | None) -> bool:
    return p is not None and bool(p)


def covered(lease: Borrowed[Lease[C, Held]]) -> list[Node]:
    """The nodes a lease covers: the holders of the pin sets it sits in (the one source of truth)."""
    out: list[Node] = []
    for p in lease.pin_sets():
        holder = p.holder
        if type(holder) is Node:
            out.append(holder)
    return out


def drop_empty(pin_sets: Iterable[PinSet[C]]) -> None:
    """Drop from its node each of `pin_sets` that no live lease is left in (it is made again on the next pin)."""
    for p in pin_sets:
        if p:
            continue
        node = p.holder
        if type(node) is not Node:
            continue
        if node.pins_full is p:
            node.pins_full = None
        elif node.pins_swa is p:
            node.pins_swa = None
        elif node.pins_mamba is p:
            node.pins_mamba = None


def owned_by(p: PinSet[C, Node] | None, kind: OwnerKind) -> list[LeaseOwner]:
    """The owners of `kind` among the leases in `p` (e.g. the backups copying this node)."""
    if not p:
        return []
    out: list[LeaseOwner] = []
    for lease in p:
        owner = lease.owner
        if type(owner) is LeaseOwner and owner.kind is kind:
            out.append(owner)
    return out


def backup_in_flight(node: Node, pins: PinSet[C, Node] | None = None) -> bool:
    """Whether an in-flight backup copies `node`'s Full KV (its Full lease pins the node).

    Pass another of the node's pin sets to ask about that component instead.
    """
    p = node.pins_full if pins is None else pins
    if not p:
        return False
    for lease in p:
        owner = lease.owner
        if type(owner) is LeaseOwner and owner.kind is OwnerKind.BACKUP:
            return True
    return False

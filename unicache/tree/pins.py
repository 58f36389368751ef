"""Questions to a node's pin sets, and the walk from a lease to the nodes it covers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from leases import Borrowed, Held, Lease, PinSet

from unicache.owners import LeaseOwner, OwnerKind
from unicache.tree.node import Node

C = TypeVar("C")


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
    """Drop from its node each of `pin_sets` that no live lease is left in (it is made again on the next pin).

    The node's tree lists the stores' pin sets by component (`RadixTree.pins`);
    a dead node (slot 0) holds none.
    """
    for p in pin_sets:
        if p:
            continue
        node = p.holder
        if type(node) is Node:
            slot = node.slot
            if slot:
                held = node.tree.pins.get(p.component)
                if held is not None and held.get(slot) is p:
                    del held[slot]


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


def backup_in_flight(pins: PinSet[C, Node] | None) -> bool:
    """Whether an in-flight backup holds a lease in `pins` (a node's pin set of one component).

    Asked of a node's Full pin set: is a backup copying its Full KV?
    """
    if not pins:
        return False
    for lease in pins:
        owner = lease.owner
        if type(owner) is LeaseOwner and owner.kind is OwnerKind.BACKUP:
            return True
    return False

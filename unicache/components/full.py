"""Full-KV rules: the evicted chain a load-back restores and the D-leaf test."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unicache.tree.node import Node


def evicted_chain(anchor: Node) -> tuple[list[Node], Node]:
    """The host-only nodes above `anchor` (anchor included), root-first, and the device node above them.

    Full device residency is prefix-closed, so the chain ends at the first
    device-resident ancestor (the root at worst).
    """
    chain: list[Node] = []
    node = anchor
    while node.dev_full is None:
        chain.append(node)
        parent = node.parent
        assert parent is not None, "the root is always device-resident"
        node = parent
    chain.reverse()
    return chain, node


def is_device_leaf(node: Node) -> bool:
    """Full on device and no child with Full on device: the only Full eviction candidates."""
    return node.dev_children == 0 and node.dev_full is not None and node.parent is not None


def deepest_device(node: Node) -> Node:
    """The deepest node on `node`'s path whose Full KV is on device (the root at worst)."""
    while node.dev_full is None:
        parent = node.parent
        assert parent is not None, "the root is always device-resident"
        node = parent
    return node

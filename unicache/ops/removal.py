"""`NodeRemoval`: freeing every slot of a node, and re-filing a parent whose child left."""

from __future__ import annotations

from collections.abc import Iterator

from unicache.components.catalog import ComponentSet
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree


def iter_subtree(node: Node) -> Iterator[Node]:
    """`node` and every node below it, parents before children."""
    stack = [node]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(x.children.values())


class NodeRemoval:
    """Frees a node's slots (every component, both tiers) and takes leaves out of the tree."""

    __slots__ = ("_tree", "_components")

    def __init__(self, tree: RadixTree, components: ComponentSet) -> None:
        self._tree = tree
        self._components = components

    def free_node(self, x: Node) -> int:
        """Free every slot `x` holds; returns the base's device pages freed."""
        comps = self._components
        freed = comps.base.free_node(x)
        for store in comps.aux:
            store.free_node(x)
        return freed

    def remove_leaf(self, x: Node) -> None:
        """Take the (slot-free) leaf `x` out of the tree; its parent is not re-filed."""
        self._tree.remove_leaf(x)

    def after_child_removed(self, parent: Node) -> None:
        """Re-file `parent` in the base heap it now belongs to (a device or a host leaf)."""
        if parent.parent is None:
            return
        base = self._components.base
        if base.on_device(parent):
            if base.is_device_leaf(parent):
                base.lru_device.push(parent)
        elif not parent.children and base.on_host(parent):
            base.lru_host.push(parent)

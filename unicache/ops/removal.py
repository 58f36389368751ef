"""`NodeRemoval`: freeing every slot of a node, and re-filing a parent whose child left."""

from __future__ import annotations

from collections.abc import Iterator

from unicache.components.catalog import ComponentSet
from unicache.components.store import ComponentStore
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

    __slots__ = ("_tree", "_components", "_aux")

    _aux: tuple[ComponentStore, ...]

    def __init__(self, tree: RadixTree, components: ComponentSet) -> None:
        self._tree = tree
        self._components = components
        self._aux = components.configured[1:]

    def free_node(self, x: Node) -> int:
        """Free every slot `x` holds; returns the Full device pages freed."""
        freed = self._components.full.free_node(x)
        for store in self._aux:
            store.free_node(x)
        return freed

    def remove_leaf(self, x: Node) -> None:
        """Take the (slot-free) leaf `x` out of the tree; its parent is not re-filed."""
        self._tree.remove_leaf(x)

    def after_child_removed(self, parent: Node) -> None:
        """Re-file `parent` in the Full heap it now belongs to (a device or a host leaf)."""
        if parent.parent is None:
            return
        full = self._components.full
        if full.on_device(parent):
            if full.is_device_leaf(parent):
                full.lru_device.push(parent)
        elif not parent.children and full.on_host(parent):
            full.lru_host.push(parent)

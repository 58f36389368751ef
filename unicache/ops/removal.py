"""Removing data from nodes: free every slot of a node, re-file a parent whose child left."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from unicache.components.full import is_device_leaf
from unicache.markers import FULL
from unicache.tree.node import Node

if TYPE_CHECKING:
    from unicache.cache import UniCache


def after_child_removed(cache: UniCache, parent: Node) -> None:
    if parent.parent is None:
        return
    if parent.dev_full is not None:
        if is_device_leaf(parent):
            cache._stores[FULL].lru_device.push(parent)
    elif not parent.children and parent.host_pages is not None:
        cache._stores[FULL].lru_host.push(parent)


def iter_subtree(cache: UniCache, node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(x.children.values())


def free_node(cache: UniCache, x: Node) -> int:
    """Free every slot a node holds, every component, both tiers; returns Full device pages freed."""
    freed = cache._full.free_node(x)
    for store in cache.stores[1:]:
        store.free_node(x)
    return freed

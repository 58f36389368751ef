"""Removing data from nodes: free every slot of a node, re-file a parent whose child left."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from unicache.components.full import is_device_leaf
from unicache.components.markers import FULL, MAMBA, SWA_IDX, Full
from unicache.tree.node import Node

if TYPE_CHECKING:
    from unicache.cache import UniCache


def after_child_removed(cache: UniCache, parent: Node) -> None:
    if parent.parent is None:
        return
    if parent.dev_full is not None:
        if is_device_leaf(parent):
            cache._lru_dev[FULL].push(parent)
    elif not parent.children and parent.host_pages is not None:
        cache._lru_host[FULL].push(parent)


def iter_subtree(cache: UniCache, node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(x.children.values())


def free_node(cache: UniCache, x: Node) -> int:
    """Free every slot a node holds on both tiers; returns Full device pages freed."""
    freed = 0
    if x.dev_full is not None:
        freed = len(x.dev_full)
        cache._fd.free(x.dev_full)
        x.dev_full = None
        if x.parent is not None:
            x.parent.dev_children -= 1
    if x.host_pages is not None:
        cache._fh.free(x.host_pages)
        x.host_pages = None
    if x.dev_swa is not None or x.host_swa_pages is not None:
        sd, sh = cache._dev[SWA_IDX], cache._host[SWA_IDX]
        assert sd is not None and sh is not None
        if x.dev_swa is not None:
            sd.free(x.dev_swa)
            x.dev_swa = None
        if x.host_swa_pages is not None:
            sh.free(x.host_swa_pages)
            x.host_swa_pages = None
    if x.dev_mamba is not None or x.host_mamba is not None:
        md, mh = cache._dev[MAMBA], cache._host[MAMBA]
        assert md is not None and mh is not None
        if x.dev_mamba is not None:
            md.free([x.dev_mamba])
            x.dev_mamba = None
        if x.host_mamba is not None:
            mh.free([x.host_mamba])
            x.host_mamba = None
    return freed

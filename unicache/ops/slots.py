"""Request-owned device slots handed back, and the pages of a path."""

from __future__ import annotations

from collections.abc import Sequence

from unicache.errors import DoubleFreeError, InvalidArgumentError, InvalidSlotError
from unicache.components.store import ComponentStore
from unicache.pools.allocator import SlotAllocator
from unicache.transfer.base import Tier
from unicache.tree.node import Node


def free_lent(alloc: SlotAllocator, slots: Sequence[int]) -> None:
    """Hand request-owned device slots back to `alloc` (all or none); typed errors name the bad ones."""
    s = list(slots)
    if alloc.free_lent(s):
        return
    already = sorted({x for x in s if 0 <= x < alloc.capacity and alloc.is_free(x)})
    if already:
        raise DoubleFreeError(alloc.name, already)
    bad = sorted({x for x in s if not alloc.is_lent(x)})
    raise InvalidSlotError(
        alloc.name, bad or s, "are not owned by a request (alloc_device) or are listed twice"
    )


def path_pages(node: Node, store: ComponentStore, tier: Tier) -> list[int]:
    """The slots of `store`'s component of the whole path ending at `node`, root first, on one tier.

    Raises `InvalidArgumentError` if a node of the path lacks them (e.g. a
    host-only node asked for device pages, or an SWA tombstone).
    """
    out: list[int] = []
    for x in node.path():
        pages = store.device_slots(x) if tier is Tier.DEVICE else store.host_slots(x)
        if pages is None:
            raise InvalidArgumentError(
                f"path_pages: node {x.id} holds no {store.name} pages on {tier.value}"
            )
        out += pages
    return out

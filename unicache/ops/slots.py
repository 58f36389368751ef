"""Request-owned device slots, allocation with eviction, and the pages of a path."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

from unicache.markers import FULL, MAMBA, Component, Full
from unicache import guards
from unicache.errors import DoubleFreeError, InvalidArgumentError, InvalidSlotError
from unicache.reasons import Reason, no_room
from unicache.transfer.base import Tier
from unicache.tree.node import Node

if TYPE_CHECKING:
    import torch

    from unicache.cache import UniCache


def alloc_device(cache: UniCache, component: type, n: int) -> list[int] | None:
    """`n` device pages (Full/SWA) or Mamba slots for a request, evicting on shortfall.

    None when even eviction cannot make room (what is left is pinned,
    quarantined or under in-flight copies): counted per component
    (`alloc_refused_*`; a Mamba slot also as `mamba_skipped`) and noted as
    a `NO_DEVICE_ROOM` reason. The slots belong to the caller until it donates them to `insert` or
    hands them back with `free_device`.
    """
    n = guards.count(cache, "alloc_device", n)
    i = cache._cidx(component)
    alloc = cache._stores[i].device
    got = alloc.alloc_lent(n)
    if got is None and n > alloc.capacity:
        _refused(cache, i, n, alloc.free_count)
    elif got is None:
        cache._evict_dev(i, n - alloc.free_count)
        got = alloc.alloc_lent(n)
        if got is None:
            _refused(cache, i, n, alloc.free_count)
    return got


def _refused(cache: UniCache, i: int, n: int, free: int) -> None:
    c = cache.counters
    if i == FULL:
        c.alloc_refused_full += 1
    elif i == MAMBA:
        c.alloc_refused_mamba += 1
        c.mamba_skipped += 1
    else:
        c.alloc_refused_swa += 1
    cache.reasons.note(no_room_reason(cache, "alloc_device", i, n, ()))


def no_room_reason(cache: UniCache, op: str, i: int, needed: int, nodes: tuple[int, ...]) -> Reason:
    """A `NO_DEVICE_ROOM` reason for component index `i` (see `unicache.reasons.no_room`)."""
    store = cache._stores[i]
    return no_room(op, store.marker, store.device, cache.ticket_table.live(), needed, nodes)


def free_device(cache: UniCache, component: type, slots: Sequence[int]) -> None:
    """Hand request-owned device slots back (from `alloc_device`, not donated)."""
    guards.owner_thread(cache, "free_device")
    i = cache._cidx(component)
    alloc = cache._stores[i].device
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


def write_slots(
    cache: UniCache,
    component: type,
    slots: Sequence[int],
    data: torch.Tensor,
    tier: Tier = Tier.DEVICE,
) -> None:
    """Store rows into a pool (tests and the engine's reference model)."""
    guards.owner_thread(cache, "write_slots")
    cache._cidx(component)
    cache.pools.write(component, tier, slots, data)


def read_slots(
    cache: UniCache, component: type, slots: Sequence[int], tier: Tier = Tier.DEVICE
) -> torch.Tensor:
    """A CPU copy of rows of a pool."""
    cache._cidx(component)
    return cache.pools.read(component, tier, slots)


def alloc_dev(cache: UniCache, i: int, n: int) -> list[int] | None:
    alloc = cache._stores[i].device
    got = alloc.alloc(n)
    if got is None:
        cache._evict_dev(i, n - alloc.free_count)
        got = alloc.alloc(n)
    return got


def alloc_host(cache: UniCache, i: int, n: int) -> array[int] | None:
    alloc = cache._stores[i].host
    got = alloc.alloc_compact(n)
    if got is None:
        cache._evict_host(i, n - alloc.free_count)
        got = alloc.alloc_compact(n)
    return got


def lent_slots(cache: UniCache, component: Component) -> set[int]:
    """Device slots currently owned by requests (allocated, not yet donated or freed)."""
    return set(cache._stores[cache._cidx(component)].device.lent())


def path_pages(
    cache: UniCache, node: Node, component: type = Full, tier: Tier = Tier.DEVICE
) -> list[int]:
    """The pages (Full/SWA) of the whole path ending at `node`, root first, on one tier.

    Raises `InvalidArgumentError` if a node of the path lacks them (e.g. a
    host-only node asked for device pages, or an SWA tombstone).
    """
    cache._check_node(node)
    i = cache._cidx(component)
    if i == MAMBA:
        raise InvalidArgumentError("path_pages: Mamba has one state per node, not pages")
    out: list[int] = []
    for x in node.path():
        if i == FULL:
            pages = x.dev_full if tier is Tier.DEVICE else x.host_pages
        else:
            pages = x.dev_swa if tier is Tier.DEVICE else x.host_swa_pages
        if pages is None:
            raise InvalidArgumentError(
                f"path_pages: node {x.id} holds no {component.__name__} pages on {tier.value}"
            )
        out += pages
    return out

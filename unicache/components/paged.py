"""`PagedStore`: a component holding one slot per page of a node's key on each tier (Full, SWA)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from leases import PinSet
from mypy_extensions import mypyc_attr

from unicache.components.handed import HandedValues
from unicache.components.store import ComponentStore, segment_parts
from unicache.pools.allocator import SlotAllocator
from unicache.tree.node import Node

C = TypeVar("C")
S = TypeVar("S", bound="PagedStore[Any]")


@mypyc_attr(allow_interpreted_subclasses=True)
class PagedStore(ComponentStore, Generic[C]):
    """Pages per node on device (`list`) and host (compact `array("i")`), and a pin set per node.

    Columns indexed by `Node.slot`: `dev` (device pages or None), `host_col`
    (host pages or None). Pin sets are rare (a node is pinned only while a
    request or a copy uses it), so they are kept sparse: `pin_sets` maps a
    slot to its pin set, created on the node's first pin and dropped when a
    release drains it. Slot 0 is the null slot of dead nodes and stays
    empty everywhere.

    Engine-owned mode (`engine_owned`): the columns hold the engine's index
    values, one per token (`values_per_page` = the page size), which the
    caller hands in; dropping a node's data appends them to `handed` instead
    of freeing them (see `unicache.components.handed`). `handed` is None in
    the default mode, where the store's allocators own the slots.
    """

    __slots__ = ("dev", "host_col", "pin_sets", "component", "handed", "values_per_page")

    dev: list[list[int] | None]
    host_col: list[array[int] | None]
    pin_sets: dict[int, PinSet[C, Node]]
    component: type[C]
    """The marker (`marker`), typed for the pin sets it makes."""
    handed: HandedValues | None
    """The outbox of the engine-owned mode; None when the store's allocators own the slots."""
    values_per_page: int
    """Column entries per page of a node's key: 1 (a slot a page), or the page size in engine-owned mode."""

    def __init__(self, device: SlotAllocator, host: SlotAllocator) -> None:
        self.dev = [None]
        self.host_col = [None]
        self.pin_sets = {}
        self.component = self.marker
        self.handed = None
        self.values_per_page = 1
        super().__init__(device, host)

    @classmethod
    def engine_owned(cls: type[S], page_size: int, host_marker: type) -> S:
        """A store in engine-owned mode: one column entry per token, index values handed in and back.

        Its allocators have capacity 0 (nothing can be allocated from them);
        `host_marker` types its host pin sets.
        """
        if page_size < 1:
            raise ValueError(f"{cls.__name__}: page_size must be >= 1, got {page_size}")
        name = cls.marker.__name__
        store = cls(SlotAllocator(f"{name} device (engine-owned)", 0),
                    SlotAllocator(f"{name} host (engine-owned)", 0, compact=True))
        store.configure(page_size, 0)
        store.handed = HandedValues(name, host_marker)
        store.values_per_page = page_size
        return store

    def _hand_or_free_device(self, node: Node, values: list[int]) -> None:
        """Give `values` (device data `node` no longer holds) back: to the engine, or to the allocator."""
        handed = self.handed
        if handed is None:
            self.device.free(values)
        else:
            handed.hand_device(node, values, None)

    def _hand_or_free_host(self, values: array[int]) -> None:
        handed = self.handed
        if handed is None:
            self.host.free(values)
        else:
            handed.host.append(values)

    def pins(self, node: Node) -> PinSet[C, Node] | None:
        return self.pin_sets.get(node.slot)

    def pin_set(self, node: Node) -> PinSet[C, Node]:
        """The node's pin set of this component, created on first use (to pin the node)."""
        slot = node.slot
        p = self.pin_sets.get(slot)
        if p is None:
            assert slot, f"node {node.id} is dead: it cannot be pinned"
            p = self.pin_sets[slot] = PinSet(self.component, node)
        return p

    def device_slots(self, node: Node) -> list[int] | None:
        return self.dev[node.slot]

    def host_slots(self, node: Node) -> array[int] | None:
        return self.host_col[node.slot]

    def on_device(self, node: Node) -> bool:
        return self.dev[node.slot] is not None

    def on_host(self, node: Node) -> bool:
        return self.host_col[node.slot] is not None

    def segments(self, nodes: Sequence[Node], dst: list[int]) -> list[tuple[int, list[int]]]:
        """One (first token, pages) segment per node."""
        ps = self.page_size
        out: list[tuple[int, list[int]]] = []
        k = 0
        for x in nodes:
            w = (x.end - x.start) // ps
            out.append((x.start, dst[k : k + w]))
            k += w
        return out

    def host_segments(self, nodes: Sequence[Node], dst: array[int]) -> list[tuple[int, array[int]]]:
        ps = self.page_size
        out: list[tuple[int, array[int]]] = []
        k = 0
        for x in nodes:
            w = (x.end - x.start) // ps
            out.append((x.start, dst[k : k + w]))
            k += w
        return out

    def covers(self, segments: Sequence[tuple[int, Sequence[int]]], nodes: Sequence[Node]) -> bool:
        ps = self.page_size
        for x in nodes:
            if not any(s <= x.start and x.end <= s + len(pages) * ps for s, pages in segments):
                return False
        return True

    def moved(self, slots: int) -> int:
        return slots * self.page_size

    def publish_device(self, bottom: Node, segments: Sequence[tuple[int, list[int]]], clock: int) -> int:
        dev = self.dev
        lru = self.lru_device
        dups = 0
        for x, k, lo, hi in segment_parts(bottom, segments, self.page_size):
            part = segments[k][1][lo:hi]
            if dev[x.slot] is None:
                dev[x.slot] = part
                lru.push(x)
            else:
                self._hand_or_free_device(x, part)
                dups += len(part)
        return dups

    def publish_host(self, bottom: Node, segments: Sequence[tuple[int, array[int]]]) -> int:
        host = self.host_col
        lru = self.lru_host
        dups = 0
        for x, k, lo, hi in segment_parts(bottom, segments, self.page_size):
            part = segments[k][1][lo:hi]
            if host[x.slot] is None:
                host[x.slot] = part
                lru.push(x)
            else:
                self._hand_or_free_host(part)
                dups += len(part)
        return dups

    def adopt_device(self, node: Node, slots: list[int]) -> bool:
        slot = node.slot
        if self.dev[slot] is None:
            self.dev[slot] = slots
            self.lru_device.push(node)
            return True
        self._hand_or_free_device(node, slots)
        return False

    def file_split(self, upper: Node) -> None:
        """A new upper fragment holding pages is filed in the heaps of the tiers it holds them on."""
        if self.dev[upper.slot] is not None:
            self.lru_device.push(upper)
        if self.host_col[upper.slot] is not None:
            self.lru_host.push(upper)

    def host_list(self, node: Node) -> list[int] | None:
        """The node's host pages as a list (a copy of the compact array), or None."""
        pages = self.host_col[node.slot]
        return None if pages is None else pages.tolist()

    def set_device(self, node: Node, pages: list[int]) -> None:
        """Record `pages` (one per page of `node`'s key) as the node's device pages."""
        self.dev[node.slot] = pages

    def set_host(self, node: Node, pages: array[int]) -> None:
        """Record `pages` as the node's host pages."""
        self.host_col[node.slot] = pages

    def gather_device(self, nodes: Sequence[Node]) -> list[int]:
        """The device pages of `nodes` concatenated (each must hold some)."""
        dev = self.dev
        out: list[int] = []
        for x in nodes:
            pages = dev[x.slot]
            assert pages is not None, x.id
            out += pages
        return out

    def gather_host(self, nodes: Sequence[Node]) -> array[int]:
        """The host pages of `nodes` concatenated, compact (each must hold some)."""
        host = self.host_col
        out = array("i")
        for x in nodes:
            pages = host[x.slot]
            assert pages is not None, x.id
            out += pages
        return out

    def drop_device(self, node: Node) -> int:
        slot = node.slot
        pages = self.dev[slot]
        assert pages is not None, node.id
        handed = self.handed
        if handed is None:
            self.device.free(pages)
        else:
            handed.hand_device(node, pages, self.pin_sets.get(slot))
        self.dev[slot] = None
        return len(pages)

    def drop_host(self, node: Node) -> int:
        slot = node.slot
        pages = self.host_col[slot]
        assert pages is not None, node.id
        handed = self.handed
        if handed is None:
            self.host.free(pages)
        else:
            handed.check_host(node)
            handed.host.append(pages)
        self.host_col[slot] = None
        return len(pages)

    def columns(self) -> int:
        return len(self.dev)

    def null_slot_empty(self) -> bool:
        return self.dev[0] is None and self.host_col[0] is None and 0 not in self.pin_sets

    def grow(self) -> None:
        self.dev.append(None)
        self.host_col.append(None)

    def clear(self, slot: int) -> None:
        self.dev[slot] = None
        self.host_col[slot] = None
        self.pin_sets.pop(slot, None)
        if self.handed is not None:
            self.handed.clear(slot)

    def truncate(self) -> None:
        del self.dev[1:]
        del self.host_col[1:]
        self.pin_sets.clear()
        if self.handed is not None:
            self.handed.truncate()

    def split(self, upper: Node, lower: Node, pages: int) -> None:
        u, lo = upper.slot, lower.slot
        pages *= self.values_per_page
        dev = self.dev
        d = dev[lo]
        if d is not None:
            dev[u] = d[:pages]
            dev[lo] = d[pages:]
        host = self.host_col
        h = host[lo]
        if h is not None:
            host[u] = h[:pages]
            host[lo] = h[pages:]

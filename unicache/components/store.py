"""`ComponentStore`: the one object per cache component that owns its slots, heaps and per-node state.

A component (Full, SWA, Mamba, or one added later) is a store: it owns its
device and host slot allocators, its two eviction heaps (device, host), the
device slots lent to requests, and its per-node state: the node's device
and host slots and its pin set, kept in dense columns indexed by
`Node.slot` (see `NodeColumns` in `unicache/tree/radix.py`: the tree grows,
clears and splits every registered store's columns, so no tree or node code
names a component). The store's methods are the only access path to that
state.

A store also owns its share of every operation, so the operations in
`unicache/ops/` iterate over the configured stores and name none:

- lock: which nodes its lease pins (`lock_nodes`);
- match: which path nodes are usable on either tier / on device
  (`match_marks`) and how much a load-back would move (`host_need`);
- load-back: which nodes move (`load_back_plan`), the destination segments
  (`segments`), what the move counts as (`moved`), whether a copy in
  flight covers them (`covers`), and publishing the device copy at the ack
  (`publish_device`);
- backup: which nodes of a chain need a host copy (`backup_nodes`) and
  publishing it at the ack (`publish_host`);
- eviction: whether a node holds its data on device only
  (`device_only`), and taking over request pages at insert
  (`adopt_device`).

The base store (Full, index 0) additionally defines the tree's device
residency: its device copy is prefix-closed, its chain is what a load-back
or backup moves first, and evicting it takes every other component of the
node down with it (`ComponentSet.base`).

Compiled (the optional mypyc build), the class still admits interpreted
subclasses (`allow_interpreted_subclasses`), so a store defined outside
the compiled set works in both builds.

To add a component: a marker class (`unicache/markers.py`), a store
subclass in its own module implementing the abstract methods below (a
paged component subclasses `PagedStore`, which implements every share
with the defaults a paged component needs), and one entry in
`components/registry.py`.
"""

from __future__ import annotations

import abc
from array import array
from collections.abc import Sequence
from collections.abc import Iterator
from typing import Any, ClassVar

from leases import PinSet
from mypy_extensions import mypyc_attr

from unicache.markers import ComponentIndex
from unicache.pools.allocator import SlotAllocator
from unicache.tree.lru import EvictionQueue, new_lru
from unicache.tree.node import Node

LoadPlan = tuple[list[Node], Sequence[Node], tuple[int, ...]]
"""One store's share of a load-back: (the nodes that move, root first; the nodes its lease pins; the
ids of nodes whose data is on neither tier, a refusal when non-empty)."""


def segment_parts(
    bottom: Node, segments: Sequence[tuple[int, Sequence[int]]], page_size: int
) -> Iterator[tuple[Node, int, int, int]]:
    """(node, segment index, first, end page in that segment) for each node on `bottom`'s path
    inside a segment.

    Segments are kept by token position, so nodes split while the copy was in
    flight still find their pages. (Offsets rather than slices: no
    value-restricted TypeVar, which the compiled build cannot take.)
    """
    lo = min(s for s, _ in segments)
    x: Node | None = bottom
    while x is not None and x.parent is not None and x.end > lo:
        for k, (s, pages) in enumerate(segments):
            if s <= x.start and x.end <= s + len(pages) * page_size:
                yield x, k, (x.start - s) // page_size, (x.end - s) // page_size
                break
        x = x.parent


@mypyc_attr(allow_interpreted_subclasses=True)
class ComponentStore(abc.ABC):
    """One component of one cache: allocators, eviction heaps, lent slots, per-node columns."""

    __slots__ = (
        "device", "host", "lru_device", "lru_host", "page_size", "component_index", "component_marker",
    )

    marker: ClassVar[type]
    """The component marker class (`Full`, `SWA`, `Mamba`) typing its leases and pin sets."""
    index: ClassVar[ComponentIndex]
    """Its place in eviction priority (0 highest); also picks its two heap bits (`2 * index` and the
    next: any number of components fit in `Node.lru`)."""
    unit: ClassVar[str]
    """What one slot holds, for messages: "page" or "state"."""

    device: SlotAllocator
    host: SlotAllocator
    lru_device: EvictionQueue
    lru_host: EvictionQueue
    page_size: int
    """Tokens per page (set by `configure`; 1 until then)."""
    component_index: ComponentIndex
    """`index`, on the instance: the operations' hot paths read it (compiled, a class variable is a
    generic attribute lookup)."""
    component_marker: type
    """`marker`, on the instance (as `component_index`)."""

    def __init__(self, device: SlotAllocator, host: SlotAllocator) -> None:
        self.device = device
        self.host = host
        self.page_size = 1
        self.component_index = self.index
        self.component_marker = self.marker
        self.new_tree()

    def configure(self, page_size: int, window: int) -> None:
        """Take the cache's geometry (`window`: the SWA window, 0 if none; most stores ignore it)."""
        self.page_size = page_size

    @property
    def name(self) -> str:
        return self.marker.__name__

    def new_tree(self) -> None:
        """Fresh, empty eviction heaps (a new tree after `reset`)."""
        shift = 2 * self.index
        self.lru_device = new_lru(1 << shift)
        self.lru_host = new_lru(2 << shift)

    @abc.abstractmethod
    def pins(self, node: Node) -> PinSet[Any, Node] | None:
        """The node's pin set of this component, or None if never pinned (or drained)."""

    @abc.abstractmethod
    def pin_set(self, node: Node) -> PinSet[Any, Node]:
        """The node's pin set of this component, created on first use (to pin the node)."""

    def pin_sets_of(self, nodes: Sequence[Node]) -> tuple[PinSet[Any, Node], ...]:
        """The pin sets of `nodes` (each created on first use), for a lease that pins them."""
        out = [self.pin_set(x) for x in nodes]
        return tuple(out)

    @abc.abstractmethod
    def device_slots(self, node: Node) -> Sequence[int] | None:
        """The node's device slots of this component, or None."""

    @abc.abstractmethod
    def host_slots(self, node: Node) -> Sequence[int] | None:
        """The node's host slots of this component, or None."""

    @abc.abstractmethod
    def drop_device(self, node: Node) -> int:
        """Free the node's device slots (the node must hold some); returns how many."""

    @abc.abstractmethod
    def drop_host(self, node: Node) -> int:
        """Free the node's host slots (the node must hold some); returns how many."""

    @abc.abstractmethod
    def columns(self) -> int:
        """How many slots the columns hold (the tree's slot count; for sanity checks)."""

    @abc.abstractmethod
    def null_slot_empty(self) -> bool:
        """Whether slot 0 (the null slot of dead nodes) holds nothing in every column (for sanity checks)."""

    @abc.abstractmethod
    def grow(self) -> None:
        """Append one empty entry to every column (the tree handed out a new slot)."""

    @abc.abstractmethod
    def clear(self, slot: int) -> None:
        """Empty every column at `slot` (its node was removed)."""

    @abc.abstractmethod
    def truncate(self) -> None:
        """Keep only the null slot 0 in every column (a reset)."""

    @abc.abstractmethod
    def split(self, upper: Node, lower: Node, pages: int) -> None:
        """Move the first `pages` pages of `lower`'s state to the new `upper` fragment."""

    pin_sets: dict[int, PinSet[Any, Node]]
    """The node pin sets by slot (sparse; a subclass narrows the component)."""

    def init_root(self, root: Node) -> None:
        """Give a fresh root its state (only Full has any)."""

    def pinned(self, node: Node) -> bool:
        p = self.pins(node)
        return p is not None and bool(p)

    def free_node(self, node: Node) -> int:
        """Free whatever the node holds of this component on both tiers; device slots freed."""
        freed = 0
        if self.device_slots(node) is not None:
            freed = self.drop_device(node)
        if self.host_slots(node) is not None:
            self.drop_host(node)
        return freed

    @abc.abstractmethod
    def on_device(self, node: Node) -> bool:
        """Whether `node` holds this component's data on device."""

    @abc.abstractmethod
    def on_host(self, node: Node) -> bool:
        """Whether `node` holds this component's data on host."""

    @abc.abstractmethod
    def gather_device(self, nodes: Sequence[Node]) -> list[int]:
        """The device slots of `nodes` concatenated (each must hold some)."""

    @abc.abstractmethod
    def gather_host(self, nodes: Sequence[Node]) -> array[int]:
        """The host slots of `nodes` concatenated, compact (each must hold some)."""

    @abc.abstractmethod
    def segments(self, nodes: Sequence[Node], dst: list[int]) -> list[tuple[int, list[int]]]:
        """`dst` (slots for `nodes`, in `gather_*` order) cut into (token position, slots) segments.

        Positions survive splits of a node under an in-flight copy: a paged
        store keys a segment by its first token, a state store by the end
        of the node whose state it is.
        """

    @abc.abstractmethod
    def host_segments(self, nodes: Sequence[Node], dst: array[int]) -> list[tuple[int, array[int]]]:
        """`segments` for a host destination (compact)."""

    @abc.abstractmethod
    def covers(self, segments: Sequence[tuple[int, Sequence[int]]], nodes: Sequence[Node]) -> bool:
        """Whether `segments` (of a copy in flight) hold every node of `nodes`."""

    @abc.abstractmethod
    def moved(self, slots: int) -> int:
        """What moving `slots` slots counts as in results and counters (tokens; a state: 1)."""

    @abc.abstractmethod
    def publish_device(self, bottom: Node, segments: Sequence[tuple[int, list[int]]], clock: int) -> int:
        """Give each node on `bottom`'s path its device slots from `segments` (a load-back's ack).

        A node that has them already keeps its own: those slots are freed
        and counted in the returned duplicate count.
        """

    @abc.abstractmethod
    def publish_host(self, bottom: Node, segments: Sequence[tuple[int, array[int]]]) -> int:
        """Give each node on `bottom`'s path its host slots from `segments` (a backup's ack); duplicates
        freed and returned as for `publish_device`."""

    @abc.abstractmethod
    def adopt_device(self, node: Node, slots: list[int]) -> bool:
        """File request-owned `slots` as `node`'s device data (an insert); False when the node has its
        own already (the slots are freed)."""

    def file_split(self, upper: Node) -> None:
        """File the new `upper` fragment of a split in this component's heaps (after `split`)."""

    def device_only(self, node: Node) -> bool:
        """Whether `node` holds this component's data on device with no host copy (lost if evicted)."""
        return self.on_device(node) and not self.on_host(node)

    def lock_nodes(self, end: Node) -> Sequence[Node]:
        """The nodes a lock of the path ending at (device-resident) `end` pins of this component."""
        return (end,) if self.on_device(end) else ()

    def match_marks(self, path: Sequence[Node], usable: bytearray, on_device: bytearray) -> None:
        """Clear `usable[k]` / `on_device[k]` where `path[k]` (root-first) cannot end a match for this
        component on either tier / straight from device.

        The default (a component kept where present, like `load_back_plan`'s):
        a node holding its data on host only is not usable straight from
        device; a node without any is no obstacle.
        """
        for k, node in enumerate(path):
            if not self.on_device(node) and self.on_host(node):
                on_device[k] = 0

    def host_need(self, anchor: Node) -> int:
        """How much a load-back of `anchor` would move of this component (tokens; a state: 1)."""
        if anchor.parent is None or self.on_device(anchor) or not self.on_host(anchor):
            return 0
        slots = self.host_slots(anchor)
        return self.moved(len(slots) if slots is not None else 0)

    def load_back_plan(self, anchor: Node, chain: Sequence[Node]) -> LoadPlan:
        """What a load-back of `anchor` moves of this component; `chain` is the base store's move.

        The default (a component kept along the path like the base): the
        chain's nodes that hold a host copy and no device copy move.
        """
        move = [x for x in chain if self.on_host(x) and not self.on_device(x)]
        return move, move, ()

    def backup_nodes(self, chain: Sequence[Node]) -> list[Node]:
        """The nodes of a backed-up chain whose data of this component needs a host copy."""
        return [x for x in chain if self.device_only(x)]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} device={self.device.name} host={self.host.name}>"


"""`ComponentStore`: the one object per cache component that owns its slots, heaps and per-node state.

A component (Full, SWA, Mamba, or one added later) is a store: it owns its
device and host slot allocators, its two eviction heaps (device, host), the
device slots lent to requests, and its per-node state: the node's device
and host slots and its pin set, kept in dense columns indexed by
`Node.slot` (see `NodeColumns` in `unicache/tree/radix.py`: the tree grows,
clears and splits every registered store's columns, so no tree or node code
names a component). The store's methods are the only access path to that
state. The cache iterates over its configured stores wherever the work is
the same for every component (freeing a node, pool accounting, host
eviction of a component's state, sanity checks); the operations that
differ per component (Full's prefix-closed chain, SWA's window, Mamba's
single state) call the store they need.

Compiled (the optional mypyc build), the class still admits interpreted
subclasses (`allow_interpreted_subclasses`), so a store defined outside
the compiled set works in both builds.

To add a component: a marker class (`unicache/markers.py`), a store
subclass in its own module implementing the abstract methods below (a
paged component subclasses `PagedStore`), and one entry in
`components/registry.py`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

from leases import PinSet
from mypy_extensions import mypyc_attr

from unicache.pools.allocator import SlotAllocator
from unicache.tree.lru import EvictionQueue, new_lru
from unicache.tree.node import Node


@mypyc_attr(allow_interpreted_subclasses=True)
class ComponentStore(abc.ABC):
    """One component of one cache: allocators, eviction heaps, lent slots, per-node columns."""

    __slots__ = ("device", "host", "lru_device", "lru_host")

    marker: ClassVar[type]
    """The component marker class (`Full`, `SWA`, `Mamba`) typing its leases and pin sets."""
    index: ClassVar[int]
    """Its place in eviction priority (0 highest); also picks its heap bits."""
    unit: ClassVar[str]
    """What one slot holds, for messages: "page" or "state"."""

    device: SlotAllocator
    host: SlotAllocator
    lru_device: EvictionQueue
    lru_host: EvictionQueue

    def __init__(self, device: SlotAllocator, host: SlotAllocator) -> None:
        self.device = device
        self.host = host
        self.new_tree()

    @property
    def name(self) -> str:
        return self.marker.__name__

    def new_tree(self) -> None:
        """Fresh, empty eviction heaps (a new tree after `reset`)."""
        self.lru_device = new_lru(1 << self.index)
        self.lru_host = new_lru(8 << self.index)

    @abc.abstractmethod
    def pins(self, node: Node) -> PinSet[Any, Node] | None:
        """The node's pin set of this component, or None if never pinned (or drained)."""

    @abc.abstractmethod
    def pin_set(self, node: Node) -> PinSet[Any, Node]:
        """The node's pin set of this component, created on first use (to pin the node)."""

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

    def __repr__(self) -> str:
        return f"<{type(self).__name__} device={self.device.name} host={self.host.name}>"

"""`RadixTree`: paged radix tree structure — walk, split, add, remove; no residency policy."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import count
from typing import Any, Protocol, TypeVar

from leases import PinSet

from unicache.tree.keys import max_token_id
from unicache.tree.node import Node

K = TypeVar("K", bytes, tuple[int, ...])


def common_pages(a: K, b: K, page_size: int) -> int:
    """Length of the longest common prefix of `a` and `b` in whole pages of `page_size` items.

    Works on token tuples and on key bytes (pass the page size in bytes then).
    """
    limit = min(len(a), len(b))
    limit -= limit % page_size
    if a[:limit] == b[:limit]:
        return limit
    lo, hi = 0, limit // page_size  # lo pages equal, hi pages differ
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[: mid * page_size] == b[: mid * page_size]:
            lo = mid
        else:
            hi = mid
    return lo * page_size


class NodeColumns(Protocol):
    """Per-node state kept outside `Node`, in columns indexed by `Node.slot` (a component store).

    The tree registers each and keeps every column as long as its slot
    count: it grows them for a new slot, clears a removed node's slot, and
    lets each split its state between the two fragments of a split node.
    """

    def columns(self) -> int:
        """How many slots the columns hold (1, the null slot, before registration)."""

    def grow(self) -> None:
        """Append one empty entry to every column (a new slot)."""

    def clear(self, slot: int) -> None:
        """Empty every column at `slot` (its node was removed)."""

    def truncate(self) -> None:
        """Keep only slot 0 (the null slot) in every column (a reset)."""

    def init_root(self, root: Node) -> None:
        """Give a fresh root its state (the root holds empty Full page lists)."""

    def split(self, upper: Node, lower: Node, pages: int) -> None:
        """Move the first `pages` pages of `lower`'s state to the new `upper` fragment."""

    @property
    def pin_sets(self) -> dict[int, PinSet[Any, Node]]:
        """The node pin sets by slot (sparse: only pinned nodes have one)."""


class RadixTree:
    """The tree of one cache epoch. Node ids come from `ids`, shared across epochs.

    Keys are bytes (`encode_tokens` at the tree's `token_bytes`, 4 or 8 bytes
    a token id); a parent's `children` maps the bytes of a child's first page
    (`page_bytes`) to the child. Positions and lengths given to the methods
    are in tokens. `on_split(upper, lower)` runs after every split so the cache
    can carry pins, eviction-heap entries and bookkeeping over to the new upper
    fragment.

    The tree also hands out node slots (`Node.slot`): indexes into the
    registered `NodeColumns` (the component stores' per-node columns), 1 and
    up, a removed node's slot reused for the next new node; slot 0 is the
    null slot every dead node points at.
    """

    __slots__ = (
        "page_size", "token_bytes", "page_bytes", "root", "ids", "on_split", "size", "owner", "clock",
        "columns", "pins", "_free_slots", "slots",
    )

    columns: tuple[NodeColumns, ...]
    pins: dict[type, dict[int, PinSet[Any, Node]]]
    """Each registered component's pin sets by slot (`drop_empty` removes drained ones here)."""
    _free_slots: list[int]
    token_bytes: int
    """Bytes a token id takes in the keys (4 or 8; `CacheConfig.token_bytes`)."""
    page_bytes: int
    """Bytes of one page of a key: `page_size * token_bytes`."""
    slots: int
    """Slots handed out so far, slot 0 included (the length of every column)."""

    def __init__(
        self,
        page_size: int,
        ids: Iterator[int] | None = None,
        owner: object = None,
        on_split: Callable[[Node, Node], None] | None = None,
        token_bytes: int = 4,
    ) -> None:
        max_token_id(token_bytes)
        self.page_size = page_size
        self.token_bytes = token_bytes
        self.page_bytes = page_size * token_bytes
        self.ids = ids if ids is not None else count(1)
        self.owner = owner
        self.on_split = on_split
        self.clock = 0
        self.columns = ()
        self.pins = {}
        self._free_slots = []
        self.slots = 1
        self.root = self._new_root()
        self.size = 1

    def register(self, component: type, columns: NodeColumns) -> None:
        """Keep `columns` (the store of `component`) as long as the slot count from now on."""
        if component in self.pins:
            raise ValueError(f"columns for {component.__name__} are already registered")
        if columns.columns() != 1:
            raise ValueError("columns must hold only the null slot when registered")
        for _ in range(self.slots - 1):
            columns.grow()
        self.columns = (*self.columns, columns)
        self.pins[component] = columns.pin_sets
        columns.init_root(self.root)

    def _slot(self) -> int:
        free = self._free_slots
        if free:
            return free.pop()
        slot = self.slots
        self.slots = slot + 1
        for cols in self.columns:
            cols.grow()
        return slot

    def _new_root(self) -> Node:
        root = Node(next(self.ids), self._slot(), None, b"", 0, 0, self)
        for cols in self.columns:
            cols.init_root(root)
        return root

    def tick(self) -> int:
        """Advance the access clock (shared across epochs); returns the new time."""
        self.clock += 1
        return self.clock

    def walk(self, tb: bytes, n: int) -> tuple[Node, int, list[Node]]:
        """Follow the first `n` tokens of `tb` (n whole pages) as far as the tree goes.

        A partly matching edge is split. Returns the deepest node reached, its
        end position (tokens), and the path below the root.
        """
        w = self.page_bytes
        tw = self.token_bytes
        nb = n * tw
        node = self.root
        pos = 0
        path: list[Node] = []
        while pos < nb:
            child = node.children.get(tb[pos : pos + w])
            if child is None:
                break
            kb = child.kb
            if tb.startswith(kb, pos, nb):
                pos += len(kb)
                node = child
                path.append(child)
                continue
            m = common_pages(tb[pos:nb], kb, w)
            upper = self.split(child, m // tw)
            path.append(upper)
            return upper, (pos + m) // tw, path
        return node, pos // tw, path

    def split(self, node: Node, m: int) -> Node:
        """Cut `node` after `m` tokens; the new upper fragment gets a fresh id.

        The original node stays the lower fragment: same id, same end, same
        children and Mamba state, so handles to it keep meaning the same prefix.
        """
        ps = self.page_size
        assert 0 < m < node.end - node.start and m % ps == 0, (node.id, m)
        parent = node.parent
        assert parent is not None
        mb = m * self.token_bytes
        kb = node.kb
        start = node.start
        upper = Node(next(self.ids), self._slot(), parent, kb[:mb], start, start + m, self)
        pages = m // ps
        upper.last_access = node.last_access
        upper.hits = node.hits
        for cols in self.columns:
            cols.split(upper, node, pages)
        node.kb = kb[mb:]
        node.start += m
        node.parent = upper
        w = self.page_bytes
        upper.children[kb[mb : mb + w]] = node
        parent.children[kb[:w]] = upper
        self.size += 1
        if self.on_split is not None:
            self.on_split(upper, node)
        return upper

    def add_leaf(self, parent: Node, kb: bytes) -> Node:
        """Attach a new node for key bytes `kb` below `parent` (no residency yet)."""
        start = parent.end
        node = Node(next(self.ids), self._slot(), parent, kb, start, start + len(kb) // self.token_bytes, self)
        parent.children[kb[: self.page_bytes]] = node
        self.size += 1
        return node

    def remove_leaf(self, node: Node) -> None:
        """Detach a childless node; it stops being alive and its slot is cleared for reuse."""
        assert not node.children and node.parent is not None, node.id
        del node.parent.children[node.kb[: self.page_bytes]]
        slot = node.slot
        for cols in self.columns:
            cols.clear(slot)
        self._free_slots.append(slot)
        node.slot = 0
        self.size -= 1

    def __iter__(self) -> Iterator[Node]:
        """Pre-order, root first; children in insertion order."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(list(node.children.values())))

    def kill(self) -> None:
        """Mark every node dead and empty every column (a reset dropped this tree)."""
        for node in self:
            node.slot = 0
        for cols in self.columns:
            cols.truncate()
        self._free_slots = []
        self.slots = 1

    def clear(self) -> None:
        """Kill every node and start again from a fresh root (a reset); ids and clock go on."""
        self.kill()
        self.root = self._new_root()
        self.size = 1

"""`RadixTree`: paged radix tree structure — walk, split, add, remove; no residency policy."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from itertools import count
from typing import TypeVar

from unicache.tree.node import TOKEN_BYTES, Node

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


class RadixTree:
    """The tree of one cache epoch. Node ids come from `ids`, shared across epochs.

    Keys are bytes (`encode_tokens`); a parent's `children` maps the bytes of a
    child's first page to the child. Positions and lengths given to the methods
    are in tokens. `on_split(upper, lower)` runs after every split so the cache
    can carry pins, eviction-heap entries and bookkeeping over to the new upper
    fragment.
    """

    __slots__ = ("page_size", "page_bytes", "root", "ids", "on_split", "size", "owner", "clock")

    def __init__(
        self,
        page_size: int,
        ids: Iterator[int] | None = None,
        owner: object = None,
        on_split: Callable[[Node, Node], None] | None = None,
    ) -> None:
        self.page_size = page_size
        self.page_bytes = page_size * TOKEN_BYTES
        self.ids = ids if ids is not None else count(1)
        self.owner = owner
        self.on_split = on_split
        self.clock = 0
        self.root = self._new_root()
        self.size = 1

    def _new_root(self) -> Node:
        root = Node(next(self.ids), None, b"", 0, self.owner)
        root.dev_full = []
        root.host_pages = array("i")
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
        nb = n * TOKEN_BYTES
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
            upper = self.split(child, m // TOKEN_BYTES)
            path.append(upper)
            return upper, (pos + m) // TOKEN_BYTES, path
        return node, pos // TOKEN_BYTES, path

    def split(self, node: Node, m: int) -> Node:
        """Cut `node` after `m` tokens; the new upper fragment gets a fresh id.

        The original node stays the lower fragment: same id, same end, same
        children and Mamba state, so handles to it keep meaning the same prefix.
        """
        ps = self.page_size
        assert 0 < m < node.end - node.start and m % ps == 0, (node.id, m)
        parent = node.parent
        assert parent is not None
        mb = m * TOKEN_BYTES
        kb = node.kb
        upper = Node(next(self.ids), parent, kb[:mb], node.start, self.owner)
        pages = m // ps
        upper.last_access = node.last_access
        upper.hits = node.hits
        upper.dev_children = 1 if node.dev_full is not None else 0
        if node.dev_full is not None:
            upper.dev_full = node.dev_full[:pages]
            node.dev_full = node.dev_full[pages:]
        if node.host_pages is not None:
            upper.host_pages = node.host_pages[:pages]
            node.host_pages = node.host_pages[pages:]
        if node.dev_swa is not None:
            upper.dev_swa = node.dev_swa[:pages]
            node.dev_swa = node.dev_swa[pages:]
        if node.host_swa_pages is not None:
            upper.host_swa_pages = node.host_swa_pages[:pages]
            node.host_swa_pages = node.host_swa_pages[pages:]
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
        node = Node(next(self.ids), parent, kb, parent.end, self.owner)
        parent.children[kb[: self.page_bytes]] = node
        self.size += 1
        return node

    def remove_leaf(self, node: Node) -> None:
        """Detach a childless node; it stops being alive."""
        assert not node.children and node.parent is not None, node.id
        del node.parent.children[node.kb[: self.page_bytes]]
        node.alive = False
        self.size -= 1

    def __iter__(self) -> Iterator[Node]:
        """Pre-order, root first; children in insertion order."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(list(node.children.values())))

    def kill(self) -> None:
        """Mark every node dead (a reset dropped this tree)."""
        for node in self:
            node.alive = False

    def clear(self) -> None:
        """Kill every node and start again from a fresh root (a reset); ids and clock go on."""
        self.kill()
        self.root = self._new_root()
        self.size = 1

"""`RadixTree`: paged radix tree structure — walk, split, add, remove; no residency policy."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import count

from unicache.tree.node import ChildKey, Node


def common_pages(a: tuple[int, ...], b: tuple[int, ...], page_size: int) -> int:
    """Length in tokens of the longest common prefix of `a` and `b`, in whole pages."""
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

    `on_split(upper, lower)` runs after every split so the cache can carry pins,
    eviction-heap entries and bookkeeping over to the new upper fragment.
    """

    __slots__ = ("page_size", "root", "ids", "on_split", "size", "owner")

    def __init__(
        self,
        page_size: int,
        ids: Iterator[int] | None = None,
        owner: object = None,
        on_split: Callable[[Node, Node], None] | None = None,
    ) -> None:
        self.page_size = page_size
        self.ids = ids if ids is not None else count(1)
        self.owner = owner
        self.on_split = on_split
        self.root = Node(next(self.ids), None, (), 0, owner)
        self.root.dev_full = []
        self.root.host_full = []
        self.size = 1

    def child_key(self, tokens: tuple[int, ...], pos: int) -> ChildKey:
        ps = self.page_size
        return tokens[pos] if ps == 1 else tokens[pos : pos + ps]

    def walk(self, tokens: tuple[int, ...], n: int) -> tuple[Node, int, list[Node]]:
        """Follow `tokens[:n]` (n whole pages) as far as the tree goes, splitting a partial edge.

        Returns the deepest node reached, its end position, and the path below the root.
        """
        ps = self.page_size
        node = self.root
        pos = 0
        path: list[Node] = []
        while pos < n:
            child = node.children.get(tokens[pos] if ps == 1 else tokens[pos : pos + ps])
            if child is None:
                break
            key = child.key
            klen = len(key)
            if pos + klen <= n and tokens[pos : pos + klen] == key:
                pos += klen
                node = child
                path.append(child)
                continue
            m = common_pages(tokens[pos:n], key, ps)
            upper = self.split(child, m)
            path.append(upper)
            return upper, pos + m, path
        return node, pos, path

    def split(self, node: Node, m: int) -> Node:
        """Cut `node` after `m` tokens; the new upper fragment gets a fresh id.

        The original node stays the lower fragment: same id, same end, same
        children and Mamba state, so handles to it keep meaning the same prefix.
        """
        ps = self.page_size
        assert 0 < m < len(node.key) and m % ps == 0, (node.id, m)
        parent = node.parent
        assert parent is not None
        upper = Node(next(self.ids), parent, node.key[:m], node.start, self.owner)
        pages = m // ps
        upper.last_access = node.last_access
        upper.hits = node.hits
        upper.backing = node.backing
        upper.dev_children = 1 if node.dev_full is not None else 0
        if node.dev_full is not None:
            upper.dev_full = node.dev_full[:pages]
            node.dev_full = node.dev_full[pages:]
        if node.host_full is not None:
            upper.host_full = node.host_full[:pages]
            node.host_full = node.host_full[pages:]
        if node.dev_swa is not None:
            upper.dev_swa = node.dev_swa[:pages]
            node.dev_swa = node.dev_swa[pages:]
        if node.host_swa is not None:
            upper.host_swa = node.host_swa[:pages]
            node.host_swa = node.host_swa[pages:]
        node.key = node.key[m:]
        node.start += m
        node.parent = upper
        upper.children[node.key[0] if ps == 1 else node.key[:ps]] = node
        parent.children[upper.key[0] if ps == 1 else upper.key[:ps]] = upper
        self.size += 1
        if self.on_split is not None:
            self.on_split(upper, node)
        return upper

    def add_leaf(self, parent: Node, key: tuple[int, ...]) -> Node:
        """Attach a new node for `key` below `parent` (no residency yet)."""
        ps = self.page_size
        node = Node(next(self.ids), parent, key, parent.end, self.owner)
        parent.children[key[0] if ps == 1 else key[:ps]] = node
        self.size += 1
        return node

    def remove_leaf(self, node: Node) -> None:
        """Detach a childless node; it stops being alive."""
        assert not node.children and node.parent is not None, node.id
        ps = self.page_size
        del node.parent.children[node.key[0] if ps == 1 else node.key[:ps]]
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

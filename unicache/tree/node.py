"""`Node`: one radix-tree edge (structure and recency; its residency lives in the component stores)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from unicache.tree.keys import decode_tokens

if TYPE_CHECKING:
    from leases import PinSet

ChildKey = bytes
"""A child's entry in its parent's `children`: the bytes of its key's first page."""


class Home(Protocol):
    """What a node's `tree` is to it: the structure that owns its slot and columns."""

    @property
    def owner(self) -> object:
        """The cache the tree belongs to."""

    @property
    def pins(self) -> dict[type, dict[int, PinSet[Any, Node]]]:
        """Each component's pin sets by node slot."""

    @property
    def token_bytes(self) -> int:
        """Bytes a token id takes in the keys (4 or 8; see `unicache.tree.keys`)."""


class Node:
    """A tree node: the tokens `key` at positions [start, end) of every path through it.

    The key is kept as bytes (`kb`, `tree.token_bytes` bytes a token; see
    `unicache.tree.keys`) so that matching compares memory, not int objects;
    `key` decodes it for readers. `end` is `start` plus the key's tokens
    (the tree computes it: a node does not know the width).

    A node holds tree structure and recency only. Its per-component state
    (device and host slots, pin sets) lives in the component stores
    (`unicache/components/`), in dense columns indexed by `slot`: a small
    index the tree hands out when the node is created and recycles when it
    is removed (slot 0 is never handed out: a dead node has slot 0, and every
    column reads None there; `alive` is `slot != 0`). Node objects stay the
    only handles: ids are never reused and `alive` marks dead nodes, so a
    handle to a removed node can never read another node's data through a
    recycled slot and needs no generation.
    `lru` is a bit mask of the eviction heaps holding an entry for the node;
    `dev_children` counts children with Full on device (a device leaf has 0).
    Callers treat every attribute as read-only.
    """

    __slots__ = (
        "id",
        "slot",
        "parent",
        "children",
        "kb",
        "start",
        "end",
        "last_access",
        "hits",
        "dev_children",
        "lru",
        "tree",
    )

    id: int
    slot: int
    parent: Node | None
    children: dict[ChildKey, Node]
    kb: bytes
    start: int
    end: int
    last_access: int
    hits: int
    dev_children: int
    lru: int
    tree: Home

    def __init__(
        self, node_id: int, slot: int, parent: Node | None, kb: bytes, start: int, end: int, tree: Home
    ) -> None:
        self.id = node_id
        self.slot = slot
        self.parent = parent
        self.children = {}
        self.kb = kb
        self.start = start
        self.end = end
        self.last_access = 0
        self.hits = 0
        self.dev_children = 0
        self.lru = 0
        self.tree = tree

    def __repr__(self) -> str:
        state = "" if self.alive else " dead"
        return f"<Node {self.id} [{self.start}:{self.end}){state}>"

    @property
    def alive(self) -> bool:
        """Whether the node is in its cache's current tree (a removed or reset node has slot 0)."""
        return self.slot != 0

    @property
    def key(self) -> tuple[int, ...]:
        """The token ids of this edge."""
        return decode_tokens(self.kb, self.tree.token_bytes)

    @property
    def is_root(self) -> bool:
        return self.parent is None

    def path(self) -> list[Node]:
        """Nodes from the root's child down to this node (empty for the root)."""
        out: list[Node] = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            out.append(node)
            node = node.parent
        out.reverse()
        return out

    def tokens(self) -> tuple[int, ...]:
        """The whole token prefix ending at this node."""
        return decode_tokens(b"".join(node.kb for node in self.path()), self.tree.token_bytes)

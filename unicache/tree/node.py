"""`Node`: one radix-tree edge with per-component residency on both tiers and lazy pin sets."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING

from unicache.errors import InvalidArgumentError

if TYPE_CHECKING:
    from leases import PinSet

    from unicache.markers import SWA, Full, Mamba

ChildKey = bytes
"""A child's entry in its parent's `children`: the bytes of its key's first page."""

TOKEN_BYTES = 8
"""Keys are stored as native int64 per token (`array("q")` bytes)."""


def encode_tokens(tokens: Iterable[int]) -> bytes:
    """Token ids as the bytes keys are compared in (native int64 each).

    An `array("q")` (the form traces and the SGLang harness use) costs one
    copy; any other sequence of ints is converted. Ids outside int64 or
    non-integers raise `InvalidArgumentError`.
    """
    if type(tokens) is array and tokens.typecode == "q":
        return tokens.tobytes()
    if type(tokens) is bytes:
        raise InvalidArgumentError("tokens must be a sequence of ints, not bytes")
    try:
        return array("q", tokens).tobytes()
    except (OverflowError, TypeError) as e:
        raise InvalidArgumentError(f"tokens must be int64 token ids: {e}") from None


def decode_tokens(data: bytes) -> tuple[int, ...]:
    """The token ids of key bytes."""
    return tuple(memoryview(data).cast("q"))


class Node:
    """A tree node: the tokens `key` at positions [start, end) of every path through it.

    The key is kept as bytes (`kb`, native int64 per token) so that matching
    compares memory, not int objects; `key` decodes it for readers.

    Residency per component and tier: Full/SWA hold the page ids (one per
    page of `key`) or None; Mamba holds one state slot (the state after `end`
    tokens) or None. Device pages are lists (`dev_full`, `dev_swa`); host
    pages, the bulk of a large cache, are kept compact as `array("i")`
    (`host_pages`, `host_swa_pages`) and read as lists through `host_full` /
    `host_swa`. The root holds empty Full page sequences and never moves.
    Pin sets are created on first pin (most nodes are never pinned); each
    holds the leases of one component that currently cover this node.
    `lru` is a bit mask of the eviction heaps holding an entry for the node;
    `dev_children` counts children with Full on device (a device leaf has 0).
    Nothing else pins: an in-flight backup pins the nodes it reads with its
    own leases, like a load-back.
    Callers treat every attribute as read-only.
    """

    __slots__ = (
        "id",
        "parent",
        "children",
        "kb",
        "start",
        "end",
        "last_access",
        "hits",
        "dev_full",
        "host_pages",
        "dev_swa",
        "host_swa_pages",
        "dev_mamba",
        "host_mamba",
        "pins_full",
        "pins_swa",
        "pins_mamba",
        "dev_children",
        "lru",
        "alive",
        "tree",
    )

    id: int
    parent: Node | None
    children: dict[ChildKey, Node]
    kb: bytes
    start: int
    end: int
    last_access: int
    hits: int
    dev_full: list[int] | None
    host_pages: array[int] | None
    dev_swa: list[int] | None
    host_swa_pages: array[int] | None
    dev_mamba: int | None
    host_mamba: int | None
    pins_full: PinSet[Full, Node] | None
    pins_swa: PinSet[SWA, Node] | None
    pins_mamba: PinSet[Mamba, Node] | None
    dev_children: int
    lru: int
    alive: bool
    tree: object

    def __init__(
        self, node_id: int, parent: Node | None, kb: bytes, start: int, tree: object
    ) -> None:
        self.id = node_id
        self.parent = parent
        self.children = {}
        self.kb = kb
        self.start = start
        self.end = start + len(kb) // TOKEN_BYTES
        self.last_access = 0
        self.hits = 0
        self.dev_full = None
        self.host_pages = None
        self.dev_swa = None
        self.host_swa_pages = None
        self.dev_mamba = None
        self.host_mamba = None
        self.pins_full = None
        self.pins_swa = None
        self.pins_mamba = None
        self.dev_children = 0
        self.lru = 0
        self.alive = True
        self.tree = tree

    def __repr__(self) -> str:
        tiers = "D" if self.dev_full is not None else ""
        tiers += "H" if self.host_pages is not None else ""
        return f"<Node {self.id} [{self.start}:{self.end}) {tiers or '-'}>"

    @property
    def host_full(self) -> list[int] | None:
        """Full host pages (a copy of the compact `host_pages`), or None."""
        pages = self.host_pages
        return None if pages is None else pages.tolist()

    @property
    def host_swa(self) -> list[int] | None:
        """SWA host pages (a copy of the compact `host_swa_pages`), or None."""
        pages = self.host_swa_pages
        return None if pages is None else pages.tolist()

    @property
    def key(self) -> tuple[int, ...]:
        """The token ids of this edge."""
        return decode_tokens(self.kb)

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
        return decode_tokens(b"".join(node.kb for node in self.path()))

    def pinned(self) -> bool:
        """Whether any lease of any component pins this node."""
        p = self.pins_full
        if p is not None and p:
            return True
        s = self.pins_swa
        if s is not None and s:
            return True
        m = self.pins_mamba
        return m is not None and bool(m)

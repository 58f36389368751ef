"""`Node`: one radix-tree edge with per-component residency on both tiers and lazy pin sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from leases import PinSet

    from unicache.components.markers import SWA, Full, Mamba

ChildKey = int | tuple[int, ...]


class Node:
    """A tree node: the tokens `key` at positions [start, end) of every path through it.

    Residency per component and tier: Full/SWA hold a list of page ids (one
    per page of `key`) or None; Mamba holds one state slot (the state after
    `end` tokens) or None. The root holds empty Full lists and never moves.
    Pin sets are created on first pin (most nodes are never pinned); each
    holds the leases of one component that currently cover this node.
    `lru` is a bit mask of the eviction heaps holding an entry for the node;
    `dev_children` counts children with Full on device (a device leaf has 0);
    `backing` counts in-flight backups covering the node.
    Callers treat every attribute as read-only.
    """

    __slots__ = (
        "id",
        "parent",
        "children",
        "key",
        "start",
        "end",
        "last_access",
        "hits",
        "dev_full",
        "host_full",
        "dev_swa",
        "host_swa",
        "dev_mamba",
        "host_mamba",
        "pins_full",
        "pins_swa",
        "pins_mamba",
        "backing",
        "dev_children",
        "lru",
        "alive",
        "tree",
    )

    id: int
    parent: Node | None
    children: dict[ChildKey, Node]
    key: tuple[int, ...]
    start: int
    end: int
    last_access: int
    hits: int
    dev_full: list[int] | None
    host_full: list[int] | None
    dev_swa: list[int] | None
    host_swa: list[int] | None
    dev_mamba: int | None
    host_mamba: int | None
    pins_full: PinSet[Full] | None
    pins_swa: PinSet[SWA] | None
    pins_mamba: PinSet[Mamba] | None
    backing: int
    dev_children: int
    lru: int
    alive: bool
    tree: object

    def __init__(
        self, node_id: int, parent: Node | None, key: tuple[int, ...], start: int, tree: object
    ) -> None:
        self.id = node_id
        self.parent = parent
        self.children = {}
        self.key = key
        self.start = start
        self.end = start + len(key)
        self.last_access = 0
        self.hits = 0
        self.dev_full = None
        self.host_full = None
        self.dev_swa = None
        self.host_swa = None
        self.dev_mamba = None
        self.host_mamba = None
        self.pins_full = None
        self.pins_swa = None
        self.pins_mamba = None
        self.backing = 0
        self.dev_children = 0
        self.lru = 0
        self.alive = True
        self.tree = tree

    def __repr__(self) -> str:
        tiers = "D" if self.dev_full is not None else ""
        tiers += "H" if self.host_full is not None else ""
        return f"<Node {self.id} [{self.start}:{self.end}) {tiers or '-'}>"

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
        out: tuple[int, ...] = ()
        for node in self.path():
            out += node.key
        return out

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

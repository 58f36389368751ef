"""`LeaseOwner`: the typed description a cache lease carries of the operation that holds it."""

from __future__ import annotations

import enum


class OwnerKind(enum.Enum):
    """What kind of operation holds a lease."""

    LOCK = "lock"
    LOAD_BACK = "load_back"
    BACKUP = "backup"


class LeaseOwner:
    """Who holds a lease: a lock receipt, a load-back or a backup, by id (and anchor node).

    Every lease of one operation shares one owner object, so "which ticket
    pins this node" is read from the node's pin sets: no side table. `str()`
    gives the form events, dumps and the REPL show (`"backup#5@3"`).
    """

    __slots__ = ("kind", "id", "node", "_text")

    kind: OwnerKind
    id: int
    node: int | None
    _text: str | None

    def __init__(self, kind: OwnerKind, ident: int, node: int | None = None) -> None:
        self.kind = kind
        self.id = ident
        self.node = node
        self._text = None

    @property
    def ticket_id(self) -> int | None:
        """The ticket of a load-back or backup (flight-recorder lease events carry it); None for a lock."""
        return None if self.kind is OwnerKind.LOCK else self.id

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = f"{self.kind.value}#{self.id}"
            if self.node is not None:
                text += f"@{self.node}"
            self._text = text
        return text

    def __repr__(self) -> str:
        return f"<LeaseOwner {self}>"

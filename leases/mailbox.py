"""`Mailbox`: the one way other threads hand work to a ledger's owner thread."""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Generic, TypeVar

from leases.errors import WrongThreadError

if TYPE_CHECKING:
    from leases.ledger import LeaseLedger

T = TypeVar("T")


class Mailbox(Generic[T]):
    """A thread-safe queue: any thread may `post`; only the owner thread may `drain`.

    Transfer engines whose copies complete on another thread post acks here;
    the scheduler drains them and settles tickets on the ledger's thread.
    """

    __slots__ = ("_items", "_ledger", "_thread_id")

    def __init__(self, ledger: LeaseLedger | None = None) -> None:
        self._items: deque[T] = deque()
        self._ledger = ledger
        self._thread_id = ledger.owner_thread if ledger is not None else threading.get_ident()

    def post(self, item: T) -> None:
        """Enqueue `item`; callable from any thread."""
        self._items.append(item)

    def drain(self) -> list[T]:
        """Take everything posted so far, in order; owner thread only."""
        owner = self._ledger.owner_thread if self._ledger is not None else self._thread_id
        if threading.get_ident() != owner:
            raise WrongThreadError(
                f"Mailbox.drain() called on thread {threading.get_ident()}, "
                f"owner thread is {owner}"
            )
        items = self._items
        out: list[T] = []
        while items:
            out.append(items.popleft())
        return out

    def __len__(self) -> int:
        return len(self._items)

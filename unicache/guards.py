"""Checks every public cache operation runs first, so a refused call changes nothing.

Each operation calls these before it touches any state: the calling thread
must own the cache's ledger, and counts must be non-negative ints (not
bools). The messages name the cache, the operation and the offending value.
"""

from __future__ import annotations

from threading import get_ident
from typing import Protocol

from leases import LeaseLedger, WrongThreadError

from unicache.errors import InvalidArgumentError


class Guarded(Protocol):
    """What the checks read of a cache: its ledger (owner thread, name)."""

    @property
    def ledger(self) -> LeaseLedger: ...


def owner_thread(cache: Guarded, op: str) -> None:
    """Raise `WrongThreadError` unless the caller is the thread that owns `cache`'s ledger."""
    owner = cache.ledger.owner_thread
    if get_ident() != owner:
        raise WrongThreadError(
            f"cache {cache.ledger.name!r}: {op} called on thread {get_ident()}, but the "
            f"cache belongs to thread {owner}; post acks to cache.inbox and call it there"
        )


def count(cache: Guarded, op: str, n: object) -> int:
    """The owner thread and a non-negative int count (not a bool), else a typed error."""
    owner_thread(cache, op)
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidArgumentError(f"{op}: count must be an int, got {n!r} ({type(n).__name__})")
    if n < 0:
        raise InvalidArgumentError(f"{op}: count must be >= 0, got {n}")
    return n


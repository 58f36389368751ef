"""What the scheduler tells whoever watches its cache operations (op recording, pin statistics).

The scheduler calls every registered :class:`SchedulerObserver` at each cache
operation it performs, in the order it performs them. Observers see ids and
token tuples only — never a ticket or receipt, so ownership stays with the
scheduler — and never change the cache. The default methods do nothing, so an
observer overrides only what it needs.
"""

from __future__ import annotations

from unicache.tree.node import Node


class SchedulerObserver:
    """No-op base: override the events of interest."""

    __slots__ = ()

    def on_match(self, tokens: tuple[int, ...]) -> None:
        """A request is about to match ``tokens``."""

    def on_load_back(self, anchor: Node, ticket: int, lease_ids: tuple[int, ...]) -> None:
        """Load-back ``ticket`` of ``anchor`` was just issued; ``lease_ids`` are its (held) leases."""

    def on_load_back_end(self, lease_ids: tuple[int, ...]) -> None:
        """A load-back the scheduler tracked ended (settled or abandoned); ``lease_ids`` were its leases."""

    def on_abandon(self, ticket: int) -> None:
        """Load-back ``ticket`` is about to be abandoned (its request was aborted)."""

    def on_time_out(self, ticket: int) -> None:
        """Ticket ``ticket`` is about to be timed out (its ack is overdue)."""

    def on_lock(self, node: Node, receipt: int, lease_ids: tuple[int, ...]) -> None:
        """Receipt ``receipt`` was just taken over the path to ``node``; ``lease_ids`` are its leases."""

    def on_unlock(self, receipt: int, lease_ids: tuple[int, ...]) -> None:
        """Receipt ``receipt`` is about to be unlocked."""

    def on_insert(self, tokens: tuple[int, ...], start: int) -> None:
        """``tokens`` are about to be inserted, the request's own slots covering ``start`` onwards."""

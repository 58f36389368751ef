"""`Holdings`: the one owner of the lock receipts and load-back tickets the scheduler's requests hold.

A `Request` refers to what it holds by its request id only; the scheduler
stores each linear handle here when it takes it and moves it out here to
consume it, so every handle has exactly one owner (checked by leasecheck).
"""

from __future__ import annotations

from leases import Borrowed

from unicache.engine.errors import EngineError
from unicache.tickets import LoadBackTicket, LockReceipt


class Holdings:
    """Per request id: at most one load-back ticket and at most one lock receipt."""

    __slots__ = ("_tickets", "_receipts")

    def __init__(self) -> None:
        self._tickets: dict[int, LoadBackTicket] = {}
        self._receipts: dict[int, LockReceipt] = {}

    def put_ticket(self, rid: int, ticket: LoadBackTicket) -> None:
        """Keep `ticket` for request `rid`; `EngineError` if it already holds one (nothing changes)."""
        if rid in self._tickets:
            held = self._tickets[rid].id
            ticket.abandon()
            raise EngineError(f"request {rid}: already holds load-back ticket #{held}")
        self._tickets[rid] = ticket

    def ticket(self, rid: int) -> Borrowed[LoadBackTicket] | None:
        return self._tickets.get(rid)

    def take_ticket(self, rid: int) -> LoadBackTicket | None:
        """Move request `rid`'s ticket out (the caller consumes it), or None."""
        return self._tickets.pop(rid, None)

    def put_receipt(self, rid: int, receipt: LockReceipt) -> LockReceipt | None:
        """Keep `receipt` for request `rid`; returns the receipt it replaces (the caller unlocks it)."""
        old = self._receipts.pop(rid, None)
        self._receipts[rid] = receipt
        return old

    def receipt(self, rid: int) -> Borrowed[LockReceipt] | None:
        return self._receipts.get(rid)

    def take_receipt(self, rid: int) -> LockReceipt | None:
        """Move request `rid`'s receipt out (the caller unlocks it), or None."""
        return self._receipts.pop(rid, None)

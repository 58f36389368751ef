"""`TicketTable`: the in-flight tickets of one cache, the quarantine of reset-stale ones, ticket ids."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

from leases import Borrowed

from unicache.results import TicketStatus
from unicache.tickets import BackupTicket, LoadBack, Ticket
from unicache.transfer.base import CopyOp


@dataclass(slots=True)
class QuarantineRecord:
    """A view of a ticket whose copy was still in flight at a reset; its slots wait for its stale ack.

    The ticket table owns the ticket; the record only lends it.
    """

    ticket: Borrowed[Ticket]
    generation: int
    copies: tuple[CopyOp, ...]


class TicketTable:
    """Issues ticket ids (never reused) and owns every ticket from submit to its ack.

    A live ticket is one of the current epoch waiting for its ack; `reset`
    moves every live ticket into quarantine, where it waits for its stale ack,
    and `time_out` moves one there, where it waits for its late ack.
    Load-backs and backups that joined another's copy are not entries of
    their own: they ride on the ticket they joined (`joiners`).
    """

    __slots__ = ("_ids", "_last", "_live", "_quarantine")

    def __init__(self) -> None:
        self._ids = count(1)
        self._last = 0
        self._live: dict[int, Ticket] = {}
        self._quarantine: dict[int, Ticket] = {}

    def issue(self) -> int:
        """A fresh ticket id."""
        tid = self._last = next(self._ids)
        return tid

    @property
    def last_issued(self) -> int:
        return self._last

    def was_issued(self, ticket: int) -> bool:
        return 1 <= ticket <= self._last

    def add(self, ticket: Ticket) -> None:
        """Track a submitted ticket until its ack."""
        self._live[ticket.id] = ticket

    def __len__(self) -> int:
        return len(self._live)

    def get(self, ticket: int) -> Borrowed[Ticket] | None:
        """The live ticket with this id (any generation), or None; the table keeps owning it."""
        return self._live.get(ticket)

    def load_back(self, ticket: int) -> Borrowed[LoadBack] | None:
        """The live load-back with this id, or None (the table keeps it)."""
        t = self._live.get(ticket)
        return t if type(t) is LoadBack else None

    def backup(self, ticket: int) -> Borrowed[BackupTicket] | None:
        """The live backup with this id, or None (the table keeps it)."""
        t = self._live.get(ticket)
        return t if type(t) is BackupTicket else None

    def acked_load_back(self, ticket: int, generation: int) -> LoadBack | None:
        """The live load-back an ack names (id and generation), moved out of the table; or None."""
        t = self._live.get(ticket)
        if type(t) is not LoadBack or t.generation != generation:
            return None
        del self._live[ticket]
        return t

    def acked_backup(self, ticket: int, generation: int) -> BackupTicket | None:
        """The live backup an ack names, moved out of the table (the caller settles it); or None."""
        t = self._live.get(ticket)
        if type(t) is not BackupTicket or t.generation != generation:
            return None
        del self._live[ticket]
        return t

    def live(self) -> list[Borrowed[Ticket]]:
        """Live tickets, oldest first; a load-back that joined another follows the one it joined."""
        out: list[Borrowed[Ticket]] = []
        for t in self._live.values():
            out.append(t)
            if t.joiners:
                for j in t.joiners:
                    if isinstance(j, (LoadBack, BackupTicket)):
                        out.append(j)
        return out

    def quarantine_all(self) -> list[Borrowed[Ticket]]:
        """Move every live ticket (each with a job) into quarantine; returns them (the table keeps them)."""
        ids = list(self._live)
        for tid in ids:
            t = self._live.pop(tid)
            assert t.job is not None, tid
            self._quarantine[tid] = t
        moved = set(ids)
        return [t for tid, t in self._quarantine.items() if tid in moved]

    def time_out(self, ticket: int) -> Borrowed[Ticket] | None:
        """Move the live ticket `ticket` into quarantine, where it waits for its late ack; None if not live.

        The table keeps owning it: its late ack (`take_quarantined`) moves it out.
        """
        t = self._live.pop(ticket, None)
        if t is None:
            return None
        assert t.job is not None, ticket
        self._quarantine[ticket] = t
        return self._quarantine[ticket]

    def awaiting(self) -> list[int]:
        """Ids of the tickets waiting for an ack that were not given up on: live ones (joiners ride on
        theirs) and those a reset quarantined, oldest first within each."""
        out = list(self._live)
        if self._quarantine:
            out += [tid for tid, t in self._quarantine.items() if t.status is not TicketStatus.TIMED_OUT]
        return out

    def quarantined_ticket(self, ticket: int) -> Borrowed[Ticket] | None:
        """The quarantined ticket with this id, or None (the table keeps it)."""
        return self._quarantine.get(ticket)

    def joined(self, ticket: int) -> Borrowed[Ticket] | None:
        """The live ticket whose copy ticket `ticket` joined (it rides in that one's `joiners`), or None."""
        for t in self._live.values():
            if t.joiners and any(j.id == ticket for j in t.joiners):
                return t
        return None

    def take_quarantined(self, ticket: int, generation: int) -> Ticket | None:
        """Move out the quarantined ticket a stale ack names (the caller settles it), or None."""
        t = self._quarantine.get(ticket)
        if t is None or t.generation != generation:
            return None
        del self._quarantine[ticket]
        return t

    def quarantined(self) -> list[QuarantineRecord]:
        """Views of the quarantined tickets, oldest first."""
        out: list[QuarantineRecord] = []
        for t in self._quarantine.values():
            job = t.job
            assert job is not None, t.id
            out.append(QuarantineRecord(t, t.generation, job.copies))
        return out

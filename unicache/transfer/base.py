"""The transfer interface: jobs of slot copies between tiers, and the acks that settle them.

Torch-free. An engine never sees leases or tickets, only `TransferJob`s
(ticket id, generation, slot lists); the cache keeps every slot a job names
alive until that job's ack, so an engine may perform the copy whenever it
completes, reading the source at that moment.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Collection
from typing import TYPE_CHECKING

from unicache.pools.copy import CopyOp, Tier

if TYPE_CHECKING:
    from unicache.pools.pools import PoolSet

__all__ = ["Ack", "CopyOp", "JobKind", "Tier", "TransferEngine", "TransferJob"]


class JobKind(enum.Enum):
    LOAD_BACK = "load_back"
    BACKUP = "backup"


class TransferJob:
    """All copies of one ticket; acked once, as a unit. Treat as immutable."""

    __slots__ = ("ticket", "generation", "kind", "copies")

    def __init__(
        self, ticket: int, generation: int, kind: JobKind, copies: tuple[CopyOp, ...]
    ) -> None:
        self.ticket = ticket
        self.generation = generation
        self.kind = kind
        self.copies = copies

    def __repr__(self) -> str:
        return (
            f"TransferJob(ticket={self.ticket}, generation={self.generation}, "
            f"kind={self.kind.value}, copies={list(self.copies)})"
        )

    def ack(self, ok: bool = True, detail: str = "") -> Ack:
        """The ack that settles this job."""
        return Ack(self.ticket, self.generation, ok, detail)


class Ack:
    """Completion of a job: names the ticket AND the generation it was issued in."""

    __slots__ = ("ticket", "generation", "ok", "detail")

    def __init__(self, ticket: int, generation: int, ok: bool = True, detail: str = "") -> None:
        self.ticket = ticket
        self.generation = generation
        self.ok = ok
        self.detail = detail

    def __repr__(self) -> str:
        state = "ok" if self.ok else f"failed: {self.detail}" if self.detail else "failed"
        return f"Ack(ticket={self.ticket}, generation={self.generation}, {state})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Ack)
            and (self.ticket, self.generation, self.ok, self.detail)
            == (other.ticket, other.generation, other.ok, other.detail)
        )

    def __hash__(self) -> int:
        return hash((self.ticket, self.generation, self.ok, self.detail))


class TransferEngine(abc.ABC):
    """Moves slot data between tiers asynchronously and reports completions as acks.

    Contract:
    - `submit` queues a job; the data is copied when the job completes (for a
      simulated engine that is when it is delivered), reading the source then.
    - `poll` returns the acks of jobs completed since the previous poll; it is
      called on the cache's thread. An engine may ack a job more than once,
      out of order, after a cache reset, or with `ok=False` (nothing copied or
      a partial copy): the cache counts and tolerates all of these.
    - `flush(tickets)` completes the named jobs (all when None) now; their acks come
      from the next `poll`. Write-back eviction uses it to wait for its backups.
    """

    pools: PoolSet | None = None

    def attach(self, pools: PoolSet) -> None:
        """Give the engine the pools its copies read and write (called once by the cache)."""
        self.pools = pools

    @abc.abstractmethod
    def submit(self, job: TransferJob) -> None: ...

    @abc.abstractmethod
    def poll(self) -> list[Ack]: ...

    @abc.abstractmethod
    def flush(self, tickets: Collection[int] | None = None) -> None:
        """Complete the named jobs (every job when None) now; acks come from the next poll."""

    @property
    @abc.abstractmethod
    def pending(self) -> int:
        """Jobs submitted whose ack has not been returned by `poll` yet."""

    def close(self) -> None:
        """Release engine resources (streams, threads); the default does nothing."""

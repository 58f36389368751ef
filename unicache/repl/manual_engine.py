"""`ManualEngine`: a transfer engine whose jobs complete only when told to (the REPL's `ack`, and the tests).

The one hand-driven engine of the project: the REPL's fresh caches and the
cache's operation tests both run on it.
"""

from __future__ import annotations

from collections.abc import Collection

from unicache.repl.errors import NoSuchJobError
from unicache.transfer.base import Ack, TransferEngine, TransferJob


class ManualEngine(TransferEngine):
    """Holds every submitted job until it is completed; the copy runs then, reading the source then.

    So a slot freed or overwritten while its job waits shows up as wrong bytes
    after the ack, exactly as with a real asynchronous copy. Two ways to finish
    a held job: `take(ticket)` hands its ack to the caller (the REPL delivers it
    itself), `complete(ticket)` queues it for the cache's next `poll()` as an
    asynchronous engine would. `withhold(ticket)` keeps a job out of `flush()`,
    `complete_all()` and `next_ready()` (what `ack all`, `step` and the cache's
    synchronous write-back use); an explicit `take`/`complete` still finishes it.
    `take_flushed()` tells which tickets `flush()` completed.
    """

    def __init__(self) -> None:
        self.jobs: dict[int, TransferJob] = {}
        """Held jobs by ticket, oldest first (a test may drop one to model a lost job)."""
        self._withheld: set[int] = set()
        self._acks: list[Ack] = []
        self._flushed: list[int] = []

    def submit(self, job: TransferJob) -> None:
        if job.ticket in self.jobs:
            raise ValueError(f"ticket {job.ticket}: a job for it is already held (generation "
                             f"{self.jobs[job.ticket].generation})")
        self.jobs[job.ticket] = job

    def poll(self) -> list[Ack]:
        acks, self._acks = self._acks, []
        return acks

    def flush(self, tickets: Collection[int] | None = None) -> None:
        """Complete the named held jobs (every held job when None) unless withheld."""
        names = list(self.jobs) if tickets is None else [t for t in tickets if t in self.jobs]
        for ticket in [t for t in names if t not in self._withheld]:
            self.complete(ticket)
            self._flushed.append(ticket)

    @property
    def pending(self) -> int:
        return len(self.jobs) + len(self._acks)

    def take(self, ticket: int, *, ok: bool = True, detail: str = "", copy: bool = True) -> Ack:
        """Finish the held job of `ticket` now and return its ack (not queued: the caller delivers it).

        The rows are copied when `ok` and `copy` (`copy=False` with `ok` models a
        copy that reports success but moved nothing).
        """
        job = self.jobs.get(ticket)
        if job is None:
            raise NoSuchJobError(ticket, "the transfer engine holds no job for it "
                                         "(never submitted, or already acked)")
        if ok and copy:
            pools = self.pools
            if pools is None:
                raise RuntimeError("ManualEngine.take() before attach(pools)")
            for op in job.copies:
                pools.copy(op)
        del self.jobs[ticket]
        self._withheld.discard(ticket)
        return job.ack(ok, detail)

    def complete(self, ticket: int, ok: bool = True, *, detail: str = "", copy: bool = True) -> Ack:
        """Finish the held job of `ticket` now (as `take`) and queue its ack for the next `poll()`."""
        ack = self.take(ticket, ok=ok, detail=detail, copy=copy)
        self._acks.append(ack)
        return ack

    def complete_all(self) -> None:
        """Complete every held job that is not withheld, oldest first."""
        self.flush()

    def held(self) -> list[int]:
        """Tickets of the held jobs, oldest first."""
        return list(self.jobs)

    def withhold(self, ticket: int) -> None:
        """Keep `ticket`'s job out of `flush`, `next_ready` and `ack all` until finished explicitly."""
        if ticket not in self.jobs:
            raise NoSuchJobError(ticket, "cannot withhold: the transfer engine holds no job for it")
        self._withheld.add(ticket)

    def release(self, ticket: int) -> None:
        """Undo `withhold`."""
        if ticket not in self._withheld:
            raise NoSuchJobError(ticket, "is not withheld")
        self._withheld.discard(ticket)

    def is_withheld(self, ticket: int) -> bool:
        return ticket in self._withheld

    def job(self, ticket: int) -> TransferJob | None:
        return self.jobs.get(ticket)

    def next_ready(self) -> int | None:
        """The oldest held job that is not withheld."""
        for ticket in self.jobs:
            if ticket not in self._withheld:
                return ticket
        return None

    def take_flushed(self) -> list[int]:
        """Tickets completed by `flush()` since the last call."""
        out, self._flushed = self._flushed, []
        return out

    def describe_jobs(self) -> list[tuple[int, int, str, bool]]:
        """(ticket, generation, kind, withheld) of every held job, oldest first (for crash dumps)."""
        return [(j.ticket, j.generation, j.kind.value, j.ticket in self._withheld) for j in self.jobs.values()]

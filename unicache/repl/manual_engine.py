"""`ManualEngine`: a transfer engine whose jobs complete only when told to (the REPL's `ack`)."""

from __future__ import annotations

from collections.abc import Collection

from unicache.repl.errors import NoSuchJobError
from unicache.transfer.base import Ack, TransferEngine, TransferJob


class ManualEngine(TransferEngine):
    """Holds every submitted job until `complete(ticket)`; the copy runs then, reading the source then.

    So a slot freed or overwritten while its job waits shows up as wrong bytes
    after the ack, exactly as with a real asynchronous copy. `withhold(ticket)`
    keeps a job out of `flush()` and `next_ready()` (what `ack all`, `step` and
    the cache's synchronous write-back use); an explicit `complete` still acks it.
    `flush()` completes the jobs it names (all when None) that are not withheld; their acks come from the
    next `poll()`, and `take_flushed()` tells which tickets that was.
    """

    def __init__(self) -> None:
        self._jobs: dict[int, TransferJob] = {}
        self._withheld: set[int] = set()
        self._acks: list[Ack] = []
        self._flushed: list[int] = []

    def submit(self, job: TransferJob) -> None:
        if job.ticket in self._jobs:
            raise ValueError(f"ticket {job.ticket}: a job for it is already held (generation "
                             f"{self._jobs[job.ticket].generation})")
        self._jobs[job.ticket] = job

    def poll(self) -> list[Ack]:
        acks, self._acks = self._acks, []
        return acks

    def flush(self, tickets: Collection[int] | None = None) -> None:
        """Complete the named held jobs (every held job when None) unless withheld."""
        names = list(self._jobs) if tickets is None else [t for t in tickets if t in self._jobs]
        for ticket in [t for t in names if t not in self._withheld]:
            self._acks.append(self.complete(ticket))
            self._flushed.append(ticket)

    @property
    def pending(self) -> int:
        return len(self._jobs) + len(self._acks)

    def complete(self, ticket: int, *, ok: bool = True, detail: str = "") -> Ack:
        """Finish the held job of `ticket` now: copy every row (unless `ok` is False) and return its ack."""
        job = self._jobs.get(ticket)
        if job is None:
            raise NoSuchJobError(ticket, "the transfer engine holds no job for it "
                                         "(never submitted, or already acked)")
        if ok:
            pools = self.pools
            if pools is None:
                raise RuntimeError("ManualEngine.complete() before attach(pools)")
            for op in job.copies:
                pools.copy(op)
        del self._jobs[ticket]
        self._withheld.discard(ticket)
        return job.ack(ok, detail)

    def withhold(self, ticket: int) -> None:
        """Keep `ticket`'s job out of `flush`, `next_ready` and `ack all` until acked explicitly."""
        if ticket not in self._jobs:
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
        return self._jobs.get(ticket)

    def jobs(self) -> list[TransferJob]:
        """Held jobs, oldest first."""
        return list(self._jobs.values())

    def next_ready(self) -> int | None:
        """The oldest held job that is not withheld."""
        for ticket in self._jobs:
            if ticket not in self._withheld:
                return ticket
        return None

    def take_flushed(self) -> list[int]:
        """Tickets completed by `flush()` since the last call."""
        out, self._flushed = self._flushed, []
        return out

    def describe_jobs(self) -> list[tuple[int, int, str, bool]]:
        """(ticket, generation, kind, withheld) of every held job, oldest first (for crash dumps)."""
        return [(j.ticket, j.generation, j.kind.value, j.ticket in self._withheld) for j in self._jobs.values()]

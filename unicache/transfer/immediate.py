"""`ImmediateEngine`: copies at submit time, acks on the next poll."""

from __future__ import annotations

from collections.abc import Collection

from unicache.errors import EngineStateError
from unicache.transfer.base import Ack, TransferEngine, TransferJob


class ImmediateEngine(TransferEngine):
    """The synchronous reference engine.

    `copy=False` moves no bytes (pure bookkeeping, for benchmarks that compare
    against peers run with a no-op transfer); everything else is unchanged.
    """

    def __init__(self, *, copy: bool = True) -> None:
        self.copy = copy
        self._acks: list[Ack] = []

    def submit(self, job: TransferJob) -> None:
        if self.copy:
            pools = self.pools
            if pools is None:
                raise EngineStateError("ImmediateEngine.submit() before attach(pools)")
            for op in job.copies:
                pools.copy(op)
        self._acks.append(Ack(job.ticket, job.generation))

    def poll(self) -> list[Ack]:
        acks = self._acks
        if not acks:
            return []
        self._acks = []
        return acks

    def flush(self, tickets: Collection[int] | None = None) -> None:
        return None

    @property
    def pending(self) -> int:
        return len(self._acks)

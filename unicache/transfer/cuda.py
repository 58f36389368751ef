"""`CudaEngine`: copies on a CUDA side stream, completion found by polling events.

``submit`` enqueues every copy of the job on the engine's side stream (after
the current stream's work, so the copy reads what compute already wrote) and
records an event; ``poll`` acks, in submission order, every job whose event
has completed, after running the copy's finisher (device->host copies land in
a pinned staging buffer and are scattered into the host pool then).
``flush`` waits for the named jobs. Requires a CUDA device; constructing it
without one raises :class:`CudaUnavailableError`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import torch

from unicache.errors import EngineStateError
from unicache.transfer.base import Ack, TransferEngine, TransferJob


_new_stream: Callable[..., torch.cuda.Stream] = torch.cuda.Stream
_new_event: Callable[..., torch.cuda.Event] = torch.cuda.Event
_query: Callable[[torch.cuda.Event], bool] = torch.cuda.Event.query


class CudaUnavailableError(RuntimeError):
    """The CUDA engine was asked for on a machine (or torch build) without CUDA."""


def cuda_available() -> bool:
    """Whether a CUDA device can be used (the test for picking this engine automatically)."""
    return bool(torch.cuda.is_available())


@dataclass(slots=True)
class _InFlight:
    job: TransferJob
    event: torch.cuda.Event
    finishers: list[Callable[[], None]]
    done: bool = False


class CudaEngine(TransferEngine):
    """Asynchronous host<->device copies on one side stream (see the module docstring)."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        if not cuda_available():
            raise CudaUnavailableError("CudaEngine needs a CUDA device; torch.cuda.is_available() is False")
        self.device = torch.device(device) if device is not None else torch.device("cuda")
        self.stream = _new_stream(device=self.device)
        self._in_flight: list[_InFlight] = []
        self._acks: list[Ack] = []

    def submit(self, job: TransferJob) -> None:
        pools = self.pools
        if pools is None:
            raise EngineStateError("CudaEngine.submit() before attach(pools)")
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        finishers = [pools.copy_async(op, self.stream) for op in job.copies]
        event = _new_event()
        event.record(self.stream)
        self._in_flight.append(_InFlight(job, event, finishers))

    def _finish(self, entry: _InFlight) -> None:
        for fin in entry.finishers:
            fin()
        entry.finishers = []
        entry.done = True
        self._acks.append(entry.job.ack())

    def poll(self) -> list[Ack]:
        still: list[_InFlight] = []
        for entry in self._in_flight:
            if not entry.done and _query(entry.event):
                self._finish(entry)
            if not entry.done:
                still.append(entry)
        self._in_flight = still
        acks, self._acks = self._acks, []
        return acks

    def flush(self, tickets: Collection[int] | None = None) -> None:
        wanted = None if tickets is None else set(tickets)
        still: list[_InFlight] = []
        for entry in self._in_flight:
            if wanted is None or entry.job.ticket in wanted:
                entry.event.synchronize()
                self._finish(entry)
            else:
                still.append(entry)
        self._in_flight = still

    @property
    def pending(self) -> int:
        return len(self._in_flight) + len(self._acks)

    def close(self) -> None:
        self.stream.synchronize()

    def describe_jobs(self) -> list[tuple[int, int, str, bool]]:
        """(ticket, generation, kind, withheld) of every job still in flight (for crash dumps)."""
        return [(e.job.ticket, e.job.generation, e.job.kind.value, False) for e in self._in_flight]

"""`SimulatedEngine`: a seeded, fault-injecting transfer engine driven by a step clock.

Each submitted job gets a completion step from a seeded delay distribution;
when the clock (``tick()``, once per scheduler step) reaches it, the copy is
performed *then*, reading the source rows as they are at that moment, and its
ack is queued for the next ``poll()``. So a slot freed or reused while a copy
is in flight yields wrong bytes, which the engine's data oracle catches.

Faults (any combination):

- ``delay``: completion 1..``max_delay`` steps after submission (geometric-like,
  mean ``mean_delay``) instead of the next step;
- ``reorder``: jobs may complete in any order and each step's acks are shuffled
  (without it completions keep submission order);
- ``duplicate``: some acks are delivered a second time a few steps later;
- ``fail``: some copies fail (of the job kinds in ``fail_kinds``): each copy
  of the job is either performed or its destination rows are overwritten with
  a poison value (a copy that died midway), and the ack says ``ok=False``;
- ``lose``: some jobs (``lose_rate``) lose their ack: the copy runs late
  (``max_delay`` + 1 .. ``late_delay`` steps after submission, still writing
  its destination rows then) and its ack comes then, or, for a share
  ``never_rate`` of them, never (``lost_acks`` lists those). ``flush`` does not
  complete a job whose ack is lost (a caller waiting on it gives up). The
  cache must time such tickets out (``UniCache.time_out``) and keep their rows
  quarantined until the late ack.

A bad copy that still acks ok is not a fault kind (no correct cache can
survive it) but a deliberate bug: setting ``corrupt_generation`` makes the next
job of that generation (and of a kind in ``corrupt_kinds``) that completes ok
write every destination row off by one (``corrupted`` counts them); the data oracle must catch it
(``unicache simulate --inject badcopy``).

Everything is a pure function of the seed and the sequence of calls.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

import torch

from unicache.errors import EngineStateError
from unicache.transfer.base import Ack, CopyOp, TransferEngine, TransferJob

FAULT_KINDS: tuple[str, ...] = ("delay", "reorder", "duplicate", "fail", "lose")
POISON = -7
"""Value written into the destination rows of a failed copy (the reference model never produces it)."""


class FaultSpecError(ValueError):
    """An unknown fault kind or an out-of-range fault parameter."""


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Which faults the simulated engine injects, and how hard."""

    delay: bool = False
    reorder: bool = False
    duplicate: bool = False
    fail: bool = False
    lose: bool = False
    mean_delay: float = 3.0
    max_delay: int = 12
    duplicate_rate: float = 0.05
    fail_rate: float = 0.05
    fail_kinds: frozenset[str] = frozenset({"load_back", "backup"})
    lose_rate: float = 0.05
    late_delay: int = 48
    never_rate: float = 0.3

    def __post_init__(self) -> None:
        unknown = sorted(self.fail_kinds - {"load_back", "backup"})
        if unknown:
            raise FaultSpecError(f"fail_kinds: unknown job kind(s) {unknown} (load_back, backup)")
        if not self.mean_delay >= 1.0:
            raise FaultSpecError(f"mean_delay must be >= 1, got {self.mean_delay}")
        if self.max_delay < 1:
            raise FaultSpecError(f"max_delay must be >= 1, got {self.max_delay}")
        if self.lose and self.late_delay <= self.max_delay:
            raise FaultSpecError(f"late_delay must be > max_delay ({self.max_delay}), got {self.late_delay}")
        for name, rate in (("duplicate_rate", self.duplicate_rate), ("fail_rate", self.fail_rate),
                           ("lose_rate", self.lose_rate), ("never_rate", self.never_rate)):
            if not 0.0 <= rate <= 1.0:
                raise FaultSpecError(f"{name} must be in [0, 1], got {rate}")

    @classmethod
    def parse(cls, kinds: Iterable[str], **params: float) -> FaultSpec:
        """From fault names (``delay``, ``reorder``, ``duplicate``, ``fail``, ``lose``); unknown names raise."""
        chosen: set[str] = set()
        for kind in kinds:
            name = kind.strip().lower()
            if not name or name == "none":
                continue
            if name not in FAULT_KINDS:
                raise FaultSpecError(f"unknown fault kind {kind!r} (choose from {', '.join(FAULT_KINDS)})")
            chosen.add(name)
        return cls(delay="delay" in chosen, reorder="reorder" in chosen, duplicate="duplicate" in chosen,
                   fail="fail" in chosen, lose="lose" in chosen,
                   mean_delay=float(params.get("mean_delay", 3.0)), max_delay=int(params.get("max_delay", 12)),
                   duplicate_rate=float(params.get("duplicate_rate", 0.05)),
                   fail_rate=float(params.get("fail_rate", 0.05)),
                   lose_rate=float(params.get("lose_rate", 0.05)),
                   late_delay=int(params.get("late_delay", 48)),
                   never_rate=float(params.get("never_rate", 0.3)))

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k in FAULT_KINDS if getattr(self, k))


class AckSink(Protocol):
    """Where a recording run logs the acks the engine hands to the cache."""

    def add(self, *op: object) -> None: ...


class SimulatedEngine(TransferEngine):
    """Deterministic asynchronous copies with injected faults (see the module docstring)."""

    def __init__(self, faults: FaultSpec | None = None, *, seed: int = 0) -> None:
        self.faults = faults or FaultSpec()
        self.seed = seed
        self._rng = random.Random(seed)
        self.now = 0
        self._seq = 0
        self._last_due = 0
        self._heap: list[tuple[int, float, int, int]] = []
        self._jobs: dict[int, TransferJob] = {}
        self._ready: list[Ack] = []
        self._dups: list[tuple[int, int, Ack]] = []
        self.completed = 0
        self.failed = 0
        self.duplicated = 0
        self.ack_log: AckSink | None = None
        self.corrupt_generation: int | None = None
        self.corrupt_kinds: frozenset[str] = frozenset({"load_back", "backup"})
        self.corrupted = 0
        self._lost: dict[int, bool] = {}
        self.lost_acks: set[tuple[int, int]] = set()
        """(ticket, generation) of every job whose copy ran but whose ack will never come."""
        self.late = 0

    def submit(self, job: TransferJob) -> None:
        f = self.faults
        rng = self._rng
        if f.lose and rng.random() < f.lose_rate:
            never = rng.random() < f.never_rate
            due = self.now + rng.randint(f.max_delay + 1, f.late_delay)
            self._seq += 1
            self._jobs[self._seq] = job
            self._lost[self._seq] = never
            heapq.heappush(self._heap, (due, rng.random() if f.reorder else 0.0, self._seq, job.ticket))
            return
        if f.delay:
            due = self.now + min(f.max_delay, 1 + int(rng.expovariate(1.0 / f.mean_delay)))
        else:
            due = self.now + 1
        if not f.reorder:
            due = max(due, self._last_due)
            self._last_due = due
        order = rng.random() if f.reorder else 0.0
        self._seq += 1
        self._jobs[self._seq] = job
        heapq.heappush(self._heap, (due, order, self._seq, job.ticket))

    def tick(self) -> None:
        """Advance the clock one step and complete every job now due."""
        self.now += 1
        heap = self._heap
        batch: list[Ack] = []
        while heap and heap[0][0] <= self.now:
            _, _, seq, _ = heapq.heappop(heap)
            job = self._jobs.pop(seq, None)
            if job is not None:
                never = self._lost.pop(seq, None)
                ack = self._complete(job, lost=bool(never))
                if never:
                    self.lost_acks.add((job.ticket, job.generation))
                else:
                    self.late += never is not None
                    batch.append(ack)
        while self._dups and self._dups[0][0] <= self.now:
            batch.append(heapq.heappop(self._dups)[2])
        if self.faults.reorder and len(batch) > 1:
            self._rng.shuffle(batch)
        self._ready.extend(batch)

    def _complete(self, job: TransferJob, *, lost: bool = False) -> Ack:
        pools = self.pools
        if pools is None:
            raise EngineStateError("SimulatedEngine used before attach(pools)")
        f = self.faults
        rng = self._rng
        ok = not (f.fail and job.kind.value in f.fail_kinds and rng.random() < f.fail_rate)
        for op in job.copies:
            if ok or rng.random() < 0.5:
                pools.copy(op)
            else:
                self._poison(op)
        if (ok and job.generation == self.corrupt_generation and job.kind.value in self.corrupt_kinds
                and any(op.dst for op in job.copies)):
            self.corrupt_generation = None
            self._garble(job)
        self.completed += 1
        ack = Ack(job.ticket, job.generation, ok, "" if ok else "simulated copy failure")
        if not ok:
            self.failed += 1
        if f.duplicate and not lost and rng.random() < f.duplicate_rate:
            self.duplicated += 1
            again = self.now + 1 + rng.randrange(f.max_delay if f.delay else 2)
            heapq.heappush(self._dups, (again, self._seq_next(), Ack(job.ticket, job.generation, ok, ack.detail)))
        return ack

    def _seq_next(self) -> int:
        self._seq += 1
        return self._seq

    def _poison(self, op: CopyOp) -> None:
        pools = self.pools
        assert pools is not None
        if not op.dst:
            return
        pool = pools.pool(op.component, op.dst_tier)
        rows = torch.full((len(op.dst), *pool.row_shape), POISON, dtype=pool.data.dtype)
        pools.write(op.component, op.dst_tier, list(op.dst), rows)

    def _garble(self, job: TransferJob) -> None:
        """The injected bad copy: every destination row off by one, and the ack will still say ok."""
        pools = self.pools
        assert pools is not None
        for op in job.copies:
            if op.dst:
                rows = pools.read(op.component, op.dst_tier, list(op.dst))
                pools.write(op.component, op.dst_tier, list(op.dst), rows + 1)
        self.corrupted += 1

    def poll(self) -> list[Ack]:
        ready = self._ready
        if not ready:
            return []
        self._ready = []
        log = self.ack_log
        if log is not None:
            for ack in ready:
                log.add("ack", ack.ticket, ack.generation, ack.ok)
        return ready

    def flush(self, tickets: Collection[int] | None = None) -> None:
        """Complete the named jobs (all when None) now, but those whose ack is lost; their acks come from
        the next poll."""
        wanted = None if tickets is None else set(tickets)
        keep: list[tuple[int, float, int, int]] = []
        batch: list[Ack] = []
        for entry in sorted(self._heap):
            if (wanted is None or entry[3] in wanted) and entry[2] not in self._lost:
                job = self._jobs.pop(entry[2], None)
                if job is not None:
                    batch.append(self._complete(job))
            else:
                keep.append(entry)
        heapq.heapify(keep)
        self._heap = keep
        self._ready.extend(batch)

    @property
    def pending(self) -> int:
        return len(self._jobs) + len(self._ready)

    @property
    def ack_bound(self) -> int:
        """Every job completes at most this many ticks after it was submitted (its ack at the next poll,
        unless it is lost for good)."""
        f = self.faults
        if f.lose:
            return f.late_delay
        return f.max_delay if f.delay else 1

    def describe_jobs(self) -> list[tuple[int, int, str, bool]]:
        """(ticket, generation, kind, withheld) of every job not yet completed (for crash dumps)."""
        return [(j.ticket, j.generation, j.kind.value, False)
                for _, _, seq, _ in sorted(self._heap) if (j := self._jobs.get(seq)) is not None]

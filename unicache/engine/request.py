"""A request's progress through the scheduler loop, and what the loop itself counts."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields

from unicache.engine.reference import PrefixHashes
from unicache.traces.request import TraceRequest


class Phase(enum.Enum):
    WAITING = "waiting"
    LOADING = "loading"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    ABORTED = "aborted"


@dataclass(slots=True)
class Request:
    """A request's progress through the loop and the device slots it owns.

    Its load-back ticket and lock receipt live in the scheduler's
    `Holdings`, keyed by its id (`rid`).
    """

    src: TraceRequest
    tokens: tuple[int, ...]
    h: PrefixHashes | None
    phase: Phase = Phase.WAITING
    matched: bool = False
    first_device_len: int = 0
    load_backs: int = 0
    loaded_end: int = 0
    prefix: int = 0
    cached_end: int = 0
    ticket_leases: tuple[int, ...] = ()
    full_pages: list[int] = field(default_factory=list)
    swa_pages: list[int] = field(default_factory=list)
    mamba_slot: int | None = None
    decoded: int = 0

    @property
    def rid(self) -> int:
        return self.src.rid

    @property
    def prompt_len(self) -> int:
        return len(self.tokens)

    @property
    def total_len(self) -> int:
        return len(self.tokens) + self.src.output_tokens


@dataclass(slots=True)
class EngineStats:
    """What the loop itself counts (the cache and ledger count the rest)."""

    steps: int = 0
    admitted: int = 0
    finished: int = 0
    aborted: int = 0
    device_hit_tokens: int = 0
    host_hit_tokens: int = 0
    computed_tokens: int = 0
    decoded_tokens: int = 0
    load_backs_started: int = 0
    load_backs_ok: int = 0
    load_backs_failed: int = 0
    load_backs_stale: int = 0
    load_backs_timed_out: int = 0
    tickets_timed_out: int = 0
    lost_ack_waits: int = 0
    start_retries: int = 0
    prompt_inserts: int = 0
    branch_states: int = 0
    final_inserts: int = 0
    verified_tokens: int = 0
    verified_states: int = 0
    tree_checks: int = 0
    sanity_checks: int = 0
    step_checks: int = 0

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

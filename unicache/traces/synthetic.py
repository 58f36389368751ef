"""Synthetic multi-turn chat workloads: sessions share a few system prompts and grow turn by turn.

With the defaults, ``generate_multiturn(seed)`` yields the same request sequence
as the SGLang CPU harness's workload for that seed (its documented algorithm:
8 system prompts of U[1024, 2048] tokens, 200 sessions of 5 turns, each turn
appending U[64, 512] tokens from a 150k vocabulary, 16 sessions active, a
random active session emitting each next turn), so both caches replay
identical requests.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass

from unicache.traces.request import Trace, TraceRequest


@dataclass(frozen=True, slots=True)
class MultiTurnSpec:
    """Shape of a synthetic multi-turn workload."""

    sessions: int = 200
    turns: int = 5
    system_prompts: int = 8
    system_len: tuple[int, int] = (1024, 2048)
    turn_len: tuple[int, int] = (64, 512)
    active: int = 16
    page_size: int = 1
    vocab: int = 150_000
    output_tokens: int = 0

    def __post_init__(self) -> None:
        for name, value in (("sessions", self.sessions), ("turns", self.turns),
                            ("system_prompts", self.system_prompts), ("active", self.active),
                            ("page_size", self.page_size), ("vocab", self.vocab)):
            if value < 1:
                raise ValueError(f"MultiTurnSpec.{name} must be >= 1, got {value}")
        for name, (lo, hi) in (("system_len", self.system_len), ("turn_len", self.turn_len)):
            if not 1 <= lo <= hi:
                raise ValueError(f"MultiTurnSpec.{name} must satisfy 1 <= lo <= hi, got {(lo, hi)}")
        if self.output_tokens < 0:
            raise ValueError(f"MultiTurnSpec.output_tokens must be >= 0, got {self.output_tokens}")


def _page_floor(n: int, page: int) -> int:
    return max(page, n - n % page)


def generate_multiturn(seed: int, spec: MultiTurnSpec | None = None) -> Trace:
    """A deterministic multi-turn trace: each request is its session's whole history so far."""
    spec = spec or MultiTurnSpec()
    rng = random.Random(seed)
    vocab = spec.vocab
    prompts: list[list[int]] = []
    for _ in range(spec.system_prompts):
        length = _page_floor(rng.randint(*spec.system_len), spec.page_size)
        prompts.append([rng.randint(1, vocab) for _ in range(length)])
    session_prompt = [rng.randrange(spec.system_prompts) for _ in range(spec.sessions)]
    history: list[array[int] | None] = [array("q", prompts[p]) for p in session_prompt]
    turn_of = [0] * spec.sessions
    waiting = list(range(spec.sessions))
    active = waiting[:spec.active]
    del waiting[:spec.active]
    waiting.reverse()
    requests: list[TraceRequest] = []
    while active:
        slot = rng.randrange(len(active))
        session = active[slot]
        hist = history[session]
        assert hist is not None
        chunk = _page_floor(rng.randint(*spec.turn_len), spec.page_size)
        hist.extend(rng.randint(1, vocab) for _ in range(chunk))
        requests.append(TraceRequest(rid=len(requests), tokens=array("q", hist),
                                     output_tokens=spec.output_tokens, session=session,
                                     turn=turn_of[session]))
        turn_of[session] += 1
        if turn_of[session] == spec.turns:
            history[session] = None
            if waiting:
                active[slot] = waiting.pop()
            else:
                active.pop(slot)
    name = f"multiturn(seed={seed}, sessions={spec.sessions}, turns={spec.turns})"
    return Trace(name, requests, source="synthetic")

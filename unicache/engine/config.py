"""`EngineConfig`: the scheduler's knobs (how many requests run at once, decode speed, checks)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


class EngineConfigError(ValueError):
    """An engine knob is out of range; the message names it."""


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How the scheduler drives the cache.

    - ``max_running``: requests admitted at once (loading back or running);
    - ``decode_per_step``: output tokens each running request decodes per step;
    - ``cache_chunk``: after prefill, the prompt is cached up to its last multiple
      of this many tokens (with the Mamba state there), like a serving engine
      caching an unfinished request; ``None`` caches up to the prompt end;
    - ``branch_states``: with Mamba, also cache the state at every branch point on
      a new prompt's path that has none (where the tree forks, so later requests
      that diverge there can resume from it; the admission rule of Marconi,
      MLSys'25), at ``cache_chunk``-aligned positions;
    - ``load_back``: use load-backs at all (off: host hits are recomputed);
    - ``max_load_backs``: load-backs a request may start (a failed one is retried
      up to this, then the request recomputes);
    - ``data``: compute, store and move KV/state at all; off is bookkeeping only
      (benchmarks against caches that move no bytes): nothing is written or checked;
    - ``verify``: compare every reused byte with the reference model;
    - ``check_every``: run the cache sanity check every N steps (0: only at the end);
    - ``tree_check_every``: run the whole-tree data oracle every N steps (0: only at the end);
    - ``step_checks``: between those, check what each step touched (nodes, leases, pool
      counts; :mod:`unicache.engine.stepcheck`) and the ownership invariants;
    - ``vocab``: vocabulary size for decoded tokens;
    - ``ack_timeout``: steps after which a ticket still waiting for its ack is timed
      out (``UniCache.time_out``: its request recomputes, its rows stay quarantined
      until the late ack); 0 never times out.
    """

    max_running: int = 16
    decode_per_step: int = 4
    cache_chunk: int | None = None
    branch_states: bool = True
    load_back: bool = True
    max_load_backs: int = 2
    data: bool = True
    verify: bool = True
    check_every: int = 0
    tree_check_every: int = 0
    step_checks: bool = False
    vocab: int = 150_000
    ack_timeout: int = 64

    def __post_init__(self) -> None:
        for name in ("max_running", "decode_per_step", "vocab"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise EngineConfigError(f"engine config {name} must be an int >= 1, got {value!r}")
        for name in ("max_load_backs", "check_every", "tree_check_every", "ack_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise EngineConfigError(f"engine config {name} must be an int >= 0, got {value!r}")
        if self.cache_chunk is not None and self.cache_chunk < 1:
            raise EngineConfigError(f"engine config cache_chunk must be >= 1, got {self.cache_chunk}")
        if self.vocab < 2:
            raise EngineConfigError(f"engine config vocab must be >= 2, got {self.vocab}")

    def to_json(self) -> dict[str, object]:
        return asdict(self)

"""`explore`: breadth-first search over every action sequence of a scope, checking every state.

A state is reached by re-executing its path from a fresh session (`replay`);
states are deduplicated by their `canonical_form`, so each distinct state is
expanded once and the first path found to it is a shortest one. After every
action (before deduplication, so a state whose bytes are wrong is never merged
away) three checks run: the action raised nothing but an expected refusal,
`UniCache.sanity_check()` (every derived count, and every node's pin sets
recomputed from the live leases) is clean, and the byte oracle finds every
device- and host-resident slot of the tree equal to the reference model. The
first violation stops the search: BFS order makes its path a shortest one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from unicache.explore.actions import enabled
from unicache.explore.canonical import Form, canonical_form
from unicache.explore.replay import Replayed, replay
from unicache.explore.scope import Scope
from unicache.repl.executor import Outcome

EXPECTED_REFUSALS = frozenset({"CapacityError"})
"""Errors an enabled action may end in without anything being wrong: an insert without device room
(also after an injected allocation refusal)."""

ViolationKind = Literal["crash", "sanity", "data"]
StopReason = Literal["exhausted", "depth", "max_states", "time", "interrupted", "violation"]


@dataclass(frozen=True, slots=True)
class Violation:
    """What broke, and the shortest path of REPL lines (after the scope's `new`) that gets there."""

    kind: ViolationKind
    detail: str
    path: tuple[str, ...]

    def script(self, scope: Scope, stats: ExploreStats) -> str:
        """A REPL script that reproduces the violation: it fails at its last line."""
        head = [
            f"# unicache explore found a {self.kind} violation at depth {len(self.path)} "
            f"after {stats.transitions} states ({stats.distinct} distinct)",
            *(f"# {line}" for line in self.detail.splitlines()[:20]),
            scope.new_line(),
            *self.path,
        ]
        if self.kind != "crash":
            head.append("assert clean")
        return "\n".join(head) + "\n"


@dataclass(slots=True)
class ExploreStats:
    """Counts of one search: `transitions` states reached by an action (each checked), `distinct` of them
    new, `depth` the deepest level fully expanded (`frontier` the states left at the next one)."""

    transitions: int = 0
    distinct: int = 1
    depth: int = 0
    deepest: int = 0
    frontier: int = 1
    seconds: float = 0.0
    stopped: StopReason = "depth"
    levels: list[int] = field(default_factory=list)
    """Distinct states first reached at each depth (depth 0: the empty cache)."""

    @property
    def per_second(self) -> float:
        return self.transitions / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True, slots=True)
class ExploreResult:
    stats: ExploreStats
    violation: Violation | None


def check_state(r: Replayed, action: str, out: Outcome) -> tuple[ViolationKind, str] | None:
    """The first check `r`'s state fails after `action` gave `out`, or None."""
    if not out.ok:
        err = out.envelope.get("error")
        etype = err.get("type") if isinstance(err, dict) else None
        if etype not in EXPECTED_REFUSALS:
            message = err.get("message") if isinstance(err, dict) else None
            return "crash", f"{action!r} raised {etype}: {message}"
    report = r.cache.sanity_check()
    if not report.ok:
        return "sanity", report.describe()
    driver = r.session.driver
    data = driver.data_check() if driver is not None else None
    bad = data.get("mismatches") if data is not None else None
    if isinstance(bad, list) and bad:
        return "data", "; ".join(
            f"node #{m.get('node')} {m.get('component')} {m.get('tier')}: {m.get('detail')}"
            for m in bad[:8] if isinstance(m, dict))
    return None


def explore(
    scope: Scope,
    depth: int,
    *,
    max_states: int | None = None,
    seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_level: Callable[[ExploreStats], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ExploreResult:
    """Breadth-first search of `scope` to `depth` actions (bounded by `max_states` distinct states and
    `seconds` of wall time, when given; `should_stop` is asked after every state); stops at the first
    violation."""
    started = clock()
    stats = ExploreStats(levels=[1])
    root = replay(scope, ())
    found = check_state(root, "new", Outcome(None, {"ok": True}, True, None))
    seen: set[Form] = {canonical_form(root)}
    closing = root.close()
    if found is None and closing is not None:
        found = ("crash", f"closing the empty cache's session raised {type(closing).__name__}: {closing}")
    if found is not None:
        stats.stopped = "violation"
        return ExploreResult(stats, Violation(found[0], found[1], ()))
    frontier: list[tuple[str, ...]] = [()]
    for level in range(depth):
        following: list[tuple[str, ...]] = []
        for path in frontier:
            parent: Replayed | None = replay(scope, path)
            assert parent is not None
            actions = enabled(parent, scope)
            for action in actions:
                r = parent if parent is not None else replay(scope, path)
                parent = None
                out = r.run(action)
                stats.transitions += 1
                line = f"! {action}" if not out.ok else action
                found = check_state(r, action, out)
                key = canonical_form(r) if found is None else None
                closing = r.close()
                if found is None and closing is not None:
                    found = ("crash", f"closing the session after {action!r} (what the REPL's 'new' does: "
                                      f"unlock every receipt, reset, fail every held copy) raised "
                                      f"{type(closing).__name__}: {closing}")
                    line = f"{line}\n{scope.new_line()}"
                if found is not None:
                    stats.seconds = clock() - started
                    stats.stopped = "violation"
                    stats.deepest = level + 1
                    return ExploreResult(stats, Violation(found[0], found[1], (*path, line)))
                assert key is not None
                if key in seen:
                    continue
                seen.add(key)
                stats.distinct += 1
                stats.deepest = level + 1
                following.append((*path, line))
                stopped = _over_budget(stats, max_states, seconds, clock() - started, should_stop)
                if stopped is not None:
                    return _stopped(stats, stopped, len(following), clock() - started)
            if parent is not None:
                parent.close()
            stopped = _over_budget(stats, None, seconds, clock() - started, should_stop)
            if stopped is not None:
                return _stopped(stats, stopped, len(following), clock() - started)
        stats.depth = level + 1
        stats.levels.append(len(following))
        stats.frontier = len(following)
        stats.seconds = clock() - started
        if on_level is not None:
            on_level(stats)
        if not following:
            stats.stopped = "exhausted"
            return ExploreResult(stats, None)
        frontier = following
    stats.stopped = "depth"
    stats.seconds = clock() - started
    return ExploreResult(stats, None)


def _stopped(stats: ExploreStats, reason: StopReason, reached: int, elapsed: float) -> ExploreResult:
    """The result of a search stopped by a bound with `reached` distinct states found at the next depth."""
    stats.stopped = reason
    stats.frontier = reached
    stats.levels.append(reached)
    stats.seconds = elapsed
    return ExploreResult(stats, None)


def _over_budget(stats: ExploreStats, max_states: int | None, seconds: float | None,
                 elapsed: float, should_stop: Callable[[], bool] | None) -> StopReason | None:
    if should_stop is not None and should_stop():
        return "interrupted"
    if max_states is not None and stats.distinct >= max_states:
        return "max_states"
    if seconds is not None and elapsed >= seconds:
        return "time"
    return None

"""`Replayed`: a path of REPL lines executed from a fresh session, with the tickets it has seen.

The cache is not cloneable, so the search reaches a state by re-executing its
path: the scope's `new` line, then each action. A line recorded with a leading
'!' was an expected refusal when the path was found and must fail again; any
other line must succeed again (`ReplayDivergedError` otherwise: the cache or
the REPL is not deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from unicache.repl.executor import Outcome, execute
from unicache.repl.manual_engine import ManualEngine
from unicache.repl.session import Session

if TYPE_CHECKING:
    from unicache.cache import UniCache
    from unicache.explore.scope import Scope


class ReplayDivergedError(RuntimeError):
    """A path's line did not do on re-execution what it did when the path was found."""

    def __init__(self, line: str, index: int, detail: str) -> None:
        super().__init__(f"explore: line {index} {line!r} diverged on re-execution: {detail}")
        self.line = line
        self.index = index


class Replayed:
    """A live REPL session at the end of a path, and every ticket seen on the way: id -> (generation, kind)."""

    __slots__ = ("session", "cache", "manual", "seen")

    def __init__(self, session: Session, cache: UniCache, manual: ManualEngine) -> None:
        self.session = session
        self.cache = cache
        self.manual = manual
        self.seen: dict[int, tuple[int, str]] = {}

    @classmethod
    def start(cls, scope: Scope) -> Replayed:
        session = Session()
        out = execute(session, scope.new_line())
        if out is None or not out.ok or session.cache is None or not isinstance(session.manual, ManualEngine):
            session.close()
            raise ReplayDivergedError(scope.new_line(), 0, "the scope's cache could not be created")
        return cls(session, session.cache, session.manual)

    def run(self, line: str) -> Outcome:
        """Execute one more line and note the tickets live or held after it."""
        out = execute(self.session, line)
        if out is None:
            raise ReplayDivergedError(line, -1, "a blank line or comment is no action")
        for t in self.cache.tickets():
            self.seen.setdefault(t.id, (t.generation, t.kind))
        for job in self.manual.jobs.values():
            self.seen.setdefault(job.ticket, (job.generation, job.kind.value))
        return out

    def newest_settled(self) -> int | None:
        """The newest ticket seen that has settled (nothing live, held or quarantined for it)."""
        live = {t.id for t in self.cache.tickets()} | set(self.manual.jobs)
        live.update(q.ticket_id for q in self.cache.quarantine())
        done = [t for t in self.seen if t not in live]
        return max(done) if done else None

    def close(self) -> Exception | None:
        """Close the session (unlock every receipt, reset, fail every held copy), as the REPL's `new`
        does; what that raised, if anything (a clean state must close cleanly)."""
        try:
            self.session.close()
        except Exception as exc:  # the search reports it as the state's violation
            return exc
        return None


def replay(scope: Scope, lines: Sequence[str]) -> Replayed:
    """A fresh session after `lines`, each checked to behave as it did when recorded."""
    r = Replayed.start(scope)
    try:
        for i, line in enumerate(lines, 1):
            out = r.run(line)
            if not out.met:
                raise ReplayDivergedError(line, i, str(out.envelope.get("error") or out.envelope.get("unmet")))
    except BaseException:
        r.close()
        raise
    return r

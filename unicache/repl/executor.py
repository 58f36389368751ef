"""Run one REPL line: parse, check what it needs, execute, and wrap the outcome in the JSON envelope.

Every outcome is `{"cmd": NAME, "args": [...], "ok": true, ...result}` or
`{"cmd": NAME, "args": [...], "ok": false, "error": {"type", "message"[, "ids"]}}`;
the human renderer draws from the same envelope, so both views always agree.
A failing condition adds `expected`/`actual` to the error, a capacity refusal
its `reason`; a line starting with '!' that succeeded carries `unmet`, saying so.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from unicache.dump.schema import JSON, JSONObject
from unicache.repl.commands import REGISTRY, Needs
from unicache.repl.errors import CapacityError, CommandSyntaxError, ConditionError, NeedsLiveCacheError
from unicache.repl.parser import Line, parse_args, split_line
from unicache.repl.session import Session, completion_json

_RESERVED = frozenset({"cmd", "args", "ok", "error", "expect_error", "unmet"})


@dataclass(slots=True)
class Outcome:
    """One executed line. `met` is whether it did what the script expected (success, or failure
    for a line starting with '!')."""

    line: Line | None
    envelope: JSONObject
    ok: bool
    error: BaseException | None
    expect_error: bool = False

    @property
    def met(self) -> bool:
        return self.ok != self.expect_error


def error_json(exc: BaseException) -> JSONObject:
    from unicache.dump.writer import describe_error

    doc: JSONObject = {"type": type(exc).__name__, "message": str(exc)}
    ids = describe_error(exc)["ids"]
    if isinstance(ids, dict) and ids:
        doc["ids"] = ids
    if isinstance(exc, ConditionError):
        doc["expected"] = exc.expected
        doc["actual"] = exc.actual
    if isinstance(exc, CapacityError):
        doc["reason"] = exc.reason.to_json()
    return doc


def unmet_expectation(envelope: JSONObject) -> str:
    """Why a line starting with '!' (it must fail) did not do what it should: it succeeded."""
    shown = {k: v for k, v in envelope.items() if k not in _RESERVED and k != "completions"}
    brief = json.dumps(shown)
    if len(brief) > 200:
        brief = brief[:197] + "..."
    return (f"expected {envelope.get('cmd')!r} to fail (the line starts with '!'), but it succeeded: {brief}; "
            f"drop the '!' if success is right")


def _unknown(name: str) -> CommandSyntaxError:
    close = difflib.get_close_matches(name, list(REGISTRY), n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else "; 'help' lists every command"
    return CommandSyntaxError("", f"unknown command {name!r}{hint}")


def execute(session: Session, text: str) -> Outcome | None:
    """Run one input line; None for blank lines and comments."""
    try:
        line = split_line(text)
    except CommandSyntaxError as exc:
        expect = text.strip().startswith("!")
        first = text.strip().lstrip("!").split()
        envelope: JSONObject = {"cmd": first[0] if first else "", "args": [], "ok": False, "error": error_json(exc)}
        if expect:
            envelope["expect_error"] = True
        return Outcome(None, envelope, False, exc, expect)
    if line is None:
        return None
    envelope = {"cmd": line.name, "args": list(line.argv)}
    if line.expect_error:
        envelope["expect_error"] = True
    cmd = REGISTRY.get(line.name)
    live = False
    try:
        if cmd is None:
            raise _unknown(line.name)
        args = parse_args(cmd.parser, line.argv)
        if cmd.needs is Needs.LIVE:
            session.live(cmd.name)
            live = True
        elif cmd.needs is Needs.VIEW and session.cache is None and session.dump is None:
            raise NeedsLiveCacheError(cmd.name, session.source)
        cache = session.cache
        if live and cache is not None and session.driver is not None and session.driver.name == "fresh":
            cache.ledger.step += 1
        data = cmd.body(session, args)
        extra = _after(session, live)
    except Exception as exc:
        if live:
            try:
                _after(session, live)
            except Exception:
                pass
        session.invalidate()
        envelope["ok"] = False
        envelope["error"] = error_json(exc)
        return Outcome(line, envelope, False, exc, line.expect_error)
    session.invalidate()
    clash = _RESERVED.intersection(data)
    assert not clash, f"command {line.name} returned reserved keys {sorted(clash)}"
    envelope["ok"] = True
    envelope.update(data)
    envelope.update(extra)
    if line.expect_error:
        envelope["unmet"] = unmet_expectation(envelope)
    return Outcome(line, envelope, True, None, line.expect_error)


def _after(session: Session, live: bool) -> JSONObject:
    """Acks the engine already has are settled after every live command (the scheduler's poll)."""
    if not live or session.cache is None:
        return {}
    done = session.settle()
    if not done:
        return {}
    completions: list[JSON] = [completion_json(c) for c in done]
    return {"completions": completions}

"""Run a recorded engine run as a REPL script: check it reproduces, shorten it, write it.

The engine's simulator records a failing run's cache operations
(:mod:`unicache.engine.oplog`) and translates them into script lines
(:mod:`unicache.engine.script`). Here the lines are executed in an in-process
REPL session: ticket and receipt ids are rewritten to the ones the REPL issues,
and the outcome is compared with the run's failure. When it reproduces, lines
are removed while it still fails the same way (delta debugging). The file's
header says whether it reproduces. :func:`write_script` is the simulator's
:data:`unicache.engine.simulate.ScriptWriter`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from unicache.engine.script import Line, new_command, translate
from unicache.engine.simulate import SimResult
from unicache.outputs import write_atomic
from unicache.repl.executor import execute
from unicache.repl.session import Session


@dataclass(slots=True)
class Replay:
    """What running a script in the REPL gave: the rendered text and the first failure."""

    text: list[str]
    failure: tuple[str, str] | None


def run_in_repl(header: str, lines: list[Line]) -> Replay:
    """Execute ``lines`` after ``header`` (the ``new`` line) in a fresh REPL session.

    Ids are rewritten as the REPL issues them. ``failure`` is (command, error
    type) of the first line that failed, or None if the whole script passed.
    """
    session = Session()
    tickets: dict[int, int] = {}
    receipts: dict[int, int] = {}
    text: list[str] = []
    failure: tuple[str, str] | None = None
    try:
        for line in [Line(header), *lines]:
            if line.uses_ticket is not None and line.uses_ticket not in tickets:
                continue
            if line.uses_receipt is not None and line.uses_receipt not in receipts:
                continue
            rendered = line.text.format(ticket=tickets.get(line.uses_ticket or -1, "?"),
                                        receipt=receipts.get(line.uses_receipt or -1, "?"))
            text.append(rendered)
            if rendered.startswith("#"):
                continue
            out = execute(session, rendered)
            if out is None:
                continue
            env = out.envelope
            if not out.ok:
                err = env.get("error")
                etype = str(err.get("type")) if isinstance(err, dict) else "error"
                failure = (str(env.get("cmd")), etype)
                break
            if line.creates_ticket is not None:
                got = env.get("ticket")
                if isinstance(got, int):
                    tickets[line.creates_ticket] = got
            if line.creates_receipt is not None:
                got = env.get("receipt")
                if isinstance(got, int):
                    receipts[line.creates_receipt] = got
    finally:
        try:
            session.close()
        except Exception:  # closing a session whose cache failed may fail too; the outcome is known
            pass
    return Replay(text, failure)


def shorten(header: str, lines: list[Line], target: tuple[str, str], *, budget: int = 150) -> list[Line]:
    """Remove lines (chunks, then single lines) while the REPL still fails with ``target``.

    The closing ``assert clean`` is always kept.
    """
    tail = lines[-1:] if lines and lines[-1].text == "assert clean" else []
    keep = lines[: len(lines) - len(tail)]
    runs = 0
    chunk = max(1, len(keep) // 2)
    while chunk >= 1 and keep and runs < budget:
        i = 0
        changed = False
        while i < len(keep) and runs < budget:
            cand = keep[:i] + keep[i + chunk:]
            runs += 1
            r = run_in_repl(header, cand + tail)
            if r.failure == target:
                keep = cand
                changed = True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return keep + tail


def write_script(result: SimResult, path: Path) -> Path:
    """Translate, check and shorten ``result``'s recorded run; write the script to ``path`` (in ``--crash-dir``).

    Written with :func:`unicache.outputs.write_atomic` (its errors name ``--crash-dir``).
    """
    log = result.oplog
    assert log is not None
    header = new_command(log.config)
    lines = translate(log.ops)
    replay = run_in_repl(header, lines)
    sc = result.scenario
    err = result.error
    notes = [f"# unicache simulate, seed {sc.seed}, shrunk scenario: {sc.describe()}",
             f"# the run failed at engine step {result.steps}: "
             f"{type(err).__name__ if err else 'no error'}: {str(err).splitlines()[0] if err else ''}",
             f"# reproduce the run: {sc.command()}"]
    if replay.failure is None:
        body = replay.text
        notes.append("# replayed in the REPL: it did NOT fail there (the run's failure needs the engine's data "
                     "path or timing); the script shows the cache operations up to the failure")
    else:
        short = shorten(header, lines, replay.failure)
        final = run_in_repl(header, short)
        body = final.text
        notes.append(f"# replayed in the REPL: fails at '{replay.failure[0]}' with {replay.failure[1]} "
                     f"({len(body)} of {len(lines) + 1} lines kept)")
    return write_atomic(path, ("\n".join([*notes, *body]) + "\n").encode("utf-8"), "--crash-dir")

"""Run the REPL in-process on a script (`--script FILE --json`) and parse what it printed."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from unicache.repl import main

SCRIPTS = Path(__file__).parent / "scripts"

# One well-formed line per command (for the mode audits): the error it gets, if any, is about state.
WELL_FORMED = {
    "insert": "insert 1..4", "match": "match 1..4", "lock": "lock #2", "unlock": "unlock last",
    "backup": "backup #2", "evict": "evict device 1", "reclaim": "reclaim", "load-back": "load-back #2",
    "abandon": "abandon T3", "time-out": "time-out T3", "reset": "reset", "refuse-alloc": "refuse-alloc full device", "ack": "ack T3", "withhold": "withhold T3", "step": "step",
    "run": "run until idle", "tickets": "tickets", "tree": "tree", "pins": "pins #2", "leases": "leases",
    "lease": "lease L7", "overdue": "overdue 0", "history": "history T3", "events": "events", "stats": "stats", "check": "check",
    "dot": "dot -", "dump": "dump {again}", "assert": "assert shared #2", "help": "help", "quit": "quit",
    "new": "new",
}


@dataclass
class Run:
    """Exit status, every JSON envelope printed (one per command), and the raw output."""

    status: int
    out: list[dict[str, Any]]
    text: str

    def of(self, cmd: str) -> list[dict[str, Any]]:
        return [e for e in self.out if e["cmd"] == cmd]

    def last(self, cmd: str) -> dict[str, Any]:
        found = self.of(cmd)
        assert found, f"no {cmd!r} in {[e['cmd'] for e in self.out]}"
        return found[-1]

    def failures(self) -> list[dict[str, Any]]:
        return [e for e in self.out if not e["ok"] and not e.get("expect_error")]


RunRepl = Callable[..., Run]


@pytest.fixture
def repl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> RunRepl:
    """`repl(script, *extra_args, json=True)` runs `unicache repl --script` in this process."""
    count = [0]

    def run(script: str, *args: str, json_mode: bool = True) -> Run:
        count[0] += 1
        path = tmp_path / f"script{count[0]}.repl"
        path.write_text(textwrap.dedent(script), encoding="utf-8")
        capsys.readouterr()
        status = main(["--script", str(path), *(["--json"] if json_mode else []), *args])
        text = capsys.readouterr().out
        out = [json.loads(line) for line in text.splitlines() if line.strip()] if json_mode else []
        return Run(status, out, text)

    return run

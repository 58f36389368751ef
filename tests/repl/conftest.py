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

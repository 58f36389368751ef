"""`unicache repl` as a process: output piped into a reader that stops early."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """`unicache repl --script s --json | head -1`: no BrokenPipeError traceback, a plain exit."""
    script = tmp_path / "long.repl"
    script.write_text("new\n" + "help\n" * 400, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "unicache.repl", "--script", str(script), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=Path(__file__).parents[2],
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    status = proc.wait(timeout=120)
    assert first.startswith(b'{"cmd": "new"')
    assert err == ""
    assert status == 1

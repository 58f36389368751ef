"""The interactive REPL in a real pseudo-terminal: prompt, tab completion, history recall, quit."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")


def test_interactive_session(tmp_path: Path) -> None:
    history = tmp_path / "history"
    env = {**os.environ, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "120",
           "LINES": "40", "NO_COLOR": "1"}
    child = pexpect.spawn(sys.executable, ["-m", "unicache.repl", "--history-file", str(history),
                                           "--components", "full,mamba"],
                          env=env, encoding="utf-8", timeout=60, dimensions=(40, 120))
    try:
        child.expect("'help' lists commands")
        child.expect("unicache>")
        child.sendline("insert 1..8")
        child.expect(r"inserted 8 tokens -> node #2")
        child.expect("unicache>")
        child.send("loc")
        child.send("\t")
        child.sendline(" t:1..8")
        child.expect(r"R\d+ locks #2 \(8 tokens")
        child.expect("unicache>")
        child.sendline("pins #2")
        child.expect(r"full: 1 lease\(s\)")
        child.expect("unicache>")
        child.send("\x1b[A")
        child.sendline("")
        child.expect(r"full: 1 lease\(s\)")
        child.expect("unicache>")
        child.sendline("frobnicate")
        child.expect(r"\[CommandSyntaxError\] unknown command 'frobnicate'")
        child.expect("unicache>")
        child.sendline("quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    recorded = history.read_text()
    assert "insert 1..8" in recorded and "lock t:1..8" in recorded and "pins #2" in recorded


def test_ctrl_c_stops_a_long_run_and_the_prompt_comes_back(tmp_path: Path) -> None:
    """`run until` on a long trace replay prints that it is still running (after 500 steps); Ctrl-C then
    stops it between two steps, one line says where, and the session carries on from there."""
    env = {**os.environ, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "200",
           "LINES": "40", "NO_COLOR": "1"}
    child = pexpect.spawn(sys.executable, ["-m", "unicache.repl", "--history-file", str(tmp_path / "history"),
                                           "--trace", "mooncake", "--requests", "5000"],
                          env=env, encoding="utf-8", timeout=120, dimensions=(40, 200))
    try:
        child.expect(r"unicache\(trace\)>")
        child.sendline("run until step 100000000 --max 100000000")
        child.expect(r"run: 500 steps so far, 'step 100000000' still false; Ctrl-C stops it after the current step")
        child.sendintr()
        child.expect(r"\[CommandInterrupted\] run: interrupted by SIGINT after (\d+) step\(s\) \(now at step (\d+)\)")
        steps, now = int(child.match.group(1)), int(child.match.group(2))
        assert 500 <= steps == now < 100_000_000
        child.expect(r"unicache\(trace\)>")
        child.sendline("step 1")
        child.expect(rf"step {now + 1}\b")
        child.expect(r"unicache\(trace\)>")
        child.sendline("quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0

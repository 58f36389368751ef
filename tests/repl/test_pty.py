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

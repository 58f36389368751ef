"""`unicache repl` as a process: output piped into a reader that stops early; a cache that cannot close."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from unicache.cache import UniCache
from unicache.errors import InvalidSlotError
from unicache.repl import main


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


@pytest.mark.allow_lease_leaks  # the cache that cannot close keeps its leases
def test_a_cache_that_cannot_close_exits_1_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script that leaves the cache too broken to close (what a reproduced corruption does) ends with
    exit status 1 and one line on stderr, not a traceback; every command still printed its line."""
    def broken(self: UniCache) -> int:
        raise InvalidSlotError("full.device", [0], "are free and cannot be quarantined")

    script = tmp_path / "s.repl"
    script.write_text("insert 1..4\nlock t:1..4\n", encoding="utf-8")
    monkeypatch.setattr(UniCache, "reset", broken)
    status = main(["--script", str(script), "--json"])
    captured = capsys.readouterr()
    assert status == 1
    assert [json.loads(line)["ok"] for line in captured.out.splitlines()] == [True, True]
    assert captured.err.strip().splitlines() == [
        "unicache repl: closing the cache failed: InvalidSlotError: pool full.device: slots [0] "
        "are free and cannot be quarantined"]

"""Script input is bounded and validated: regular files only, size and line caps, UTF-8 named by line."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from unicache.repl import main
from unicache.repl import script_input
from unicache.repl.script_input import ScriptInputError, read_script, stream_lines


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, object]]]:
    capsys.readouterr()
    status = main([*argv, "--json"])
    return status, [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def test_a_script_file_reads_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.repl"
    path.write_bytes(b"new\r\ninsert 1..4\n\nmatch 1..4")
    assert read_script(str(path)) == ["new", "insert 1..4", "", "match 1..4"]


def test_non_utf8_names_file_and_line_and_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.repl"
    path.write_bytes(b"insert 1..4\nmatch 1..4\nlock \xff#2\n")
    status, out = _run(capsys, "--script", str(path))
    assert status == 2
    assert len(out) == 1 and out[0]["cmd"] == "repl"  # the first two lines did not run
    error = out[0]["error"]
    assert isinstance(error, dict) and error["type"] == "ScriptInputError"
    assert error["message"] == f"script {path}:3: not UTF-8 (byte 0xff at column 6)"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_device_is_refused_unread(device: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    status, out = _run(capsys, "--script", device)
    assert status == 2
    error = out[0]["error"]
    assert isinstance(error, dict) and "is a device, not a regular file" in str(error["message"])


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ScriptInputError, match="is a FIFO, not a regular file"):
        read_script(str(fifo))  # no writer ever opens it: a blocking open would hang here


def test_a_directory_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ScriptInputError, match="is a directory"):
        read_script(str(tmp_path))
    with pytest.raises(ScriptInputError, match="No such file"):
        read_script(str(tmp_path / "missing.repl"))


def test_the_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script_input, "MAX_SCRIPT_BYTES", 64)
    path = tmp_path / "big.repl"
    path.write_text("stats\n" * 11)  # 66 bytes
    with pytest.raises(ScriptInputError, match=r"66 bytes is over the 64-byte cap") as err:
        read_script(str(path))
    assert err.value.line is None
    path.write_text("stats\n" * 10)
    assert read_script(str(path)) == ["stats"] * 10


def test_the_line_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script_input, "MAX_LINE_BYTES", 16)
    path = tmp_path / "long.repl"
    path.write_text("stats\n" + "insert 1,2,3,4,5,6\n")
    with pytest.raises(ScriptInputError, match=r":2: line longer than 16 bytes") as err:
        read_script(str(path))
    assert err.value.line == 2
    path.write_text("insert 1,2,3,4,5\n")  # exactly 16 bytes before the line end
    assert read_script(str(path)) == ["insert 1,2,3,4,5"]


def test_an_endless_stream_is_cut_at_the_line_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script_input, "MAX_LINE_BYTES", 4096)
    with open("/dev/zero", "rb") as zero:
        lines = stream_lines(zero)
        with pytest.raises(ScriptInputError, match=r"<stdin>:1: line longer than 4096 bytes"):
            next(lines)


def test_a_stream_checks_each_line_as_it_arrives() -> None:
    lines = stream_lines(io.BytesIO(b"new\r\ninsert 1..4\nmatch \xc3\x28\n"))
    assert next(lines) == "new"
    assert next(lines) == "insert 1..4"
    with pytest.raises(ScriptInputError, match=r"<stdin>:3: not UTF-8 \(byte 0xc3 at column 7\)"):
        next(lines)


def test_stdin_runs_up_to_a_bad_line_then_exits_2(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"insert 1..4\n\xfe\nmatch 1..4\n")))
    status, out = _run(capsys)
    assert status == 2
    assert [e["cmd"] for e in out] == ["insert", "repl"]
    error = out[1]["error"]
    assert isinstance(error, dict) and error["message"] == "script <stdin>:2: not UTF-8 (byte 0xfe at column 1)"

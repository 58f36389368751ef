"""Error envelopes, expected failures (`!`), exit statuses, and the read-only dump mode's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.repl.conftest import RunRepl
from unicache.repl import main


def test_error_envelopes_name_type_and_ids(repl: RunRepl) -> None:
    run = repl("""\
        new --transfer manual
        ! frobnicate
        ! insrt 1 2
        ! insert
        ! insert 1..x
        ! insert 5..1
        ! lock #77
        ! lock t:9,9
        ! lock @anchor
        ! evict device -3
        ! evict device many
        ! run until nothing-like-this
        ! assert counter no_such_counter == 1
        ! ack T1
        ! unlock R4
        ! load-back "t:1
        ! new --components full,quantum
        ! new --page-size 3 --device-tokens 10
        """)
    assert run.status == 0 and run.failures() == []
    errors = [e for e in run.out if not e["ok"]]
    assert all(e["expect_error"] for e in errors)
    assert all(set(e["error"]) <= {"type", "message", "ids"} for e in errors)
    types = [e["error"]["type"] for e in errors]
    assert types == [
        "CommandSyntaxError", "CommandSyntaxError", "CommandSyntaxError", "CommandSyntaxError",
        "CommandSyntaxError", "UnknownNameError", "UnknownNameError", "UnknownNameError", "CommandSyntaxError",
        "CommandSyntaxError", "CommandSyntaxError", "CommandSyntaxError", "UnknownTicketError",
        "UnknownNameError", "CommandSyntaxError", "CommandSyntaxError", "ConfigError",
    ]
    messages = [e["error"]["message"] for e in errors]
    assert "unknown command 'frobnicate'" in messages[0]
    assert "did you mean insert" in messages[1]
    assert "#77" in messages[5] and "no such node" in messages[5]
    assert "no edge for token 9" in messages[6]
    assert "ticket 1" in messages[12]
    assert errors[12]["error"]["ids"] == {"ticket_id": 1, "generation": 0}
    assert "device_tokens" in messages[16]


def test_node_path_must_end_at_a_node(repl: RunRepl) -> None:
    run = repl("""\
        new
        insert 1..8
        ! pins t:1..4
        ! pins t:1,2,3,9
        pins t:1..8
        pins root
        """)
    inside, diverges = [e for e in run.out if not e["ok"]]
    assert "ends inside node #2" in inside["error"]["message"]
    assert "diverges inside node #2" in diverges["error"]["message"]
    assert [e["node"] for e in run.of("pins") if e["ok"]] == [2, 1]


def test_script_stops_at_first_unexpected_failure(repl: RunRepl) -> None:
    run = repl("new\nlock #99\ninsert 1..4\n")
    assert run.status == 1
    assert [e["cmd"] for e in run.out] == ["new", "lock"]


def test_keep_going_runs_everything_but_still_fails(repl: RunRepl) -> None:
    run = repl("new\nlock #99\ninsert 1..4\n", "--keep-going")
    assert run.status == 1
    assert [(e["cmd"], e["ok"]) for e in run.out] == [("new", True), ("lock", False), ("insert", True)]


def test_expected_failure_that_succeeds_fails_the_script(repl: RunRepl) -> None:
    run = repl("new\n! insert 1..4\ninsert 5\n")
    assert run.status == 1
    assert [e["cmd"] for e in run.out] == ["new", "insert"] and run.out[1]["ok"] is True


def test_human_output_echoes_and_renders(repl: RunRepl) -> None:
    run = repl("new --components full,mamba\ninsert 1..4\ntree\n! lock #9\n", json_mode=False)
    assert run.status == 0
    assert "unicache> insert 1..4" in run.text
    assert "#2 [0:4) 1..4 full:D mamba:D" in run.text
    assert "error (expected) [UnknownNameError]" in run.text


def test_bad_command_line_and_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--no-such-option"]) == 2
    assert main(["--dump", str(tmp_path / "missing.json"), "--json", "--script", "-"]) == 2
    err = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert err["ok"] is False and err["error"]["type"] == "DumpReadError"
    assert main(["--script", str(tmp_path / "missing.repl"), "--json"]) == 2
    assert main(["--step", "3", "--json", "--script", "-"]) == 2


def test_stdin_is_a_script(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("insert 1..4\nmatch 1..4\n"))
    assert main(["--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["cmd"] for e in out] == ["insert", "match"] and out[1]["device_len"] == 4

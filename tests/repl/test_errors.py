"""Error envelopes, expected failures (`!`), exit statuses, and the read-only dump mode's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.repl.conftest import WELL_FORMED, RunRepl
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

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"insert 1..4\nmatch 1..4\n"), encoding="utf-8"))
    assert main(["--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["cmd"] for e in out] == ["insert", "match"] and out[1]["device_len"] == 4


HOST_ONLY = """\
    new --components full,mamba --transfer manual --device-tokens 32 --mamba-slots 8
    insert 1..8
    insert 1..8 9..12
    backup t:1..12
    ack all
    """


def test_lock_on_a_host_only_node_is_refused(repl: RunRepl) -> None:
    """No silent root lock with 0 tokens: the error names the node, says host-only, suggests load-back.
    Nothing is locked and no lease is taken. Below a device ancestor the lock covers that
    ancestor and the receipt says so."""
    run = repl(HOST_ONLY + """\
        evict device 4
        lock t:1..12
        unlock last
        evict device 8
        ! lock t:1..8
        ! lock t:1..12
        assert counter locks == 2
        assert counter live == 0
        load-back t:1..12
        ack all
        lock t:1..12
        unlock last
        assert clean
        """)
    assert run.status == 0, run.failures()
    partial, refused, again, whole = run.of("lock")
    assert partial["ok"] and partial["requested"] == 3 and partial["node"] == 2 and partial["length"] == 8
    assert partial["host_only_tail"] is True
    assert refused["error"]["type"] == again["error"]["type"] == "HostOnlyNodeError"
    assert refused["error"]["ids"]["node_id"] == 2 and again["error"]["ids"]["node_id"] == 3
    message = refused["error"]["message"]
    assert "node #2 is host-only" in message and "only cover the root" in message and "'load-back #2'" in message
    assert whole["ok"] and whole["length"] == 12 and whole["host_only_tail"] is False
    human = repl(HOST_ONLY + "evict device 4\nlock t:1..12\n", json_mode=False)
    assert "#3 itself is host-only: only its device prefix is locked" in " ".join(human.text.split())


def test_unlock_last_without_a_receipt(repl: RunRepl) -> None:
    run = repl("new\ninsert 1..4\n! unlock last\nlock t:1..4\nunlock last\n! unlock last\n")
    assert run.status == 0, run.failures()
    errors = [e["error"] for e in run.of("unlock") if not e["ok"]]
    assert [e["type"] for e in errors] == ["UnknownNameError", "UnknownNameError"]
    assert all("no lock receipt is held by this session" in e["message"] for e in errors)


def test_unknown_ids_error_the_same_in_lease_and_history(repl: RunRepl) -> None:
    run = repl("""\
        new
        insert 1..4
        lock t:1..4
        unlock last
        ! lease L999
        ! history L999
        ! history T999
        ! history #999
        ! history --ticket T999
        ! history --lease 999
        ! history t:1..4 --node #999
        history L1
        history #2
        """)
    assert run.status == 0, run.failures()
    errors = [e["error"] for e in run.out if not e["ok"]]
    assert [e["type"] for e in errors] == ["UnknownNameError"] * 7
    assert errors[0]["message"] == errors[1]["message"] == (
        "lease L999: not live, and the flight recorder has no event for it")
    assert errors[2]["message"].startswith("ticket T999: not live") and errors[4]["message"] == errors[2]["message"]
    assert errors[3]["message"].startswith("node #999: no such node") and errors[6]["message"] == errors[3]["message"]
    assert [len(e["events"]) > 0 for e in run.of("history") if e["ok"]] == [True, True]


def test_mode_errors_name_the_mode(repl: RunRepl) -> None:
    """A command the session cannot run in its mode is a mode error, never a syntax error."""
    run = repl("new\n! withhold T1\n! abandon T1\n")
    assert run.status == 0, run.failures()
    withhold, abandon = [e["error"] for e in run.out if not e["ok"]]
    assert withhold["type"] == "NeedsManualTransferError" and "'new --transfer manual'" in withhold["message"]
    assert abandon["type"] == "UnknownNameError"


def test_unexpected_success_explains_itself(repl: RunRepl) -> None:
    run = repl("new\n! insert 1..4\n")
    assert run.status == 1
    out = run.last("insert")
    assert out["ok"] is True and out["expect_error"] is True
    assert out["unmet"].startswith("expected 'insert' to fail (the line starts with '!'), but it succeeded: ")
    assert '"node": 2' in out["unmet"]
    human = repl("new\n! insert 1..4\n", json_mode=False)
    assert "unexpected success expected 'insert' to fail" in " ".join(human.text.split())


def test_failed_asserts_say_actual_and_expected(repl: RunRepl) -> None:
    run = repl("""\
        new --transfer manual
        insert 1..4
        lock t:1..4
        backup t:1..4
        withhold T1
        ! assert counter live == 0
        ! assert unpinned
        ! assert pinned t:1..4 mamba
        ! assert idle
        ! assert clean --not
        ! assert step 99
        ! assert stale-ack
        """, "--keep-going")
    assert run.status == 0, run.failures()
    errors = [e["error"] for e in run.of("assert")]
    assert all(e["type"] == "ConditionError" for e in errors)
    got = [(e["expected"], e["actual"]) for e in errors]
    assert got[0] == ("counter live == 0", "live is 2")
    assert got[1][1] == "#2 pinned by fullx2 (owners backup#1@2, lock#1)"
    assert got[2] == ("pinned t:1..4 mamba", "#2 pinned by fullx2 (owners backup#1@2, lock#1)")
    assert got[3][1] == "in flight: T1 (backup at #2, job withheld: 'ack T1' or 'withhold T1 --release')"
    assert got[4] == ("not clean", "0 violation(s), 0 data mismatch(es)")
    assert got[5] == ("step 99", "step is 4")
    assert got[6] == ("stale-ack", "stale_acks 0 -> 0, duplicate_acks 0 -> 0")
    assert "actual: live is 2" in errors[0]["message"]


def test_well_formed_commands_never_get_syntax_errors(repl: RunRepl, tmp_path: Path) -> None:
    """Audit, fresh cache with immediate transfers (nothing held): whatever fails, fails for a reason
    about the state (unknown name, mode), never as a syntax error."""
    lines = [WELL_FORMED[n] for n in sorted(WELL_FORMED) if n not in ("quit", "new")]
    run = repl("\n".join(lines).format(again=tmp_path / "again.json") + "\n", "--keep-going")
    errors = {e["cmd"]: e["error"]["type"] for e in run.out if not e["ok"]}
    assert errors == {
        "abandon": "UnknownNameError", "ack": "UnknownTicketError", "assert": "ConditionError",
        "backup": "UnknownNameError", "history": "UnknownNameError", "lease": "UnknownNameError",
        "withhold": "NeedsManualTransferError", "time-out": "UnknownTicketError",
    }

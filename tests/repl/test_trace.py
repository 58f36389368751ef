"""`--trace FILE --step N`: the replay engine drives the cache; the REPL steps it and inspects it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.repl.conftest import RunRepl
from unicache.dump import load_dump
from unicache.repl.session import Session


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    """Eight requests over three shared prefixes, long enough to evict and load back."""
    path = tmp_path / "trace.jsonl"
    lines = []
    for i in range(8):
        prefix = list(range(100 * (i % 3), 100 * (i % 3) + 24))
        lines.append(json.dumps({"id": i, "tokens": prefix + [1000 + 10 * i + k for k in range(8)],
                                 "output_tokens": 4}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_step_through_a_replay(repl: RunRepl, trace_file: Path, tmp_path: Path) -> None:
    dump = tmp_path / "mid.json"
    run = repl(f"""\
        run until counter inserts >= 3 --max 200
        tree --pinned
        leases
        dump {dump}
        ! insert 1..4
        ! withhold T1
        step 10000
        assert counter live == 0
        assert idle
        check
        assert clean
        """, "--trace", str(trace_file), "--step", "2", "--components", "full,mamba", "--device-tokens", "80",
        "--host-ratio", "4", "--seed", "3", "--faults", "delay,reorder")
    assert run.status == 0, run.failures()
    first = run.out[0]
    assert first["cmd"] == "step" and first["args"] == ["2"] and first["steps"] == 2
    assert run.last("run")["reached"]
    insert = run.last("insert")["error"]
    assert insert["type"] == "NeedsLiveCacheError" and "needs a fresh cache ('new')" in insert["message"]
    assert run.last("withhold")["error"]["type"] == "NeedsManualTransferError"
    final = run.of("step")[-1]
    assert final["idle"] and final["steps"] > 0
    check = run.last("check")
    assert check["clean"] and check["data"]["mismatches"] == [] and check["data"]["checked"] > 1
    mid = load_dump(dump)
    assert mid.seed == 3 and mid.step == mid.ledger.step and mid.step >= 2
    assert mid.config["mamba"] is True and mid.transfer is not None and mid.transfer.engine == "SimulatedEngine"
    live = {lease.id for lease in mid.leases.values()}
    assert {lid for n in mid.nodes.values() for r in n.components.values() for lid in r.pins} <= live


def test_bad_trace_is_a_startup_error(repl: RunRepl, tmp_path: Path) -> None:
    run = repl("tree\n", "--trace", str(tmp_path / "nope.jsonl"))
    assert run.status == 2 and run.out[0]["error"]["type"] == "FileNotFoundError"


def test_locks_and_tickets_taken_at_the_prompt_are_given_back_at_close(
    repl: RunRepl, trace_file: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The trace driver closes the cache it owns; the session's own receipt and ticket go first."""
    left: list[int] = []
    close = Session.close

    def closing(session: Session) -> None:
        cache = session.cache
        close(session)
        if cache is not None:
            left.append(cache.ledger.live_count)

    monkeypatch.setattr(Session, "close", closing)
    run = repl("""\
        step 10000
        lock #18
        load-back #13
        assert counter live == 4
        """, "--trace", str(trace_file), "--step", "2", "--components", "full,mamba", "--device-tokens", "80",
        "--host-ratio", "4", "--seed", "3")
    assert run.status == 0, run.failures()
    assert run.last("lock")["ok"] and run.last("load-back")["ok"]
    assert left and left[-1] == 0, f"leases still live after the session closed: {left}"

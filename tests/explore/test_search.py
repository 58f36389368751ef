"""The exhaustive search: bounded clean runs, determinism, and planted bugs found with a reproducing script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leases.pinset import PinSet
from unicache.explore.scope import Scope
from unicache.explore.search import explore
from unicache.repl import main as repl_main
from unicache.repl.manual_engine import ManualEngine
from unicache.transfer.base import Ack


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_every_state_to_depth_4_is_clean(policy: str) -> None:
    """The bound `make test` runs: every interleaving of four actions over Full+Mamba with faults."""
    result = explore(Scope(write_policy=policy), 4)
    assert result.violation is None, result.violation
    stats = result.stats
    assert stats.stopped == "depth" and stats.depth == 4
    assert stats.levels[0] == 1 and len(stats.levels) == 5
    assert stats.distinct == sum(stats.levels)
    assert stats.transitions > stats.distinct > 400


def test_enumeration_is_deterministic() -> None:
    scope = Scope(components=("full",))
    a = explore(scope, 3).stats
    b = explore(scope, 3).stats
    assert (a.transitions, a.distinct, a.levels) == (b.transitions, b.distinct, b.levels)


def test_bounds_stop_the_search() -> None:
    result = explore(Scope(components=("full",)), 6, max_states=20)
    assert result.violation is None
    assert result.stats.stopped == "max_states" and result.stats.distinct == 20
    ticks = iter(range(1000))
    timed = explore(Scope(components=("full",)), 6, seconds=5, clock=lambda: float(next(ticks)))
    assert timed.stats.stopped == "time" and timed.stats.transitions < 10


def _run_script(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]]]:
    capsys.readouterr()
    status = repl_main(["--script", str(path), "--json"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return status, out


@pytest.mark.allow_lease_leaks  # the planted bug leaves caches too broken to close: their leases stay live
def test_a_pin_set_that_reports_itself_empty_is_found_and_the_script_reproduces_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Planted bug: `PinSet.__bool__` always says 'empty' (an interpreted class, so the compiled build
    sees it too), so every 'is this node pinned' test in the cache is wrong; the pin sets recomputed
    from the live leases disagree with what the nodes hold."""
    monkeypatch.setattr(PinSet, "__bool__", lambda self: False)
    scope = Scope()
    result = explore(scope, 6)
    v = result.violation
    assert v is not None and v.kind == "sanity", v
    assert result.stats.stopped == "violation" and len(v.path) == 3
    assert "missing from its pin set" in v.detail
    script = tmp_path / "found.repl"
    script.write_text(v.script(scope, result.stats))
    status, out = _run_script(script, capsys)
    assert status == 1
    assert out[-1]["cmd"] == "assert" and out[-1]["ok"] is False
    assert out[-1]["error"]["type"] == "ConditionError"
    assert all(e["ok"] or e.get("expect_error") for e in out[:-1])
    monkeypatch.undo()
    status, out = _run_script(script, capsys)
    assert status == 0 and all(e["ok"] for e in out), "the correct cache runs the same script clean"


@pytest.mark.allow_lease_leaks
def test_copy_that_moves_nothing_is_found_by_the_byte_oracle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Planted bug: the transfer engine acks a copy as done without moving its rows."""
    take = ManualEngine.take

    def lazy(self: ManualEngine, ticket: int, *, ok: bool = True, detail: str = "", copy: bool = True) -> Ack:
        return take(self, ticket, ok=ok, detail=detail, copy=False)

    monkeypatch.setattr(ManualEngine, "take", lazy)
    scope = Scope(components=("full",), faults=False)
    result = explore(scope, 5)
    v = result.violation
    assert v is not None and v.kind == "data", v
    assert v.path == ("insert 1,2", "evict device 1")  # write-back eviction flushes the backup it starts
    assert v.detail.startswith("node #2 full host: 2 of 2 rows differ")
    script = tmp_path / "data.repl"
    script.write_text(v.script(scope, result.stats))
    status, out = _run_script(script, capsys)
    assert status == 1 and out[-1]["cmd"] == "assert" and out[-1]["ok"] is False

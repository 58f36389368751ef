"""Recorded runs become REPL scripts that the REPL replays operation for operation."""

from __future__ import annotations

import pytest

from unicache.engine.script import new_command, tokens_text, translate
from unicache.engine.simulate import SimulateOptions, run_scenario, scenario_for
from unicache.repl.script_check import run_in_repl

from .conftest import small_config


def test_token_lists_are_compact() -> None:
    assert tokens_text([5]) == "5"
    assert tokens_text([1, 2, 3, 4, 9, 10, 12]) == "1..4,9,10,12"


def test_new_command_names_every_size() -> None:
    line = new_command(small_config(swa_window=4, mamba=True, write_policy="write_through"))
    for part in ("--components full,swa,mamba", "--device-tokens 64", "--host-ratio 4.0", "--swa-window 4",
                 "--mamba-slots 8", "--write-policy write_through", "--transfer manual", "--dtype int32"):
        assert part in line


@pytest.mark.parametrize("seed", [1, 3])
def test_a_recorded_run_replays_cleanly_in_the_repl(seed: int) -> None:
    r = run_scenario(scenario_for(seed, SimulateOptions(steps=20)), record=True)
    assert r.ok and r.oplog is not None
    lines = translate(r.oplog.ops)
    texts = [line.text for line in lines]
    assert any(t.startswith("load-back t:") for t in texts)
    assert any(t.startswith("ack T") for t in texts) and any(t.startswith("lock ") for t in texts)
    assert texts[-1] == "assert clean"
    replay = run_in_repl(new_command(r.oplog.config), lines)
    assert replay.failure is None
    assert "{ticket}" not in "\n".join(replay.text) and "{receipt}" not in "\n".join(replay.text)

"""Copies that ack ok but carry wrong bytes (``--inject badcopy`` / ``badload``): the data oracle catches them."""

from __future__ import annotations

import pytest

from unicache.engine.errors import CorruptionError
from unicache.engine.simulate import SimulateOptions, run_scenario, scenario_for
from unicache.transfer.simulated import SimulatedEngine


@pytest.mark.parametrize(("inject", "seed", "caught_by"), [
    ("badcopy", 0, "tree check"), ("badcopy", 1, "tree check"), ("badcopy", 3, "tree check"),
    ("badcopy", 7, "tree check"),
    ("badload", 0, "request"), ("badload", 3, "request"), ("badload", 9, "request"),
])
def test_a_bad_copy_that_acks_ok_is_caught(inject: str, seed: int, caught_by: str) -> None:
    r = run_scenario(scenario_for(seed, SimulateOptions(steps=60, inject=inject)))
    assert r.sched is not None
    engine = r.sched.cache.engine
    assert isinstance(engine, SimulatedEngine) and engine.corrupted == 1
    assert isinstance(r.error, CorruptionError), r.scenario.command()
    assert caught_by in str(r.error)


def test_a_bad_copy_whose_bytes_are_never_published_is_harmless() -> None:
    """Seed 59's garbled load-back is freed unread: the end-of-run whole-tree oracle finds nothing to blame."""
    r = run_scenario(scenario_for(59, SimulateOptions(steps=60, inject="badload")))
    assert r.sched is not None
    engine = r.sched.cache.engine
    assert isinstance(engine, SimulatedEngine) and engine.corrupted == 1
    assert r.error is None

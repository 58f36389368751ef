"""`--faults allocfail`: allocators refuse inside cache operations during whole simulated runs."""

from __future__ import annotations

import pytest

from unicache.engine.simulate import SimulateOptions, SimulationError, run_scenario, scenario_for

ALLOCFAIL = ("delay", "reorder", "duplicate", "fail", "lose", "allocfail")


@pytest.mark.parametrize("seed", range(4))
def test_seeds_with_injected_allocation_failures_pass(seed: int) -> None:
    r = run_scenario(scenario_for(seed, SimulateOptions(steps=100, faults=ALLOCFAIL, full_check_every=4)))
    assert r.ok, f"{r.scenario.command()}: {r.error!r}"
    assert r.stats["leaked"] == 0
    assert isinstance(r.stats["injected_alloc_refusals"], int) and r.stats["injected_alloc_refusals"] > 0


def test_allocfail_is_a_cache_fault_that_threaded_runs_accept() -> None:
    opts = SimulateOptions(steps=60, faults=("allocfail",), transfer="threaded", full_check_every=4)
    r = run_scenario(scenario_for(1, opts))
    assert r.ok, f"{r.scenario.command()}: {r.error!r}"
    assert "--faults allocfail" in r.scenario.command()
    with pytest.raises(SimulationError, match="unknown fault kind.*allocfail"):
        SimulateOptions(faults=("allocfial",))

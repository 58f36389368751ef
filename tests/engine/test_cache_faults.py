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


@pytest.mark.parametrize("page_size", [16, 64])
def test_large_pages_and_async_write_back_pass(page_size: int) -> None:
    opts = SimulateOptions(steps=60, page_size=page_size, write_policy="write_back", sync_write_back=False,
                           faults=ALLOCFAIL, full_check_every=4)
    r = run_scenario(scenario_for(3, opts))
    assert r.ok, f"{r.scenario.command()}: {r.error!r}"
    assert r.stats["sync_write_back"] is False and "--write-back async" in r.scenario.command()


def test_seeds_vary_the_load_back_threshold_and_the_write_back_mode() -> None:
    from unicache.engine.simulate import build_world

    worlds = [build_world(scenario_for(seed, SimulateOptions(write_policy="write_back"))) for seed in range(24)]
    assert len({w.config.load_back_threshold // w.config.page_size for w in worlds}) >= 3
    assert {w.config.sync_write_back for w in worlds} == {True, False}

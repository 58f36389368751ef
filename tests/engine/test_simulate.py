"""Deterministic simulation: seeds pass with every check after every step; failures are caught,
dumped, reproducible and shrunk."""

from __future__ import annotations

from pathlib import Path

import pytest

from unicache.dump import load_dump
from unicache.engine.errors import CorruptionError, InvariantError
from unicache.engine.simulate import (
    COMPONENT_SETS,
    SimulateOptions,
    SimulationError,
    SimResult,
    run_scenario,
    scenario_for,
    shrink,
)
from unicache.engine.sweep import run_sweep
from unicache.repl.script_check import write_script


@pytest.fixture(scope="module")
def four_seeds() -> list[SimResult]:
    """Seeds 0..3: one run per component set (the default rotation), 50 steps each."""
    return [run_scenario(scenario_for(seed, SimulateOptions(steps=50))) for seed in range(4)]


@pytest.mark.parametrize("seed", range(4))
def test_seeds_pass_with_checks_after_every_step(four_seeds: list[SimResult], seed: int) -> None:
    result = four_seeds[seed]
    assert result.scenario.components == COMPONENT_SETS[seed % 4]
    assert result.ok, f"{result.scenario.command()}: {result.error}"
    assert result.stats["leaked"] == 0
    sched = result.sched
    assert sched is not None and sched.stats.steps > 10
    full, step = sched.stats.sanity_checks, sched.stats.step_checks
    assert full >= sched.stats.steps // 16 and full + step >= sched.stats.steps
    assert sched.stats.tree_checks + step >= sched.stats.steps
    assert sched.cache.ledger.live() == []


def test_chaos_and_faults_really_happen_across_seeds(four_seeds: list[SimResult]) -> None:
    totals = {"resets": 0, "failed_transfers": 0, "duplicate_acks": 0, "aborted": 0, "load_backs": 0,
              "nodes_pinned_by_two_components": 0}
    for r in four_seeds:
        for key in totals:
            value = r.stats[key]
            assert isinstance(value, int)
            totals[key] += value
    assert all(v > 0 for v in totals.values()), totals


def test_same_seed_same_run() -> None:
    sc = scenario_for(6, SimulateOptions(steps=25))
    a, b = run_scenario(sc), run_scenario(sc)
    assert a.stats == b.stats


def test_injected_corruption_is_caught_dumped_shrunk_and_scripted(tmp_path: Path) -> None:
    sweep = run_sweep([1], SimulateOptions(steps=40, inject="corrupt"), crash_dir=tmp_path, scripter=write_script)
    (r,) = sweep.failures
    assert r.error_type == "CorruptionError"
    assert r.dump is not None and Path(r.dump).exists()
    dump = load_dump(r.dump)
    assert dump.seed == 1 and dump.error is not None and dump.error.type == "CorruptionError"
    assert "reproduce" in dump.extra
    assert r.shrunk is not None and r.shrunk.steps <= r.steps
    assert r.shrunk.keep is not None and len(r.shrunk.keep) < 10
    again = run_scenario(r.shrunk)
    assert isinstance(again.error, CorruptionError)
    assert r.script is not None
    text = Path(r.script).read_text()
    assert text.startswith("# unicache simulate, seed 1")
    assert "\nnew --components" in text and text.rstrip().endswith("assert clean")
    assert r.shrunk.command() in text


@pytest.mark.expect_lease_leaks()
def test_injected_leak_is_an_invariant_failure(tmp_path: Path) -> None:
    r = run_scenario(scenario_for(0, SimulateOptions(steps=40, inject="leak")), dump_dir=tmp_path)
    assert isinstance(r.error, InvariantError) and "leak" in str(r.error)
    assert r.dump is not None
    dump = load_dump(str(r.dump))
    assert dump.error is not None and dump.error.type == "InvariantError"


def test_shrink_keeps_the_failure() -> None:
    r = run_scenario(scenario_for(0, SimulateOptions(steps=30, inject="corrupt")))
    assert isinstance(r.error, CorruptionError)
    small = shrink(r, budget=15)
    assert small.steps <= r.steps
    assert isinstance(run_scenario(small).error, CorruptionError)


def test_options_validation() -> None:
    with pytest.raises(SimulationError, match="components"):
        SimulateOptions(components=("swa",))
    with pytest.raises(SimulationError, match="chaos"):
        SimulateOptions(chaos=("meteor",))
    with pytest.raises(SimulationError, match="inject"):
        SimulateOptions(inject="nothing")
    with pytest.raises(ValueError, match="fault"):
        SimulateOptions(faults=("gremlins",))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 44))
def test_many_more_seeds(seed: int) -> None:
    result = run_scenario(scenario_for(seed, SimulateOptions(steps=300)))
    assert result.ok, f"{scenario_for(seed, SimulateOptions(steps=300)).command()}: {result.error}"


def test_parallel_sweep_is_the_serial_sweep(tmp_path: Path) -> None:
    opts = SimulateOptions(steps=20)
    serial = run_sweep(list(range(8, 12)), opts, crash_dir=tmp_path, jobs=1)
    parallel = run_sweep(list(range(8, 12)), opts, crash_dir=tmp_path, jobs=2)
    assert [o.scenario.seed for o in parallel.outcomes] == [8, 9, 10, 11]
    assert [o.stats for o in parallel.outcomes] == [o.stats for o in serial.outcomes]
    assert not parallel.failures and parallel.executed_steps == serial.executed_steps > 0
    summary = parallel.to_json()
    assert summary["seeds_finished"] == 4 and summary["jobs"] == 2
    assert isinstance(summary["seed_steps_per_minute"], float) and summary["seed_steps_per_minute"] > 0
    assert isinstance(summary["seed_steps_per_cpu_minute"], float) and summary["seed_steps_per_cpu_minute"] > 0
    assert summary["seeds_short_of_step_limit"] == 0 and summary["min_executed_steps"] == min(
        o.executed_steps for o in parallel.outcomes) >= 20
    assert all(o.cpu_seconds > 0 for o in parallel.outcomes)


def test_wall_time_budget_starts_no_more_seeds(tmp_path: Path) -> None:
    result = run_sweep(list(range(1000)), SimulateOptions(steps=5), crash_dir=tmp_path, jobs=1, minutes=1e-9)
    assert result.out_of_time and result.outcomes == [] and result.requested == 1000


def test_wall_time_budget_with_worker_processes(tmp_path: Path) -> None:
    """With ``jobs=2`` the budget stops new submissions; seeds already queued (at most 2 a worker) finish."""
    result = run_sweep(list(range(1000)), SimulateOptions(steps=30), crash_dir=tmp_path, jobs=2, minutes=0.01)
    assert result.out_of_time and result.stopped_by is None
    assert 1 <= len(result.outcomes) <= 4 + 2 * 2 and not result.failures
    assert all(o.reached_step_limit for o in result.outcomes)


@pytest.mark.parametrize("workload", ["multiturn", "mooncake"])
def test_workloads_last_until_the_step_limit(workload: str) -> None:
    steps = 200
    runs = [run_scenario(scenario_for(seed, SimulateOptions(steps=steps, workload=workload))) for seed in (0, 1)]
    for r in runs:
        assert r.ok, f"{r.scenario.command()}: {r.error}"
        assert r.scenario.workload == workload
        assert r.steps == steps, r.scenario.command()
        requests, admitted = r.stats["requests"], r.stats["admitted"]
        assert isinstance(requests, int) and isinstance(admitted, int) and admitted < requests


def test_mooncake_workload_is_a_mutated_real_window() -> None:
    from unicache.engine.workloads import build_workload

    a, b = build_workload("mooncake", 3, 2), build_workload("mooncake", 4, 2)
    again = build_workload("mooncake", 3, 2)
    assert [r.tokens for r in a.requests] == [r.tokens for r in again.requests]
    assert a.requests[0].tokens != b.requests[0].tokens
    assert a.unique_tokens() < a.input_tokens  # the real trace's prefix sharing survives
    assert "mooncake-window(seed=3" in a.name

"""The incremental step checks catch every injected fault the full per-step checks catch.

Each case runs once with the full sanity check and whole-tree oracle after
every step (``full_check_every=1``) and once with only the incremental
`StepCheck` between steps (``full_check_every=10_000``: the full checks run
only at the end). Both must fail, and the incremental run must fail before
any full check ran.

``corrupt`` (a stray write into a slot of a node no step touches) is found by
the rotating scrub, which reads every node's bytes within 8 steps; bytes
evicted before the scrub reaches them are never read by anyone (seed 2001:
the full check flags them, the step check and the final check do not).
"""

from __future__ import annotations

import pytest

from unicache.engine.simulate import SimulateOptions, run_scenario, scenario_for

CASES = [
    ("badcopy", 0), ("badcopy", 3), ("badcopy", 7), ("badload", 0), ("badload", 9),
    ("corrupt", 0), ("corrupt", 1), ("pinset", 0), ("pinset", 2001), ("allocator", 0), ("allocator", 5),
]


@pytest.mark.parametrize(("inject", "seed"), CASES)
def test_step_checks_catch_what_full_checks_catch(inject: str, seed: int) -> None:
    full = run_scenario(scenario_for(seed, SimulateOptions(steps=60, inject=inject, full_check_every=1)))
    assert full.error is not None, full.scenario.command()
    step = run_scenario(scenario_for(seed, SimulateOptions(steps=60, inject=inject, full_check_every=10_000)))
    assert step.error is not None, step.scenario.command()
    assert step.sched is not None
    stats = step.sched.stats
    assert (stats.sanity_checks, stats.tree_checks) == (0, 0), (step.error, step.scenario.command())
    assert step.steps <= full.steps + 16, (step.steps, full.steps)


@pytest.mark.parametrize("seed", [
    pytest.param(0, marks=pytest.mark.expect_lease_leaks()),  # a dropped lock receipt: its leases leak
    2001,  # a dropped load-back ticket: the cache still holds the ticket, its ack settles it
])
def test_step_checks_catch_a_dropped_lock_or_ticket(seed: int) -> None:
    full = run_scenario(scenario_for(seed, SimulateOptions(steps=40, inject="leak", full_check_every=1)))
    step = run_scenario(scenario_for(seed, SimulateOptions(steps=40, inject="leak", full_check_every=10_000)))
    assert full.error is not None and step.error is not None
    assert step.sched is not None and step.sched.stats.sanity_checks == 0
    # A dropped receipt leaks its leases; a dropped load-back ticket is still the cache's (its ack settles
    # it), so what is caught there is the request it strands: in no queue, neither finished nor aborted.
    message = str(step.error)
    assert "leak" in message or "dropped lock or load-back ticket" in message, message


def test_step_checks_pass_clean_seeds_and_count_their_runs() -> None:
    for seed in (0, 1, 2, 3):
        r = run_scenario(scenario_for(seed, SimulateOptions(steps=50, full_check_every=8)))
        assert r.error is None, r.scenario.command()
        assert r.sched is not None and r.sched.stats.step_checks > 0

"""Lost acks: the scheduler times tickets out, late acks land in quarantined rows, the oracle stays exact."""

from __future__ import annotations

import pytest

from unicache.engine.errors import CorruptionError
from unicache.engine.simulate import SimulateOptions, SimulationError, SimResult, run_scenario, scenario_for
from unicache.results import TicketStatus

LOSE = ("delay", "reorder", "duplicate", "fail", "lose")


@pytest.fixture(scope="module")
def lossy() -> list[SimResult]:
    """Seeds 0..3 (every component set) with lost acks, 120 steps each, full checks every 4 steps."""
    opts = SimulateOptions(steps=120, faults=LOSE, full_check_every=4)
    return [run_scenario(scenario_for(seed, opts)) for seed in range(4)]


@pytest.mark.parametrize("seed", range(4))
def test_seeds_with_lost_acks_pass_every_check(lossy: list[SimResult], seed: int) -> None:
    r = lossy[seed]
    assert r.ok, f"{r.scenario.command()}: {r.error!r}"
    assert r.stats["leaked"] == 0


def test_tickets_time_out_and_late_acks_land_after_it(lossy: list[SimResult]) -> None:
    """Across the seeds: tickets timed out, late acks arrived after (each ending a quarantine, the
    whole-tree oracle byte-exact at the end), and some acks never came (their rows still quarantined)."""
    total = {k: sum(int(str(r.stats[k])) for r in lossy) for k in ("timed_out", "late_acks", "lost_acks")}
    assert total["timed_out"] > 0 and total["late_acks"] > 0 and total["lost_acks"] > 0, total
    for r in lossy:
        assert r.sched is not None
        cache = r.sched.cache
        left = cache.quarantine()
        assert all(q.timed_out or q.generation < cache.epoch for q in left)
        assert cache.counters.late_acks <= cache.counters.timed_out_tickets
        assert cache.sanity_check().ok


def test_a_late_copy_into_reused_rows_would_be_caught() -> None:
    """The oracle is what makes the quarantine matter: a corrupted late copy is caught."""
    opts = SimulateOptions(steps=120, faults=LOSE, inject="badcopy")
    r = run_scenario(scenario_for(2, opts))
    assert isinstance(r.error, CorruptionError), r.error


def test_lose_needs_an_ack_timeout() -> None:
    with pytest.raises(SimulationError, match="--ack-timeout"):
        SimulateOptions(faults=LOSE, ack_timeout=0)
    with pytest.raises(SimulationError, match="--ack-timeout must be > 12"):
        SimulateOptions(faults=LOSE, ack_timeout=10)
    with pytest.raises(SimulationError, match="--ack-timeout"):
        SimulateOptions(ack_timeout=-1)
    assert "--ack-timeout 40" in scenario_for(1, SimulateOptions(faults=LOSE, ack_timeout=40)).command()


def test_timed_out_load_backs_fall_back_to_recompute(lossy: list[SimResult]) -> None:
    timed_out = sum(r.sched.stats.load_backs_timed_out for r in lossy if r.sched is not None)
    computed = sum(r.sched.stats.computed_tokens for r in lossy if r.sched is not None)
    assert timed_out > 0 and computed > 0
    assert TicketStatus.TIMED_OUT.value == "timed_out"


@pytest.mark.parametrize("seed", range(3))
def test_simulate_on_real_transfer_threads(seed: int) -> None:
    """`--transfer threaded`: copies on worker threads, acks through the inbox; the oracle stays exact."""
    opts = SimulateOptions(steps=80, faults=(), transfer="threaded", full_check_every=4)
    r = run_scenario(scenario_for(seed, opts))
    assert r.ok, f"{r.scenario.command()}: {r.error!r}"
    assert r.stats["leaked"] == 0 and (r.stats["load_backs"] or r.stats["backups"])
    assert "--transfer threaded" in r.scenario.command()


def test_threaded_simulate_refuses_transfer_faults() -> None:
    with pytest.raises(SimulationError, match="--faults none"):
        SimulateOptions(transfer="threaded", faults=("delay",))
    with pytest.raises(SimulationError, match="needs --transfer simulated"):
        SimulateOptions(transfer="threaded", faults=(), inject="badcopy")

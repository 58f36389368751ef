"""The liveness oracle: waiting on acks that will come is not stuck; acks that cannot come, or come too late, are."""

from __future__ import annotations

from array import array

import pytest

from unicache.cache import UniCache
from unicache.markers import Full
from unicache.engine.errors import SchedulerStuckError
from unicache.engine.liveness import check_not_stuck, liveness_bound
from unicache.engine.request import Request
from unicache.engine.simulate import SimulateOptions, run_scenario, scenario_for
from unicache.transfer.simulated import FaultSpec, SimulatedEngine
from unicache.traces.request import TraceRequest

from tests.engine.conftest import make_cache


def _request(n: int) -> Request:
    src = TraceRequest(rid=7, tokens=array("q", range(n)), output_tokens=1)
    return Request(src, tuple(src.tokens), None)


def _quarantined_cache() -> tuple[SimulatedEngine, UniCache]:
    """A write-through cache whose insert's backup was still copying when a reset quarantined it."""
    engine = SimulatedEngine(FaultSpec(delay=True, mean_delay=3.0, max_delay=5), seed=1)
    cache = make_cache(engine, device_tokens=16, write_policy="write_through")
    slots = cache.alloc_device(Full, 8)
    assert slots is not None
    cache.insert(tuple(range(8)), slots)
    assert cache.in_flight() == 1
    cache.reset()
    assert cache.in_flight() == 0 and cache.quarantine_records() and engine.pending
    return engine, cache


def test_quarantined_copies_that_will_ack_are_waited_for() -> None:
    engine, cache = _quarantined_cache()
    req = _request(40)
    check_not_stuck(cache, req, 1, loading=0, running=0, idle_steps=0)
    assert liveness_bound(cache) == 6
    with pytest.raises(SchedulerStuckError, match="past the liveness bound of 6"):
        check_not_stuck(cache, req, 9, loading=0, running=0, idle_steps=7)
    for _ in range(6):
        engine.tick()
    cache.poll()
    assert not cache.quarantine_records()
    with pytest.raises(SchedulerStuckError, match="device holds 16"):
        check_not_stuck(cache, req, 10, loading=0, running=0)


def test_quarantined_copies_whose_acks_cannot_come_are_stuck() -> None:
    engine, cache = _quarantined_cache()
    held = dict(engine._jobs)
    engine._jobs.clear()
    with pytest.raises(SchedulerStuckError, match=r"1 quarantined \(0 timed out, .* no ack can come"):
        check_not_stuck(cache, _request(40), 3, loading=0, running=0)
    engine._jobs.update(held)
    for _ in range(6):
        engine.tick()
    cache.poll()
    assert not cache.quarantine_records()


@pytest.mark.parametrize(("seed", "workload", "components", "steps"), [
    (102, "mooncake", ("full", "swa"), 100),
    (115, "multiturn", ("full", "swa", "mamba"), 190),
])
def test_seeds_once_stuck_under_write_through_quarantine_now_pass(
        seed: int, workload: str, components: tuple[str, ...], steps: int) -> None:
    sc = scenario_for(seed, SimulateOptions(steps=steps, workload=workload, components=components, page_size=1,
                                            write_policy="write_through"))
    result = run_scenario(sc)
    assert result.error is None, f"{sc.command()}: {result.error!r}"
    assert result.steps == steps


def test_requests_that_start_and_finish_within_a_step_are_progress() -> None:
    """Seed 3902 (async write-back): from step 106 two short requests start and finish every step, so
    nothing is running between steps and no ack comes; counting those steps as idle made the request at
    step 134, which waits on the backups its own eviction started, look stuck past the liveness bound."""
    sc = scenario_for(3902, SimulateOptions(steps=140))
    assert sc.sync_write_back is False and sc.write_policy == "write_back"
    result = run_scenario(sc)
    assert result.error is None, f"{sc.command()}: {result.error!r}"
    assert result.steps == 140

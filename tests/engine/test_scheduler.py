"""The scheduler loop: every request served, every byte checked, nothing left owned or pinned."""

from __future__ import annotations

import pytest

from unicache.cache import UniCache
from unicache.engine.config import EngineConfig, EngineConfigError
from unicache.engine.errors import InvariantError, SchedulerStuckError
from unicache.engine.replay import finish_checks
from unicache.engine.scheduler import Phase, Scheduler
from unicache.engine.simulate import SimulateOptions, run_scenario, scenario_for
from unicache.traces import Trace
from unicache.transfer.simulated import FaultSpec, SimulatedEngine

from .conftest import make_cache, model_for, tiny_trace


def run_all(cache: UniCache, trace: Trace, **engine: object) -> Scheduler:
    cfg = EngineConfig(**{"check_every": 1, "tree_check_every": 1, **engine})  # type: ignore[arg-type]
    sched = Scheduler(cache, trace.requests, model=model_for(cache.config), config=cfg)
    while not sched.done:
        sched.step()
    finish_checks(sched)
    return sched


@pytest.mark.parametrize("components", [{}, {"mamba": True}, {"swa_window": 3}, {"swa_window": 3, "mamba": True}])
def test_all_requests_served_and_accounted(components: dict[str, object]) -> None:
    cache = make_cache(SimulatedEngine(FaultSpec(delay=True, reorder=True), seed=1), device_tokens=96,
                       **components)
    trace = tiny_trace(2)
    sched = run_all(cache, trace, max_running=4, decode_per_step=1)
    st = sched.stats
    assert st.finished == len(trace) and st.aborted == 0
    assert st.device_hit_tokens + st.host_hit_tokens + st.computed_tokens == trace.input_tokens
    assert st.decoded_tokens == trace.output_tokens
    assert st.verified_tokens >= st.device_hit_tokens + st.host_hit_tokens
    assert cache.ledger.live() == [] and cache.ledger.leaked == 0
    assert cache.ledger.acquired == cache.ledger.released
    for comp in cache.config.components:
        assert cache.lent_slots(comp) == set()


def test_multi_turn_reuse_hits_the_cache() -> None:
    cache = make_cache(device_tokens=512)
    sched = run_all(cache, tiny_trace(0, output=0), max_running=1)
    assert sched.stats.device_hit_tokens > 0


def test_load_backs_happen_and_are_verified_under_pressure() -> None:
    cache = make_cache(SimulatedEngine(FaultSpec(delay=True), seed=0), device_tokens=48, host_ratio=8.0)
    sched = run_all(cache, tiny_trace(3, sessions=10), max_running=2)
    assert cache.counters.load_backs > 0 and sched.stats.load_backs_ok > 0
    assert sched.stats.host_hit_tokens > 0


def test_failed_load_backs_make_the_request_recompute() -> None:
    faults = FaultSpec(fail=True, fail_rate=1.0, fail_kinds=frozenset({"load_back"}))
    cache = make_cache(SimulatedEngine(faults, seed=0), device_tokens=48, host_ratio=8.0)
    sched = run_all(cache, tiny_trace(3, sessions=10), max_running=2)
    assert sched.stats.load_backs_failed > 0 and sched.stats.load_backs_ok == 0
    assert sched.stats.host_hit_tokens == 0
    assert sched.stats.finished == len(tiny_trace(3, sessions=10))


def test_many_requests_in_flight_decode_over_several_steps() -> None:
    cache = make_cache(device_tokens=256)
    trace = tiny_trace(1, output=6)
    sched = Scheduler(cache, trace.requests, model=model_for(cache.config),
                      config=EngineConfig(max_running=4, decode_per_step=2))
    sched.step()
    assert len(sched.running) == 4 and all(r.phase is Phase.RUNNING for r in sched.running)
    assert all(sched.holdings.receipt(r.rid) is not None for r in sched.running)
    while not sched.done:
        sched.step()
    finish_checks(sched)
    assert sched.step_no >= len(trace) // 4 * 3


@pytest.mark.expect_lease_leaks(1)
def test_ownership_check_catches_a_dropped_receipt() -> None:
    cache = make_cache(device_tokens=256)
    trace = tiny_trace(1, output=6)
    sched = Scheduler(cache, trace.requests, model=model_for(cache.config), config=EngineConfig(max_running=2))
    sched.step()
    req = sched.running[0]
    assert sched.holdings.receipt(req.rid) is not None
    sched.holdings.take_receipt(req.rid)  # lease: ignore[lease-discarded]  (the request forgets its lock on purpose)
    import gc

    gc.collect()
    with pytest.raises(InvariantError, match="leaked"):
        sched.check_ownership()
    for other in list(sched.in_flight_requests()):
        sched.abort(other)


def test_ownership_check_catches_slots_the_cache_lends_to_nobody() -> None:
    cache = make_cache(device_tokens=256)
    from unicache.markers import Full

    sched = Scheduler(cache, tiny_trace(1).requests, model=model_for(cache.config))
    stray = cache.alloc_device(Full, 2)
    assert stray is not None
    with pytest.raises(InvariantError, match="request-owned slots disagree"):
        sched.check_ownership()
    cache.free_device(Full, stray)
    sched.check_ownership()


def test_a_request_that_can_never_fit_stops_the_loop() -> None:
    cache = make_cache(device_tokens=8)
    sched = Scheduler(cache, tiny_trace(0).requests, model=model_for(cache.config))
    with pytest.raises(SchedulerStuckError, match="cannot start"):
        for _ in range(10):
            sched.step()


def test_abort_releases_everything() -> None:
    cache = make_cache(SimulatedEngine(FaultSpec(delay=True, mean_delay=5.0), seed=0), device_tokens=48,
                       host_ratio=8.0)
    sched = Scheduler(cache, tiny_trace(3, sessions=10).requests, model=model_for(cache.config),
                      config=EngineConfig(max_running=3, decode_per_step=1))
    aborted_loading = False
    for _ in range(200):
        if sched.done:
            break
        sched.step()
        for req in list(sched.loading) + list(sched.running):
            aborted_loading |= req.phase is Phase.LOADING
            sched.abort(req)
        sched.check_ownership()
    sched.drain()
    finish_checks(sched)
    assert sched.stats.aborted > 0 and aborted_loading
    assert cache.ledger.live() == []


@pytest.mark.parametrize("bad", [{"max_running": 0}, {"decode_per_step": 0}, {"cache_chunk": 0},
                                 {"check_every": -1}, {"vocab": 1}])
def test_engine_config_validation(bad: dict[str, object]) -> None:
    with pytest.raises(EngineConfigError):
        EngineConfig(**bad)  # type: ignore[arg-type]


def test_bookkeeping_only_mode_does_the_same_cache_work_without_data() -> None:
    trace = tiny_trace(4, output=0)
    with_data = run_all(make_cache(device_tokens=64, mamba=True), trace, max_running=1)
    without = run_all(make_cache(device_tokens=64, mamba=True), trace, max_running=1, data=False)
    assert with_data.stats.verified_tokens > 0 and without.stats.verified_tokens == 0
    for key in ("device_hit_tokens", "host_hit_tokens", "computed_tokens", "finished"):
        assert getattr(with_data.stats, key) == getattr(without.stats, key)
    assert with_data.cache.counters.as_dict() == without.cache.counters.as_dict()


def test_branch_points_get_mamba_states_so_diverging_requests_resume() -> None:
    trace = tiny_trace(5, output=0, sessions=8)
    on = run_all(make_cache(device_tokens=512, mamba=True, mamba_device_slots=64), trace, max_running=1)
    off = run_all(make_cache(device_tokens=512, mamba=True, mamba_device_slots=64), trace, max_running=1,
                  branch_states=False)
    assert on.stats.branch_states > 0 and off.stats.branch_states == 0
    assert on.stats.device_hit_tokens > off.stats.device_hit_tokens


def test_a_load_back_refused_for_room_is_followed_by_a_fresh_match() -> None:
    """Sweep seed 9250: request 71's load-back found no device room, and the eviction it ran to make
    some took the SWA pages of node 41, the one-token device prefix the earlier match had reported;
    starting from that stale match locked a prefix whose window was gone (a CorruptionError from the
    data oracle at step 44). The scheduler now matches again after a refused load-back."""
    sc = scenario_for(9250, SimulateOptions(steps=60, workload="multiturn", components=("full", "swa"),
                                            page_size=1, write_policy="write_through"))
    result = run_scenario(sc)
    assert result.error is None, f"{sc.command()}: {result.error!r}"
    assert result.steps == 60

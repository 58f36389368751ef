"""Replays: healthy under every fault kind and component set, overlapping pins occur, deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unicache.engine.replay import DEFAULT_TOKENS_PER_BLOCK, ReplayOptionError, ReplayOptions, run_replay
from unicache.engine.report import REQUIRED_KEYS, healthy, without_timings
from unicache.engine.timeline import Timeline
from tests.unicache.support import residency

COMPONENT_SETS = [("full",), ("full", "mamba"), ("full", "swa"), ("full", "swa", "mamba")]
FAULTS = ["delay", "reorder", "duplicate", "fail"]


def num(report: dict[str, object], key: str) -> int:
    value = report[key]
    assert isinstance(value, int), (key, value)
    return value


def small(tmp_path: Path, **changes: object) -> ReplayOptions:
    base: dict[str, object] = {"requests": 150, "tokens_per_block": 8, "crash_dir": tmp_path / "crash"}
    base.update(changes)
    return ReplayOptions(**base)  # type: ignore[arg-type]


def test_smoke_replay_default_configuration(tmp_path: Path) -> None:
    timelines: list[Timeline] = []
    report = run_replay(small(tmp_path), timeline_out=timelines)
    assert set(REQUIRED_KEYS) <= set(report)
    assert healthy(report), report["error"]
    assert report["requests"] == 150 and report["live_leases_at_end"] == 0
    assert report["configuration"] == "Full+Mamba ps=1 write_back"
    assert report["transfer"] == "SimulatedEngine"
    assert report["leases_acquired"] == report["leases_released"]
    assert num(report, "max_leases_on_one_node") >= 2
    assert num(report, "nodes_pinned_by_two_components") >= 1
    assert num(report, "input_tokens") == num(report, "device_hit_tokens") + num(report, "host_hit_tokens") + \
        num(report, "computed_tokens")
    assert num(report, "verified_tokens") >= num(report, "device_hit_tokens") + num(report, "host_hit_tokens")
    json.dumps(report)
    (timeline,) = timelines
    assert len(timeline.steps) == report["steps"]
    assert set(timeline.live_leases) == {"full", "mamba"}


@pytest.mark.parametrize("components", COMPONENT_SETS, ids="+".join)
@pytest.mark.parametrize("fault", FAULTS)
def test_invariants_hold_under_every_fault_kind(tmp_path: Path, components: tuple[str, ...], fault: str) -> None:
    report = run_replay(small(tmp_path, components=components, faults=(fault,)))
    assert healthy(report), report["error"]
    assert report["corruptions"] == 0 and report["errors"] == 0 and report["leaked_leases"] == 0
    assert num(report, "max_leases_on_one_node") >= 2
    if len(components) > 1:
        assert num(report, "nodes_pinned_by_two_components") >= 1
    if fault == "duplicate":
        assert num(report, "stale_acks") > 0
    if fault == "fail":
        assert num(report, "failed_transfers") > 0


def test_full_swa_sees_two_load_backs_of_different_components_on_one_node(tmp_path: Path) -> None:
    report = run_replay(small(tmp_path, components=("full", "swa")))
    assert healthy(report)
    assert num(report, "load_back_cross_component_nodes") >= 1


@pytest.mark.parametrize("components", [("full", "mamba"), ("full", "swa", "mamba")], ids="+".join)
def test_same_trace_and_seed_give_identical_reports(tmp_path: Path, components: tuple[str, ...]) -> None:
    opts = small(tmp_path, requests=80, components=components, faults=("delay", "reorder", "duplicate", "fail"),
                 seed=3)
    first = run_replay(opts)
    second = run_replay(opts)
    assert without_timings(first) == without_timings(second)
    assert first["wall_seconds"] != 0


def test_other_seed_other_schedule(tmp_path: Path) -> None:
    a = run_replay(small(tmp_path, requests=80, seed=1, faults=("delay", "reorder", "fail")))
    b = run_replay(small(tmp_path, requests=80, seed=2, faults=("delay", "reorder", "fail")))
    assert without_timings(a) != without_timings(b)


def test_page_size_and_write_through_and_harness_workload(tmp_path: Path) -> None:
    report = run_replay(small(tmp_path, trace="multiturn:0", requests=40, page_size=4, write_policy="write_through",
                              components=("full", "swa", "mamba"), faults=("delay", "reorder")))
    assert healthy(report), report["error"]
    assert num(report, "device_hit_tokens") > 0


def test_immediate_engine_matches_the_simulated_work_without_faults(tmp_path: Path) -> None:
    report = run_replay(small(tmp_path, transfer="immediate", faults=()))
    assert healthy(report) and report["transfer"] == "ImmediateEngine"


def test_a_corruption_stops_the_run_with_a_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unicache.dump import load_dump
    from unicache.engine import scheduler as sched_mod
    from unicache.results import MatchResult
    from unicache.transfer.base import Tier

    original = sched_mod.Scheduler._start

    def sabotage(self: sched_mod.Scheduler, req: sched_mod.Request, m: MatchResult) -> bool:
        node = m.device_node
        pages = residency(node).full_device
        if m.device_len and pages:
            from unicache.markers import Full

            page = pages[0]
            self.cache.write_slots(Full, [page], self.cache.read_slots(Full, [page], Tier.DEVICE) + 1)
        return original(self, req, m)

    monkeypatch.setattr(sched_mod.Scheduler, "_start", sabotage)
    report = run_replay(small(tmp_path, requests=60))
    assert report["corruptions"] == 1 and report["errors"] == 0 and not healthy(report)
    assert "CorruptionError" in str(report["error"])
    dump = load_dump(str(report["crash_dump"]))
    assert dump.error is not None and dump.step == report["steps"]
    assert "reproduce" in dump.extra and "requests_in_flight" in dump.extra


def test_invalid_options_are_rejected() -> None:
    with pytest.raises(ReplayOptionError, match="full"):
        ReplayOptions(components=("mamba",))
    with pytest.raises(ReplayOptionError, match="unknown component"):
        ReplayOptions(components=("full", "gqa"))
    with pytest.raises(ValueError, match="unknown fault kind"):
        ReplayOptions(faults=("explode",))
    with pytest.raises(ValueError, match="transfer"):
        ReplayOptions(transfer="rdma")


def assert_production_crash_shape_handled(report: dict[str, object]) -> None:
    """Healthy, and two in-flight load-backs pinned one node for Full and Mamba, beyond block 0."""
    assert healthy(report), report["error"]
    assert report["corruptions"] == 0 and report["errors"] == 0 and report["leaked_leases"] == 0
    assert report["live_leases_at_end"] == 0 and report["leases_acquired"] == report["leases_released"]
    assert num(report, "max_leases_on_one_node") >= 2
    assert num(report, "load_back_cross_component_nodes") >= 1
    assert num(report, "nodes_pinned_by_two_components") >= 2


def test_make_run_defaults_at_a_small_scale_show_the_production_crash_shape(tmp_path: Path) -> None:
    """Every `make run` default but the scale: the default decode speed keeps the step structure."""
    opts = ReplayOptions(tokens_per_block=8, crash_dir=tmp_path)
    assert opts.decode_tokens_per_step() == 2
    report = run_replay(opts)
    assert report["requests"] == 1000 and report["configuration"] == "Full+Mamba ps=1 write_back"
    config = report["cache_config"]
    assert isinstance(config, dict) and config["host_ratio"] == 12.0 and config["write_policy"] == "write_back"
    assert report["transfer"] == "SimulatedEngine"
    assert_production_crash_shape_handled(report)


def test_decode_speed_follows_the_block_scale_unless_given() -> None:
    assert ReplayOptions().decode_tokens_per_step() == DEFAULT_TOKENS_PER_BLOCK // 4
    assert ReplayOptions(tokens_per_block=2).decode_tokens_per_step() == 1
    assert ReplayOptions(tokens_per_block=64, decode_per_step=3).decode_tokens_per_step() == 3
    assert ReplayOptions(trace="multiturn:0", tokens_per_block=64).decode_tokens_per_step() == 4
    assert "--decode-per-step 128" in ReplayOptions().command()
    with pytest.raises(ReplayOptionError, match="decode-per-step"):
        ReplayOptions(decode_per_step=0)
    with pytest.raises(ValueError, match="mean_delay"):
        ReplayOptions(mean_delay=0.5)


@pytest.mark.slow
def test_make_run_default_replay_is_healthy_and_shows_overlapping_pins(tmp_path: Path) -> None:
    report = run_replay(ReplayOptions(crash_dir=tmp_path))
    assert report["requests"] == 1000
    assert_production_crash_shape_handled(report)

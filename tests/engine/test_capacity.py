"""The least device capacity a request needs: exact at the boundary (N serves every request, N-1 never can)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from unicache.config import CacheConfig
from unicache.engine.capacity import CapacityError, RequestNeed, check_capacity, request_needs
from unicache.engine.replay import ReplayOptions, cache_config, load_replay_trace, run_replay
from unicache.engine.report import healthy

PROMPT = list(range(1, 11))
RECORDS: list[dict[str, object]] = [
    {"id": 10, "tokens": PROMPT, "output_tokens": 0},
    {"id": 11, "tokens": [*PROMPT, 11, 12, 13, 14], "output_tokens": 3},
    {"id": 12, "tokens": [50, 51, 52, 53, 54, 55], "output_tokens": 2},
]
"""Request 11 (14 + 3 tokens) is the largest and starts with request 10's prompt, whose end state it resumes from."""


def _options(tmp_path: Path, records: list[dict[str, object]] = RECORDS, **changes: object) -> ReplayOptions:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    base: dict[str, object] = {"trace": str(path), "components": ("full", "mamba"), "cache_chunk": 4,
                               "crash_dir": tmp_path / "crash"}
    base.update(changes)
    return ReplayOptions(**base)  # type: ignore[arg-type]


def _num(value: object) -> int:
    assert isinstance(value, int), value
    return value


def _config(page_size: int, device_tokens: int, *, mamba_slots: int = 2) -> CacheConfig:
    return CacheConfig(device_tokens=device_tokens, page_size=page_size, mamba=True, mamba_device_slots=mamba_slots)


@pytest.mark.parametrize(("page_size", "pages"), [(1, [10, 17, 8]), (4, [3, 5, 2])])
def test_a_request_needs_its_prompt_and_output_in_whole_pages(tmp_path: Path, page_size: int,
                                                              pages: list[int]) -> None:
    opts = _options(tmp_path, page_size=page_size)
    needs = request_needs(_config(page_size, 64), load_replay_trace(opts))
    assert needs == [RequestNeed(10, 10, 0, pages[0], 1), RequestNeed(11, 14, 3, pages[1], 2),
                     RequestNeed(12, 6, 2, pages[2], 1)]
    without_mamba = CacheConfig(device_tokens=64, page_size=page_size)
    assert [n.mamba_slots for n in request_needs(without_mamba, load_replay_trace(opts))] == [0, 0, 0]


@pytest.mark.parametrize(("page_size", "need"), [(1, 17), (4, 20)])
def test_the_boundary_capacity_serves_the_trace_and_one_page_less_is_refused(
        tmp_path: Path, page_size: int, need: int) -> None:
    opts = _options(tmp_path, page_size=page_size, faults=("delay", "reorder", "duplicate"))
    trace = load_replay_trace(opts)
    at = replace(opts, device_tokens=need)
    assert cache_config(at, trace).device_tokens == need
    report = run_replay(at, trace=trace)
    assert healthy(report), report["error"]
    assert report["requests"] == 3 and _num(report["device_hit_tokens"]) > 0
    with pytest.raises(CapacityError) as info:
        cache_config(replace(opts, device_tokens=need - page_size), trace)
    unit = "" if page_size == 1 else f", rounded up to pages of {page_size}"
    assert str(info.value) == (
        f"request 11 of trace.jsonl needs {need} device tokens (14 prompt + 3 output{unit}) but the cache has "
        f"{need - page_size}; it could never start: raise --device-tokens to at least {need}")
    assert not (tmp_path / "crash").exists()


def test_one_page_less_really_never_serves_the_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle for the refusal: with the check off, the scheduler gets stuck on exactly that request."""
    opts = _options(tmp_path, device_tokens=16)
    monkeypatch.setattr("unicache.engine.replay.check_capacity", lambda config, trace: None)
    report = run_replay(opts)
    assert str(report["error"]).startswith("SchedulerStuckError: step ")
    assert "request 11 cannot start" in str(report["error"])


def test_a_mamba_hit_needs_a_second_slot_and_one_slot_is_refused(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    opts = _options(tmp_path, mamba_slots=2)
    report = run_replay(opts)
    assert healthy(report), report["error"]
    assert report["requests"] == 3 and _num(report["device_hit_tokens"]) >= len(PROMPT)
    one = replace(opts, mamba_slots=1)
    with pytest.raises(CapacityError, match=r"^request 11 of trace.jsonl needs 2 Mamba slots .* but the cache has "
                                            r"1; .* raise --mamba-slots to at least 2$"):
        cache_config(one, load_replay_trace(one))
    monkeypatch.setattr("unicache.engine.replay.check_capacity", lambda config, trace: None)
    stuck = run_replay(replace(one, crash_dir=tmp_path / "stuck"))
    assert "SchedulerStuckError" in str(stuck["error"]) and "request 11 cannot start" in str(stuck["error"])


def test_one_mamba_slot_is_accepted_when_no_request_shares_a_first_page(tmp_path: Path) -> None:
    records: list[dict[str, object]] = [{"id": i, "tokens": [100 * (i + 1) + k for k in range(6)],
                                         "output_tokens": 2} for i in range(4)]
    opts = _options(tmp_path, records, mamba_slots=1, page_size=2)
    assert [n.mamba_slots for n in request_needs(cache_config(opts, load_replay_trace(opts)),
                                                 load_replay_trace(opts))] == [1, 1, 1, 1]
    report = run_replay(opts)
    assert healthy(report), report["error"]
    assert report["requests"] == 4


def test_a_prompt_shorter_than_a_page_counts_as_a_prefix_of_later_ones(tmp_path: Path) -> None:
    """Its path continues with decoded tokens, so a later prompt that starts with it may reach a cached state."""
    records: list[dict[str, object]] = [{"id": 0, "tokens": [1, 2], "output_tokens": 4},
                                        {"id": 1, "tokens": [1, 2, 3, 4, 5], "output_tokens": 0},
                                        {"id": 2, "tokens": [1, 3, 4, 5], "output_tokens": 0}]
    trace = load_replay_trace(_options(tmp_path, records))
    assert [n.mamba_slots for n in request_needs(_config(4, 64), trace)] == [1, 2, 1]


def test_the_default_configurations_pass(tmp_path: Path) -> None:
    for opts in (ReplayOptions(requests=100, tokens_per_block=16), ReplayOptions(trace="multiturn:1", requests=50),
                 ReplayOptions(requests=100, tokens_per_block=16, components=("full", "swa", "mamba"),
                               page_size=16)):
        trace = load_replay_trace(opts)
        config = cache_config(opts, trace)
        check_capacity(config, trace)
        assert max(n.full_pages for n in request_needs(config, trace)) * config.page_size < config.device_tokens

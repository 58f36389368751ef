"""Explicit-token JSONL: the harness --dump-workload format, round trips, format detection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unicache.traces import (
    MultiTurnSpec,
    TraceFormatError,
    TraceSpec,
    dump_token_jsonl,
    generate_multiturn,
    load_token_jsonl,
    load_trace,
)


def test_reads_the_harness_dump_format(tmp_path: Path) -> None:
    path = tmp_path / "wl.jsonl"
    path.write_text(
        json.dumps({"id": 0, "session": 3, "turn": 0, "tokens": [5, 6, 7]}) + "\n"
        + json.dumps({"id": 1, "session": 3, "turn": 1, "tokens": [5, 6, 7, 8]}) + "\n")
    trace = load_token_jsonl(path)
    assert [r.tokens.tolist() for r in trace.requests] == [[5, 6, 7], [5, 6, 7, 8]]
    assert [(r.rid, r.session, r.turn, r.output_tokens) for r in trace.requests] == [(0, 3, 0, 0), (1, 3, 1, 0)]
    assert trace.unique_tokens() == 4


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    trace = generate_multiturn(2, MultiTurnSpec(sessions=4, turns=2, system_len=(6, 9), turn_len=(2, 5),
                                                output_tokens=2))
    path = tmp_path / f"t{suffix}"
    dump_token_jsonl(trace.requests, path)
    again = load_token_jsonl(path)
    assert [(r.rid, r.tokens, r.output_tokens, r.session, r.turn) for r in again.requests] == \
        [(r.rid, r.tokens, r.output_tokens, r.session, r.turn) for r in trace.requests]


def test_load_trace_detects_the_format(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text(json.dumps({"tokens": [1, 2, 3]}) + "\n")
    mooncake = tmp_path / "mc.jsonl"
    mooncake.write_text(json.dumps({"timestamp": 0, "input_length": 512, "hash_ids": [9]}) + "\n")
    assert load_trace(TraceSpec(str(tokens))).requests[0].tokens.tolist() == [1, 2, 3]
    assert len(load_trace(TraceSpec(str(mooncake), tokens_per_block=8)).requests[0].tokens) == 8
    assert len(load_trace(TraceSpec("multiturn:0", count=5))) == 5
    with pytest.raises(FileNotFoundError):
        load_trace(TraceSpec(str(tmp_path / "missing.jsonl")))
    with pytest.raises(TraceFormatError, match="seed"):
        load_trace(TraceSpec("multiturn:x"))


@pytest.mark.parametrize(("record", "message"), [
    ({"tokens": []}, "non-empty"),
    ({"tokens": [1, -2]}, "non-negative"),
    ({"tokens": [1], "output_tokens": -1}, "negative output_tokens"),
    ({"tokens": [1], "session": "a"}, "session must be an int"),
    ({"hello": 1}, "non-empty list"),
])
def test_malformed_records(tmp_path: Path, record: dict[str, object], message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(TraceFormatError, match=message) as info:
        load_token_jsonl(path)
    assert f"{path}:1" in str(info.value)

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


def _write(path: Path, records: list[dict[str, object]]) -> None:
    import gzip

    text = "".join(json.dumps(r) + "\n" for r in records)
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as out:
            out.write(text)
    else:
        path.write_text(text)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_two_records_with_one_id_are_refused_naming_the_id_and_both_lines(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"dup{suffix}"
    _write(path, [{"id": 7, "tokens": [1, 2]}, {"id": 8, "tokens": [3]}, {"id": 7, "tokens": [1, 2, 3]}])
    with pytest.raises(TraceFormatError) as info:
        load_token_jsonl(path)
    assert str(info.value).startswith(f"{path}:3: request id 7 is already the id of line 1;")
    with pytest.raises(TraceFormatError, match=r":3: request id 7 is already the id of line 1"):
        load_trace(TraceSpec(str(path)))


def test_an_id_equal_to_a_record_position_collides_with_the_record_that_has_none(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"id": 1, "tokens": [1]}) + "\n\n" + json.dumps({"tokens": [2]}) + "\n")
    with pytest.raises(TraceFormatError) as info:
        load_token_jsonl(path)
    assert str(info.value) == (f"{path}:3: request id 1 (its position: the record has no id) is already the id of "
                               f"line 1; give every record of the trace its own id")


def test_duplicates_outside_the_loaded_window_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    _write(path, [{"id": 0, "tokens": [1]}, {"id": 1, "tokens": [2]}, {"id": 0, "tokens": [3]}])
    assert [r.rid for r in load_token_jsonl(path, start=1).requests] == [1, 0]
    assert [r.rid for r in load_token_jsonl(path, count=2).requests] == [0, 1]
    with pytest.raises(TraceFormatError, match="request id 0 is already the id of line 1"):
        load_token_jsonl(path)


def test_a_trace_built_in_code_with_one_id_twice_is_refused() -> None:
    from array import array

    from unicache.traces import Trace, TraceRequest

    reqs = [TraceRequest(rid, array("q", [1, 2])) for rid in (4, 5, 4)]
    with pytest.raises(TraceFormatError, match=r"trace t: requests 0 and 2 \(0-based\) both have id 4"):
        Trace("t", reqs).check_unique_ids()
    Trace("t", reqs[:2]).check_unique_ids()

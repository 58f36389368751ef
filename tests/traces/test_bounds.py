"""Bad trace input is refused with a TraceFormatError naming file and line: never a traceback, never clamped."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unicache.traces import TraceFormatError, TraceSpec, load_trace
from unicache.traces import bounds, lines
from unicache.traces.loader import EmptyWindowError

GOOD_MOONCAKE = '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}'
GOOD_TOKENS = '{"tokens": [1, 2, 3]}'


def _load(path: Path) -> None:
    load_trace(TraceSpec(str(path), tokens_per_block=8))


@pytest.mark.parametrize(("line", "message"), [
    ('{"timestamp": 0, "input_length": 600, "hash_ids": [1, 100000000000000000000000000]}', "outside 0.."),
    ('{"timestamp": 0, "input_length": 600, "hash_ids": [1, -2]}', "outside 0.."),
    ('{"timestamp": 0, "input_length": 600, "output_length": 100000000000, "hash_ids": [1, 2]}',
     "exceeds the bound"),
    ('{"timestamp": 0, "input_length": true, "hash_ids": [1]}', "must be ints"),
    ('{"timestamp": 0, "input_length": 5, "output_length": false, "hash_ids": [1]}', "must be ints"),
    ('{"timestamp": 0, "input_length": 5, "hash_ids": [true]}', "list of ints"),
    ('{"timestamp": NaN, "input_length": 5, "hash_ids": [1]}', "finite"),
    ('{"timestamp": Infinity, "input_length": 5, "hash_ids": [1]}', "finite"),
    ('{"timestamp": -1, "input_length": 5, "hash_ids": [1]}', ">= 0"),
    ('{"timestamp": "soon", "input_length": 5, "hash_ids": [1]}', "number"),
    ('{"timestamp": 0, "input_length": -5, "hash_ids": [1]}', "does not fit"),
    ('{"timestamp": 0, "input_length": 5, "output_length": -1, "hash_ids": [1]}', "negative output_length"),
])
def test_mooncake_values_out_of_range(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(GOOD_MOONCAKE + "\n" + line + "\n")
    with pytest.raises(TraceFormatError, match=message) as info:
        _load(path)
    assert f"{path}:2" in str(info.value)


@pytest.mark.parametrize(("line", "message"), [
    ('{"tokens": [1, 100000000000000000000000000]}', "64 bits|non-negative"),
    ('{"tokens": [1, true]}', "non-negative ints"),
    ('{"tokens": [1], "output_tokens": true}', "must be an int"),
    ('{"tokens": [1], "output_tokens": 100000000000}', "exceeds the bound"),
    ('{"tokens": [1], "timestamp": NaN}', "finite"),
    ('{"tokens": [1], "id": 100000000000000000000000000}', "64 bits"),
])
def test_token_values_out_of_range(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(GOOD_TOKENS + "\n" + line + "\n")
    with pytest.raises(TraceFormatError, match=message) as info:
        _load(path)
    assert f"{path}:2" in str(info.value)


def test_non_utf8_bytes(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(GOOD_TOKENS.encode() + b'\n{"tokens": [1], "x": "\xff\xfe"}\n')
    with pytest.raises(TraceFormatError, match=f"{path}:2: not UTF-8"):
        _load(path)


def test_deep_json_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(GOOD_TOKENS + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(TraceFormatError, match="nested deeper than"):
        _load(path)


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    raw = json.dumps({"tokens": [1], "note": "[" * 1000}).encode()
    assert not bounds.json_depth_exceeds(raw)


@pytest.mark.parametrize("cut", [10, 40, -8])
def test_truncated_gzip(tmp_path: Path, cut: int) -> None:
    data = gzip.compress(("\n".join([GOOD_TOKENS] * 200) + "\n").encode())
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(data[:cut])
    with pytest.raises(TraceFormatError, match="gzip|empty trace"):
        _load(path)


def test_not_gzip_at_all(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    path.write_text(GOOD_TOKENS + "\n")
    with pytest.raises(TraceFormatError, match="gzip"):
        _load(path)


def test_long_line_is_refused_without_reading_it_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 64)
    path = tmp_path / "long.jsonl"
    path.write_text(GOOD_TOKENS + "\n" + json.dumps({"tokens": list(range(1, 100))}) + "\n")
    with pytest.raises(TraceFormatError, match=f"{path}:2: line longer than 64 bytes"):
        _load(path)


def test_window_token_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_TRACE_TOKENS", 10)
    path = tmp_path / "t.jsonl"
    path.write_text((GOOD_TOKENS + "\n") * 5)
    with pytest.raises(TraceFormatError, match="more than 10 tokens"):
        load_trace(TraceSpec(str(path)))


def test_empty_window_says_how_many_requests_there_are(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text((GOOD_TOKENS + "\n") * 3)
    with pytest.raises(EmptyWindowError, match="has 3 request"):
        load_trace(TraceSpec(str(path), start=3))
    with pytest.raises(EmptyWindowError, match="has 12031 request"):
        load_trace(TraceSpec("mooncake", start=99_999, tokens_per_block=4))


def test_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="cannot be read"):
        lines.open_trace(tmp_path)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["tokens", "hash_ids", "input_length", "output_length", "timestamp", "id",
                         "output_tokens", "session", "turn"]), inner, max_size=5),
    max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.sampled_from([GOOD_MOONCAKE, GOOD_TOKENS]), record=_json, junk=st.binary(max_size=40))
def test_fuzzed_trace_lines_load_or_are_refused(tmp_path: Path, first: str, record: object, junk: bytes) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(first.encode() + b"\n" + json.dumps(record).encode() + b"\n" + junk + b"\n")
    try:
        trace = _load_trace(path)
    except TraceFormatError:
        return
    assert len(trace) >= 1


def _load_trace(path: Path) -> list[object]:
    return list(load_trace(TraceSpec(str(path), tokens_per_block=8)).requests)


@pytest.mark.parametrize("source", ["/dev/zero", "/"])
def test_a_trace_must_be_a_regular_file(source: str) -> None:
    with pytest.raises(TraceFormatError, match="not a regular file"):
        load_trace(TraceSpec(source))

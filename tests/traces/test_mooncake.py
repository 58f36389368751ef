"""The Mooncake loader: block ids -> deterministic tokens, proportional lengths, windows, bundled data."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from unicache.traces import TraceFormatError, load_mooncake
from unicache.traces.mooncake import block_tokens, open_bundled_mooncake


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_equal_block_ids_give_equal_tokens_and_shared_prefixes(tmp_path: Path) -> None:
    trace = load_mooncake(_write(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [0, 1]},
        {"timestamp": 5, "input_length": 1536, "output_length": 0, "hash_ids": [0, 1, 2]},
        {"timestamp": 9, "input_length": 1024, "output_length": 0, "hash_ids": [0, 3]},
    ]), tokens_per_block=8)
    a, b, c = (r.tokens.tolist() for r in trace.requests)
    assert len(a) == 16 and len(b) == 24 and len(c) == 16
    assert b[:16] == a
    assert c[:8] == a[:8] and c[8:] != a[8:]
    assert all(1 <= t < 2**31 for t in a + b + c)


def test_lengths_scale_proportionally_with_partial_last_block(tmp_path: Path) -> None:
    trace = load_mooncake(_write(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 513, "output_length": 300, "hash_ids": [7, 8]},
        {"timestamp": 0, "input_length": 1000, "output_length": 512, "hash_ids": [7, 9]},
    ]), tokens_per_block=16)
    first, second = trace.requests
    assert len(first.tokens) == 17  # ceil(513 * 16 / 512): one whole block and one token
    assert first.output_tokens == 10  # ceil(300 * 16 / 512)
    assert len(second.tokens) == 32 and second.output_tokens == 16
    assert first.tokens.tolist() == block_tokens([7, 8], 16)[:17].tolist()


def test_window_keeps_arrival_order_and_request_ids(tmp_path: Path) -> None:
    records = [{"timestamp": 10 * i, "input_length": 512, "output_length": 1, "hash_ids": [i]} for i in range(10)]
    trace = load_mooncake(_write(tmp_path / "t.jsonl", records), tokens_per_block=4, start=3, count=4)
    assert [r.rid for r in trace.requests] == [3, 4, 5, 6]
    assert [r.arrival_ms for r in trace.requests] == [30.0, 40.0, 50.0, 60.0]


def test_gzipped_file_loads_the_same(tmp_path: Path) -> None:
    records = [{"timestamp": 0, "input_length": 700, "output_length": 3, "hash_ids": [4, 5]}]
    plain = load_mooncake(_write(tmp_path / "t.jsonl", records), tokens_per_block=8)
    gz = tmp_path / "t.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.write(json.dumps(records[0]) + "\n")
    assert load_mooncake(gz, tokens_per_block=8).requests[0].tokens == plain.requests[0].tokens


def test_bundled_trace_is_package_data() -> None:
    with open_bundled_mooncake() as stream:
        first = json.loads(stream.readline())
    assert first["hash_ids"][:3] == [0, 1, 2] and first["input_length"] == 6758
    trace = load_mooncake(None, tokens_per_block=16, count=50)
    assert len(trace) == 50 and trace.source.startswith("package:")
    assert len(trace.requests[0].tokens) == -(-6758 * 16 // 512)


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "invalid JSON"),
    ('{"timestamp": 0, "input_length": 10}', "missing field 'hash_ids'"),
    ('{"timestamp": 0, "input_length": 2000, "hash_ids": [1]}', "does not fit 1 blocks"),
    ('{"timestamp": 0, "input_length": 10, "hash_ids": []}', "non-empty list"),
    ('[1, 2]', "expected a JSON object"),
])
def test_malformed_records_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5, "hash_ids": [1]}\n' + line + "\n")
    with pytest.raises(TraceFormatError, match=message) as info:
        load_mooncake(path, tokens_per_block=4)
    assert f"{path}:2" in str(info.value)


@pytest.mark.parametrize("tpb", [0, 513])
def test_tokens_per_block_out_of_range(tmp_path: Path, tpb: int) -> None:
    with pytest.raises(ValueError, match="tokens_per_block"):
        load_mooncake(_write(tmp_path / "t.jsonl", [{"input_length": 5, "hash_ids": [1]}]), tokens_per_block=tpb)


def test_request_ids_are_file_positions_so_equal_records_never_share_one(tmp_path: Path) -> None:
    """Mooncake records carry no id: a request's id is its position in the file (the window keeps it)."""
    record = {"timestamp": 0, "input_length": 512, "output_length": 4, "hash_ids": [9]}
    path = _write(tmp_path / "same.jsonl", [record] * 4)
    assert [r.rid for r in load_mooncake(path, tokens_per_block=4).requests] == [0, 1, 2, 3]
    assert [r.rid for r in load_mooncake(path, tokens_per_block=4, start=2).requests] == [2, 3]
    load_mooncake(path, tokens_per_block=4).check_unique_ids()

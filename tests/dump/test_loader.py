"""Reading dump files: only strict JSON is accepted, and every failure names the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dump.conftest import Busy
from unicache.dump import DumpFormatError, DumpReadError, DumpVersionError, load_dump, parse_dump, write_crash_dump


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(DumpReadError, match="missing.json: cannot read"):
        load_dump(missing)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(DumpReadError, match="not UTF-8"):
        load_dump(binary)
    for name, text, why in (("trunc", '{"format": ', "not valid JSON"),
                            ("nan", '{"a": NaN}', "non-standard JSON constant NaN"),
                            ("dup", '{"a": 1, "a": 2}', "duplicate key 'a'"),
                            ("two", "{} {}", "not valid JSON")):
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        with pytest.raises(DumpReadError, match=why) as info:
            load_dump(path)
        assert info.value.path == str(path)


def test_errors_carry_the_file_name(busy: Busy, tmp_path: Path) -> None:
    path = write_crash_dump(busy.cache, tmp_path / "d.json", announce=False)
    doc = json.loads(path.read_text())
    doc["version"] = 3
    path.write_text(json.dumps(doc))
    with pytest.raises(DumpVersionError, match=f"^{path}: crash dump version 3 is not supported"):
        load_dump(path)
    doc["version"] = 1
    doc["leases"][0]["nodes"] = ["x"]
    with pytest.raises(DumpFormatError) as info:
        parse_dump(json.dumps(doc), source="memory")
    assert info.value.path == "memory" and info.value.where == "leases[0].nodes[0]"
    assert str(info.value).startswith("memory: leases[0].nodes[0]: expected an int")


def test_a_pickle_is_not_a_dump(tmp_path: Path) -> None:
    import pickle

    path = tmp_path / "evil.json"
    path.write_bytes(pickle.dumps({"format": "unicache-crash-dump"}))
    with pytest.raises(DumpReadError):
        load_dump(path)

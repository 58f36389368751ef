"""Every class of bad dump is refused with one typed error (or, when well-formed, reported by `check`)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.dump.conftest import Busy
from unicache.dump import CrashDump, DumpFormatError, DumpReadError, capture, load_dump, parse_dump
from unicache.dump.loader import read_bounded
from unicache.repl.executor import execute
from unicache.repl.session import Session

Doc = dict[str, Any]


@pytest.fixture
def doc(busy: Busy) -> Doc:
    d: Doc = capture(busy.cache, seed=1, step=2)
    return d


def _refused(doc: Doc, where: str, message: str) -> None:
    with pytest.raises(DumpFormatError) as info:
        parse_dump(json.dumps(doc), source="mem")
    assert info.value.where == where, str(info.value)
    assert message in str(info.value)


def test_a_stream_that_is_not_json_fails_on_its_first_bytes(tmp_path: Path) -> None:
    if os.path.exists("/dev/zero"):
        with pytest.raises(DumpReadError, match="not a JSON object"):
            load_dump("/dev/zero")
    zeros = tmp_path / "zeros.json"
    zeros.write_bytes(b"\0" * 4096)
    with pytest.raises(DumpReadError, match="not a JSON object"):
        load_dump(zeros)


def test_reads_stop_at_the_size_bound(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text("{" + " " * 5000 + "}")
    with pytest.raises(DumpReadError, match="larger than the 1000-byte limit"):
        read_bounded(big, limit=1000)
    assert read_bounded(big, limit=6000).startswith(b"{")


def test_deep_json_is_refused_cleanly(doc: Doc) -> None:
    with pytest.raises(DumpReadError, match="nested too deeply"):
        parse_dump('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", source="deep")
    nested: Any = []
    for _ in range(40):
        nested = [nested]
    doc["extra"] = {"x": nested}
    _refused(doc, "extra", "nested deeper than 32 levels")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("page_size", 0, "expected an int >= 1, got 0"),
    ("page_size", True, "expected an int, got a bool"),
    ("device_tokens", -32, ">= 1"),
    ("history", -1, ">= 0"),
    ("mamba", 1, "expected a bool"),
    ("write_policy", "sometimes", "expected one of write_back, write_through"),
    ("host_ratio", 0, "finite number > 0"),
    ("token_bytes", 2, "expected 4 or 8 (bytes a token id takes in the keys), got 2"),
    ("token_bytes", True, "expected 4 or 8"),
    ("token_bytes", "4", "expected 4 or 8"),
])
def test_configuration_ranges(doc: Doc, key: str, value: object, message: str) -> None:
    doc["config"][key] = value
    _refused(doc, f"config.{key}", message)


def test_key_ids_must_fit_the_recorded_width(doc: Doc) -> None:
    assert doc["config"]["token_bytes"] == 4 and CrashDump.from_json(copy.deepcopy(doc)).token_bytes == 4
    node = next(i for i, n in enumerate(doc["tree"]["nodes"]) if n["key"])
    wide = copy.deepcopy(doc)
    wide["tree"]["nodes"][node]["key"][-1] = 2**31
    _refused(wide, f"tree.nodes[{node}].key[{len(doc['tree']['nodes'][node]['key']) - 1}]",
             "token id 2147483648 is outside 0..2147483647, the range of the dump's 4-byte keys")
    wide["config"]["token_bytes"] = 8
    assert CrashDump.from_json(copy.deepcopy(wide)).token_bytes == 8
    negative = copy.deepcopy(wide)
    negative["tree"]["nodes"][node]["key"][0] = -1
    _refused(negative, f"tree.nodes[{node}].key[0]", "token id -1 is outside 0..9223372036854775807")


def test_a_dump_from_before_the_key_width_reads_as_8_bytes(doc: Doc) -> None:
    """Dumps written before `token_bytes` existed had 8-byte keys: they load, and hold ids up to 2**63-1."""
    del doc["config"]["token_bytes"]
    node = next(i for i, n in enumerate(doc["tree"]["nodes"]) if n["key"])
    doc["tree"]["nodes"][node]["key"][-1] = 2**40
    dump = CrashDump.from_json(copy.deepcopy(doc))
    assert dump.token_bytes == 8 and "token_bytes" not in dump.config
    assert dump.to_json() == doc


def test_non_finite_numbers_are_refused(doc: Doc) -> None:
    text = json.dumps(doc)
    with pytest.raises(DumpReadError, match="NaN"):
        parse_dump(text.replace('"host_ratio": null', '"host_ratio": NaN'))
    with pytest.raises(DumpFormatError, match="config: non-finite number inf"):
        parse_dump(text.replace('"host_ratio": null', '"host_ratio": 1e999'))
    doc["extra"]["x"] = 1.0
    with pytest.raises(DumpFormatError, match="extra: non-finite number inf"):
        parse_dump(json.dumps(doc).replace('"x": 1.0', '"x": 1e999'))


def _set(doc: Doc, path: str, value: object) -> None:
    *head, last = path.split("/")
    target: Any = doc
    for part in head:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value


@pytest.mark.parametrize(("path", "value", "where", "message"), [
    ("pools/full.device/capacity", -1, "pools.full.device.capacity", "expected an int >= 0, got -1"),
    ("pools/full.device/free", True, "pools.full.device.free", "expected an int, got a bool"),
    ("pools/full.device/free", 0, "pools.full.device", "is not the capacity"),
    ("tree/nodes/1/hits", -3, "tree.nodes[1].hits", ">= 0"),
    ("tree/nodes/1/id", 10**26, "tree.nodes[1].id", "out of range"),
    ("leases/0/id", -7, "leases[0].id", ">= 0"),
    ("tree/nodes/1/components/full/device", [0, 99_999], "tree.nodes[1].components.full.device",
     "slot 99999 is outside pool full.device"),
    ("tickets/0/copies/0/dst", [4], "tickets[0].copies[0].dst", "copies 2 rows into 1"),
    ("tickets/0/copies/0/src_tier", "disk", "tickets[0].copies[0].src_tier", "unknown tier 'disk'"),
    ("quarantine/0/slots/full.host", [10**6], "quarantine[0].slots.full.host", "outside pool full.host"),
    ("ledger/epoch", 1.0, "ledger.epoch", "expected an int, got a float"),
    ("transfer/pending", "2", "transfer.pending", "expected an int, got a string"),
])
def test_ranges_and_types(doc: Doc, path: str, value: object, where: str, message: str) -> None:
    _set(doc, path, value)
    _refused(doc, where, message)


def test_check_revalidates_a_dump(doc: Doc, tmp_path: Path) -> None:
    dump = CrashDump.from_json(copy.deepcopy(doc))
    assert dump.revalidate() == []
    from dataclasses import replace

    broken = replace(dump, config={**dump.config, "page_size": 0})
    (finding,) = broken.revalidate()
    assert finding.kind == "dump-format" and "config.page_size" in finding.detail
    nodes = doc["tree"]["nodes"]
    first = next(n for n in nodes if n["components"]["full"]["device"])
    other = next(n for n in nodes if n is not first and n["parent"] is not None)
    other["components"]["full"]["device"] = first["components"]["full"]["device"][:len(other["key"])]
    other_len = len(other["key"])
    assert len(other["components"]["full"]["device"]) == other_len
    path = tmp_path / "shared.json"
    path.write_text(json.dumps(doc))
    loaded = load_dump(path)
    kinds = {v.kind for v in loaded.revalidate()}
    assert kinds == {"shared-slot"}
    session = Session()
    session.open_dump(str(path))
    out = execute(session, "check")
    assert out is not None and out.ok
    assert out.envelope["clean"] is False
    violations = out.envelope["violations"]
    assert isinstance(violations, list) and any(isinstance(v, dict) and v["kind"] == "shared-slot"
                                                for v in violations)
    session.close()


def test_the_repl_refuses_a_bad_dump_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from unicache.repl import main

    zeros = tmp_path / "zeros"
    zeros.write_bytes(b"\0" * 64)
    assert main(["--dump", str(zeros)]) == 2
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if line.strip()]
    assert len(lines) == 1 and "DumpReadError" in lines[0] and "Traceback" not in out.err


@pytest.mark.parametrize(("section", "where", "message"), [
    ("tickets", "tickets[1].id", "duplicate ticket id 2"),
    ("quarantine", "quarantine[1].ticket", "ticket 1 is quarantined twice"),
    ("jobs", "transfer.jobs[2].ticket", "two held jobs for ticket 2"),
])
def test_repeated_ids_are_refused(doc: Doc, section: str, where: str, message: str) -> None:
    """A ticket, a quarantine entry and a held job are each named by their ticket id: one of each per id."""
    records = doc["transfer"]["jobs"] if section == "jobs" else doc[section]
    records.append(copy.deepcopy(records[-1]))
    _refused(doc, where, message)


def test_every_component_a_record_names_is_enabled(doc: Doc) -> None:
    """Strip Mamba from the components, then from one kind of record after another: each is refused in turn."""
    doc["components"] = ["full", "swa"]
    for node in doc["tree"]["nodes"]:
        del node["components"]["mamba"]
    mamba = [x["id"] for x in doc["leases"] if x["component"] == "mamba"]
    assert mamba == [9, 12]
    _refused(doc, "pools.mamba.device", "pool mamba.device: component 'mamba' is not enabled")
    doc["pools"] = {k: v for k, v in doc["pools"].items() if not k.startswith("mamba.")}
    _refused(doc, "leases[2].component", "lease 9: component 'mamba' is not enabled")
    doc["leases"] = [x for x in doc["leases"] if x["id"] not in mamba]
    doc["ledger"]["counters"]["live"] -= 2
    _refused(doc, "tickets[0].leases.mamba", "ticket 2: component 'mamba' is not enabled")
    del doc["tickets"][0]["leases"]["mamba"]
    _refused(doc, "tickets[0].copies[2].component", "ticket 2: component 'mamba' is not enabled")
    doc["tickets"][0]["copies"].pop()
    _refused(doc, "quarantine[0].slots.mamba.device", "pool mamba.device: component 'mamba' is not enabled")
    doc["quarantine"][0]["slots"] = {k: v for k, v in doc["quarantine"][0]["slots"].items()
                                     if not k.startswith("mamba.")}
    _refused(doc, "events[2].component", "event 3: component 'mamba' is not enabled")
    doc["events"] = [e for e in doc["events"] if e["component"] != "mamba"]
    CrashDump.from_json(doc)


def test_pool_names_are_component_and_tier(doc: Doc) -> None:
    doc["pools"]["full.disk"] = {"capacity": 1, "free": 1, "used": 0, "quarantined": 0}
    _refused(doc, "pools.full.disk", "unknown pool 'full.disk' (expected COMPONENT.TIER, e.g. full.device)")
    del doc["pools"]["full.disk"]
    doc["quarantine"][0]["slots"]["host"] = [0]
    _refused(doc, "quarantine[0].slots.host", "unknown pool 'host'")


def test_without_the_component_list_any_component_may_be_named(doc: Doc) -> None:
    """The writer's fallback when it cannot read the components: `full` alone, nodes with Full only, and a
    capture error; pools and leases of the other components still load."""
    doc["components"] = ["full"]
    for node in doc["tree"]["nodes"]:
        node["components"] = {"full": node["components"]["full"]}
    for lease in doc["leases"]:
        lease["nodes"] = lease["nodes"] if lease["component"] == "full" else []
    _refused(doc, "pools.swa.device", "pool swa.device: component 'swa' is not enabled")
    doc["capture_errors"] = [{"section": "components", "type": "RuntimeError", "message": "config corrupt"}]
    dump = CrashDump.from_json(doc)
    assert sorted(dump.pools) == ["full.device", "full.host", "mamba.device", "mamba.host", "swa.device", "swa.host"]


def test_the_repl_refuses_a_repeated_ticket_in_one_line(doc: Doc, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from unicache.repl import main

    doc["tickets"].append(copy.deepcopy(doc["tickets"][0]))
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(doc))
    assert main(["--dump", str(path)]) == 2
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in out.err, lines
    assert "DumpFormatError" in lines[0] and f"{path}: tickets[1].id: duplicate ticket id 2" in lines[0]

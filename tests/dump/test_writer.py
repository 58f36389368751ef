"""Capturing and writing dumps: every section matches the live cache, and a broken cache still dumps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dump.conftest import Busy
from unicache.dump import CrashDump, capture, dump_on_error, load_dump, write_crash_dump
from unicache.errors import UnknownTicketError
from unicache.transfer.base import Ack
from tests.unicache.support import residency


def test_capture_counts_refusal_reasons_in_extra(busy: Busy) -> None:
    """Version 1 has no field for reason counts: they go under `extra.reasons`, the caller's keys after."""
    cache = busy.cache
    before = cache.reasons.counts().get("load_back:root", 0)
    refused = cache.load_back(cache.root)
    assert refused is None
    dump = CrashDump.from_json(capture(cache, extra={"engine_step": 3}))
    reasons = dump.extra["reasons"]
    assert isinstance(reasons, dict) and reasons == cache.reasons.counts()
    assert reasons["load_back:root"] == before + 1
    assert dump.extra["engine_step"] == 3


def test_capture_matches_the_cache(busy: Busy) -> None:
    cache = busy.cache
    doc = capture(cache, seed=5, step=9, extra={"path": Path("/x"), "t": (1, 2)})
    json.dumps(doc, allow_nan=False)
    dump = CrashDump.from_json(doc)
    assert dump.to_json() == doc
    assert (dump.seed, dump.step, dump.epoch, dump.components) == (5, 9, 1, ("full", "swa", "mamba"))
    assert dump.extra == {"reasons": cache.reasons.counts(), "path": "/x", "t": [1, 2]}
    assert list(dump.nodes) == [n.id for n in cache.nodes()]
    for node in cache.nodes():
        d = dump.nodes[node.id]
        assert (d.parent, d.start, d.end, d.key) == (node.parent.id if node.parent else None, node.start, node.end,
                                                     node.key)
        dev = residency(node).full_device
        assert d.components["full"].device == (tuple(dev) if dev is not None else None)
        assert d.components["mamba"].host == residency(node).mamba_host
        for name, pins in (("full", residency(node).full_pins), ("swa", residency(node).swa_pins), ("mamba", residency(node).mamba_pins)):
            assert list(d.components[name].pins) == ([] if pins is None else pins.ids())
    live = cache.ledger.live()
    assert list(dump.leases) == [lease.id for lease in live]
    for lease in live:
        dl = dump.leases[lease.id]
        pinned_by = [n.id for n in cache.nodes() if any(
            p is not None and lease in p for p in (residency(n).full_pins, residency(n).swa_pins, residency(n).mamba_pins))]
        assert (dl.component, dl.owner, dl.generation, dl.site) == (
            lease.component.__name__.lower(), str(lease.owner), lease.generation, lease.site)
        assert list(dl.nodes) == pinned_by
        scope = cache.lease_scope(lease.id)
        assert dl.scope == (None if scope is None else tuple(n.id for n in scope))
        assert dl.site is not None and ":" in dl.site
    assert [t.id for t in dump.tickets] == [t.id for t in cache.tickets()] == [2]
    assert dump.tickets[0].leases == {k.lower(): v for k, v in cache.tickets()[0].leases.items()}
    assert [(q.ticket, q.generation, q.kind) for q in dump.quarantine] == [(1, 0, "backup")]
    assert dump.transfer is not None and dump.transfer.engine == "ManualEngine"
    assert [(j.ticket, j.withheld) for j in dump.transfer.jobs] == [(1, False), (2, False)]
    assert {k: p.to_json() for k, p in dump.pools.items()} == {k: v.to_json() for k, v in cache.pools.stats().items()}
    assert dump.counters == cache.counters.as_dict()
    assert dump.ledger.counters == cache.ledger.counters()
    assert [e.seq for e in dump.events] == [e.seq for e in cache.ledger.events()]
    assert {e.kind for e in dump.events} >= {"acquire", "release", "revoke", "epoch"}
    assert dump.sanity is not None and dump.sanity.ok
    assert dump.capture_errors == ()


def test_write_and_load(busy: Busy, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_crash_dump(busy.cache, tmp_path / "sub" / "d.json", seed=1, step=2)
    assert path == (tmp_path / "sub" / "d.json").resolve()
    assert f"crash dump written to {path}" in capsys.readouterr().err
    loaded = load_dump(path)
    assert loaded.to_json() == json.loads(path.read_text())
    assert list(tmp_path.joinpath("sub").iterdir()) == [path]
    named = write_crash_dump(busy.cache, f"{tmp_path}/dir/", seed=4, step=17, announce=False)
    assert named.parent == (tmp_path / "dir").resolve()
    assert named.name.startswith("unicache-crash-") and named.name.endswith("-seed4-step17.json")
    assert capsys.readouterr().err == ""


def test_error_and_its_ids_are_recorded(busy: Busy, tmp_path: Path) -> None:
    with pytest.raises(UnknownTicketError) as info:
        busy.cache.deliver(Ack(99, 0))
    path = write_crash_dump(busy.cache, tmp_path / "e.json", error=info.value, announce=False)
    err = load_dump(path).error
    assert err is not None
    assert (err.type, err.module) == ("UnknownTicketError", "unicache.errors")
    assert "ticket 99" in err.message and err.ids == {"ticket_id": 99, "generation": 0}
    assert any("deliver" in line for line in err.traceback)


def test_a_broken_section_does_not_stop_the_dump(busy: Busy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> object:
        raise RuntimeError("ticket table corrupt")

    monkeypatch.setattr(busy.cache, "tickets", boom)
    monkeypatch.setattr(busy.cache, "sanity_check", boom)
    path = write_crash_dump(busy.cache, tmp_path / "b.json", announce=False)
    dump = load_dump(path)
    assert [(c.section, c.type, c.message) for c in dump.capture_errors] == [
        ("tickets", "RuntimeError", "ticket table corrupt"), ("sanity", "RuntimeError", "ticket table corrupt")]
    assert dump.tickets == () and dump.sanity is None and len(dump.leases) == len(busy.cache.ledger.live())


def test_dump_on_error(busy: Busy, tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError) as info:
        with dump_on_error(busy.cache, tmp_path, seed=3, step=lambda: 11, extra=lambda: {"request": 4}):
            _ = 1 // 0
    notes = getattr(info.value, "__notes__", [])
    assert len(notes) == 1 and notes[0].startswith("crash dump: ")
    dump = load_dump(notes[0].removeprefix("crash dump: "))
    assert dump.error is not None and dump.error.type == "ZeroDivisionError"
    assert (dump.seed, dump.step, dump.extra) == (3, 11, {"reasons": {}, "request": 4})
    with dump_on_error(busy.cache, tmp_path):
        pass
    assert len(list(tmp_path.iterdir())) == 1

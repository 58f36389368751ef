"""Capacity refusals: a typed `CapacityError` whose reason names who holds the pool's rows."""

from __future__ import annotations

from tests.repl.conftest import RunRepl


def test_refusal_under_pins_names_the_leases(repl: RunRepl) -> None:
    run = repl("""\
        new --device-tokens 16
        insert 1..8
        insert 20..27
        lock t:1..8
        lock t:20..27
        ! insert 40..43
        assert counter live == 2
        assert counter full.device.used == 16
        assert clean
        """)
    assert run.status == 0, run.failures()
    locks = run.of("lock")
    err = run.last("insert")["error"]
    assert err["type"] == "CapacityError"
    reason = err["reason"]
    assert reason["kind"] == "pins" and reason["component"] == "full" and reason["needed"] == 4
    assert reason["pinned"] == 16 and reason["free"] == 0
    assert reason["pinned_by"] == sorted(lock["leases"]["full"] for lock in locks)
    assert reason["pinned_nodes"] == [lock["node"] for lock in locks]
    assert "everything left is pinned" in err["message"]
    assert err["ids"]["component"] == "full"


def test_refusal_under_quarantine_does_not_blame_pins(repl: RunRepl) -> None:
    run = repl("""\
        new --transfer manual --device-tokens 16
        insert 1..8
        backup t:1..8
        ack all
        evict device 16
        load-back t:1..8
        reset
        ! insert 40..51
        assert counter full.device.quarantined == 8
        ack T2
        insert 40..51
        assert clean
        """)
    assert run.status == 0, run.failures()
    err = [e for e in run.of("insert") if not e["ok"]][0]["error"]
    reason = err["reason"]
    assert err["type"] == "CapacityError"
    assert reason["kind"] == "quarantine" and reason["quarantined"] == 8 and reason["quarantined_by"] == [2]
    assert reason["pinned"] == 0 and reason["pinned_by"] == []
    assert "quarantined until the stale acks of T2" in err["message"]
    assert "pinned" not in err["message"]


def test_refusal_larger_than_the_pool(repl: RunRepl) -> None:
    run = repl("new --device-tokens 16\n! insert 1..17\nassert counter nodes == 1\n")
    assert run.status == 0, run.failures()
    err = run.last("insert")["error"]
    assert err["reason"]["kind"] == "too-large"
    assert err["message"] == "insert: 17 full pages needed, but the device pool holds only 16 in all"

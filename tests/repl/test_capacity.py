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


def test_refusal_under_in_flight_backups_does_not_say_everything_is_pinned(repl: RunRepl) -> None:
    """Rows pinned only by the leases of in-flight backups weigh as in-flight: their acks free them."""
    run = repl("""\
        new --transfer manual --device-tokens 16 --write-policy write_through
        insert 1..8
        insert 20..27
        ! insert 40..43
        ack all
        insert 40..43
        assert clean
        """)
    assert run.status == 0, run.failures()
    backups = run.of("insert")[:2]
    err = run.of("insert")[2]["error"]
    reason = err["reason"]
    assert err["type"] == "CapacityError"
    assert reason["kind"] == "in-flight" and reason["in_flight_tickets"] == [1, 2]
    assert reason["pinned"] == 16 and reason["ticket_pinned"] == 16
    assert reason["pinned_nodes"] == [b["node"] for b in backups]
    assert "everything left is pinned" not in err["message"]
    assert "under in-flight copies of T1 T2 (the room frees when those tickets are acked)" in err["message"]


def test_refusal_larger_than_the_pool(repl: RunRepl) -> None:
    run = repl("new --device-tokens 16\n! insert 1..17\nassert counter nodes == 1\n")
    assert run.status == 0, run.failures()
    err = run.last("insert")["error"]
    assert err["reason"]["kind"] == "too-large"
    assert err["message"] == "insert: 17 full pages needed, but the device pool holds only 16 in all"


def test_refused_load_back_says_who_holds_the_room(repl: RunRepl) -> None:
    """The worked example of docs/repl.md: two in-flight load-backs hold 20 of 40 device pages; a
    third needing 28 is refused until the withheld ack lets their pages be evicted."""
    run = repl("""\
        new --components full,mamba --transfer manual --device-tokens 40 --mamba-slots 8
        insert 1..8
        insert 1..8 9..12
        insert 40..67
        backup t:1..8
        backup t:1..12
        backup t:40..67
        ack all
        evict device 40
        load-back t:1..12
        withhold T4
        load-back t:1..8
        load-back t:40..67
        ack all
        load-back t:40..67
        ack T4
        load-back t:40..67
        ack all
        assert clean
        """)
    assert run.status == 0, run.failures()
    refused, still, served = run.of("load-back")[2:]
    assert refused["ticket"] is None and refused["room"]["kind"] == "in-flight"
    assert refused["room"]["needed"] == 28 and refused["room"]["free"] == 20
    assert refused["room"]["in_flight_tickets"] == [4, 5]
    assert still["ticket"] is None and still["room"]["in_flight_tickets"] == [4]
    assert served["ticket"] is not None and served["full_tokens"] == 28


def test_refused_load_back_without_mamba_state_names_missing_state(repl: RunRepl) -> None:
    """A node cached without Mamba state is refused with the Full pool empty: the cache's reason
    is missing Mamba state at that node, not device room."""
    run = repl("""\
        new --components full,mamba --transfer manual --device-tokens 32 --mamba-slots 8
        insert 21..24 --no-mamba
        backup t:21..24
        ack all
        evict device 32
        load-back t:21..24
        """)
    assert run.status == 0, run.failures()
    out = run.last("load-back")
    node = out["anchor"]
    assert out["ticket"] is None and out["room"] is None
    assert out["why"]["kind"] == "missing_state" and out["why"]["component"] == "mamba"
    assert out["why"]["nodes"] == [node] and out["why"]["op"] == "load_back"
    assert "no mamba data on device or host" in out["reason"] and "room" not in out["reason"]

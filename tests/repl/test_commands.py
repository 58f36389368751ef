"""Every REPL command driven through `--script --json`, its result checked against the cache's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.repl.conftest import RunRepl
from unicache import Full
from unicache.dump import load_dump
from unicache.repl.executor import execute
from unicache.repl.session import Session
from tests.unicache.support import residency

FULL_MAMBA = "new --components full,mamba --transfer manual --device-tokens 32 --mamba-slots 8\n"
# t:1..8 backed up (T1, acked), evicted from the device, and loaded back by T2, whose ack is pending
LOADING_T2 = FULL_MAMBA + "insert 1..8\nbackup t:1..8\nack all\nevict device 32\nload-back t:1..8\n"


def test_new_reports_config(repl: RunRepl) -> None:
    run = repl("new --components full,swa,mamba --page-size 2 --device-tokens 16 --swa-window 4 "
               "--write-policy write_through --transfer manual\n")
    new = run.last("new")
    assert new["ok"] and new["components"] == ["full", "swa", "mamba"] and new["transfer"] == "manual"
    cfg = new["config"]
    assert (cfg["page_size"], cfg["device_tokens"], cfg["swa_window"], cfg["write_policy"]) == (2, 16, 4,
                                                                                                 "write_through")


def test_key_width_option(repl: RunRepl) -> None:
    run = repl("new\n!match 1 2 2147483648\nnew --token-bytes 8\ninsert 1 2 2147483648\nmatch 1 2 2147483648\n")
    default, wide = [e for e in run.out if e["cmd"] == "new"]
    assert default["config"]["token_bytes"] == 4 and wide["config"]["token_bytes"] == 8
    refused, found = [e for e in run.out if e["cmd"] == "match"]
    assert not refused["ok"] and refused["error"]["type"] == "TokenIdRangeError"
    assert "token id 2147483648 at position 2" in refused["error"]["message"]
    assert found["ok"] and found["device_len"] == 3


def test_insert_and_match(repl: RunRepl) -> None:
    run = repl(FULL_MAMBA + """\
        insert 1..8
        insert 1..8 9,10,11,12
        match 1..12 40 41
        match 1..4
        match 7 7
        """)
    first, second = run.of("insert")
    assert (first["tokens"], first["reused"], first["new_tokens"], first["mamba"]) == (8, 0, 8, "donated")
    assert (second["tokens"], second["reused"], second["new_tokens"]) == (12, 8, 4)
    full, part, miss = run.of("match")
    assert (full["matched_len"], full["device_len"], full["anchor_len"]) == (12, 12, 12)
    assert full["device_node"] == second["node"] and not full["needs_load_back"]
    # a match ending inside node 1..8 splits it: the Mamba state lives at the end of 1..8 only
    assert part["matched_len"] == 4 and part["device_len"] == 0
    assert miss["matched_len"] == 0 and miss["device_node"] == 1
    assert run.status == 0


def test_lock_pins_unlock(repl: RunRepl) -> None:
    run = repl(FULL_MAMBA + """\
        insert 1..8
        lock t:1..8
        pins t:1..8
        leases --node t:1..8
        leases --component mamba
        leases --owner lock
        unlock R1
        pins t:1..8
        ! unlock R1
        """)
    lock = run.last("lock")
    assert (lock["receipt"], lock["length"]) == (1, 8)
    pins_held, pins_after = run.of("pins")
    assert {c: [x["id"] for x in v["leases"]] for c, v in pins_held["components"].items()} == {
        "full": [lock["leases"]["full"]], "mamba": [lock["leases"]["mamba"]]}
    assert pins_held["components"]["full"]["leases"][0]["owner"] == "lock#1"
    assert pins_held["components"]["full"]["leases"][0]["site"].endswith(":lock")
    by_node, by_comp, by_owner = run.of("leases")
    assert sorted(x["id"] for x in by_node["leases"]) == sorted(lock["leases"].values())
    assert [x["id"] for x in by_comp["leases"]] == [lock["leases"]["mamba"]]
    assert len(by_owner["leases"]) == 2
    unlock = run.of("unlock")
    assert unlock[0]["ok"] and sorted(unlock[0]["released"]) == sorted(lock["leases"].values())
    assert unlock[1]["error"]["type"] == "UnknownNameError"
    assert pins_after["pinned_by_components"] == [] and run.status == 0


def test_backup_ack_tickets_withhold_step(repl: RunRepl) -> None:
    run = repl(FULL_MAMBA + """\
        insert 1..8
        insert 1..12
        backup t:1..8
        backup t:1..12
        withhold T2
        tickets
        step
        step
        ack T2
        ack T2
        tickets
        ! withhold T2
        """)
    b1, b2 = run.of("backup")
    assert (b1["ticket"], b2["ticket"]) == (1, 2)
    tickets = run.of("tickets")[0]
    assert [(t["id"], t["kind"], t["status"], t["withheld"]) for t in tickets["tickets"]] == [
        (1, "backup", "in_flight", False), (2, "backup", "in_flight", True)]
    assert set(tickets["tickets"][1]["leases"]) == {"full", "mamba"}
    assert {c["component"] for c in tickets["tickets"][1]["copies"]} == {"full", "mamba"}
    step1, step2 = run.of("step")
    # the first step delivers T1; T2 is withheld, so the second step finds nothing to do
    assert step1["steps"] == 1 and step1["reports"][0]["acks"][0]["ticket"] == 1
    assert step2["steps"] == 0 and step2["idle"]
    ack, dup = run.of("ack")
    assert ack["acks"][0]["status"] == "done" and ack["acks"][0]["kind"] == "backup"
    assert dup["acks"][0]["status"] == "duplicate"
    assert run.of("tickets")[1]["tickets"] == []
    assert run.last("withhold")["error"]["type"] == "NoSuchJobError"
    assert run.status == 0


def test_evict_variants_and_reclaim(repl: RunRepl) -> None:
    run = repl("""\
        new --components full,swa,mamba --swa-window 4 --transfer manual --device-tokens 32 --mamba-slots 8
        insert 1..8
        insert 1..12
        evict mamba 1
        evict swa 4
        backup t:1..12
        ack all
        lock t:1..12
        reclaim
        history t:1..12
        unlock last
        reclaim
        evict device 32
        evict mamba 1 --host
        evict swa 4 --host
        evict host 64
        tree
        ! evict full 3
        ! evict host 3 --host
        """)
    m, s, d, mh, sh, h = run.of("evict")[:6]
    assert (m["component"], m["tier"], m["freed"]) == ("mamba", "device", 1)
    assert (s["component"], s["tier"]) == ("swa", "device") and s["freed"] >= 4
    blocked, reclaimed = run.of("reclaim")
    # reclaim consults Full pins only: the locked node's host duplicate stays, then goes after unlock
    assert blocked["freed"] == 0 and blocked["blocked"] >= 1
    assert "reclaim-blocked" in [e["kind"] for e in run.last("history")["events"]]
    assert reclaimed["freed"] > 0
    assert (d["component"], d["tier"]) == ("full", "device") and d["freed"] == 12
    assert (mh["tier"], sh["tier"]) == ("host", "host")
    assert (h["component"], h["tier"]) == ("full", "host") and h["freed"] > 0
    tree = run.last("tree")
    assert [n["id"] for n in tree["nodes"]] == [1]
    errors = [e for e in run.out if not e["ok"]]
    assert [e["error"]["type"] for e in errors] == ["CommandSyntaxError", "CommandSyntaxError"]
    assert run.status == 0


def test_load_back_reset_stale_ack_run_until(repl: RunRepl) -> None:
    run = repl(LOADING_T2 + """\
        load-back root
        reset
        tickets
        stats
        run until stale-ack
        assert stale-ack
        stats
        tree
        ! run until stale-ack
        """)
    lb, noop = run.of("load-back")
    assert lb["ticket"] == 2 and set(lb["leases"]) == {"full", "mamba"} and lb["full_tokens"] == 8
    assert lb["mamba_moved"] is True
    assert noop["ticket"] is None and noop["why"]["kind"] == "root" and noop["room"] is None
    assert noop["reason"] == "load_back: the root holds no data; nothing to do"
    reset = run.last("reset")
    assert reset["epoch"] == 1 and [q["ticket"] for q in reset["quarantine"]] == [2]
    tickets = run.last("tickets")
    assert tickets["tickets"] == [] and [q["ticket"] for q in tickets["quarantine"]] == [2]
    assert [j["ticket"] for j in tickets["jobs"]] == [2]
    before, after = run.of("stats")
    assert sum(p["quarantined"] for p in before["pools"].values()) > 0
    assert sum(p["quarantined"] for p in after["pools"].values()) == 0
    assert after["counters"]["stale_acks"] == 1 and after["ledger"]["live"] == 0
    reached = run.of("run")[0]
    assert reached["reached"] and reached["steps"] == 1
    assert run.of("run")[1]["error"]["type"] == "ConditionError"
    assert [n["id"] for n in run.last("tree")["nodes"]] == [reset["root"]]
    assert run.status == 0


def test_abandon_keeps_leases_until_the_ack(repl: RunRepl) -> None:
    run = repl(LOADING_T2 + """\
        abandon T2
        tickets
        assert counter live == 2
        assert pinned t:1..8 full mamba
        ! abandon T2
        ack T2
        assert counter live == 0
        assert clean
        """)
    assert run.status == 0, run.failures()
    abandon = run.of("abandon")
    assert abandon[0]["ticket"] == 2 and set(abandon[0]["leases"]) == {"full", "mamba"}
    assert abandon[1]["error"]["type"] == "UnknownNameError"
    ticket = run.last("tickets")["tickets"][0]
    assert (ticket["id"], ticket["abandoned"], ticket["held_by_session"]) == (2, True, False)
    assert run.last("ack")["acks"][0]["status"] == "done"


def test_settled_load_backs_are_listed(repl: RunRepl) -> None:
    run = repl(LOADING_T2 + """\
        ack T2
        tickets
        """)
    assert run.last("tickets")["settled"] == [{"ticket": 2, "anchor": 2, "status": "done", "full_tokens": 8,
                                               "swa_tokens": 0, "mamba_moved": True}]


def test_ack_failures_forged_and_unknown(repl: RunRepl) -> None:
    run = repl(FULL_MAMBA + """\
        insert 1..8
        backup t:1..8
        ack T1 --fail --detail "disk on fire"
        events --kind failed-transfer
        ! ack T99
        ! ack T1 --generation 5
        ack all
        check
        """)
    failed = run.of("ack")[0]["acks"][0]
    assert (failed["ok"], failed["status"]) == (False, "failed")
    events = run.last("events")["events"]
    assert [(e["ticket"], e["detail"]) for e in events] == [(1, "disk on fire")]
    unknown, forged = run.of("ack")[1:3]
    assert unknown["error"]["type"] == "UnknownTicketError" and unknown["error"]["ids"]["ticket_id"] == 99
    assert forged["error"]["type"] == "UnknownTicketError" and forged["error"]["ids"]["generation"] == 5
    assert run.of("ack")[3]["acks"] == []
    assert run.last("check")["clean"] is True and run.status == 0


def test_lease_and_history(repl: RunRepl) -> None:
    run = repl(FULL_MAMBA + """\
        insert 1..8
        backup t:1..8
        lease L1
        ack T1
        lease L1
        history L1
        history T1
        history t:1..8 --last 2
        history #2
        ! lease L999
        """)
    live, gone = run.of("lease")[:2]
    assert live["live"] and live["lease"]["component"] == "full" and live["lease"]["owner"].startswith("backup#1")
    assert live["lease"]["tickets"] == [1] and live["lease"]["nodes"] == [2]
    assert [e["kind"] for e in live["history"]] == ["acquire"]
    assert not gone["live"] and gone["lease"] is None
    assert [e["kind"] for e in gone["history"]] == ["acquire", "release"]
    by_lease, by_ticket, by_path, by_id = run.of("history")
    assert [e["lease"] for e in by_lease["events"]] == [1, 1]
    assert {e["lease"] for e in by_ticket["events"] if e["kind"] != "ack"} == {1, 2}
    assert all(e["ticket"] == 1 for e in by_ticket["events"])
    acks = [e for e in by_ticket["events"] if e["kind"] == "ack"]
    assert len(acks) == 1 and acks[0]["generation"] == 0 and acks[0]["nodes"] == [2]
    assert len(by_path["events"]) == 2 and by_path["target"] == {"node": 2}
    assert by_id["events"][-2:] == by_path["events"]
    assert run.last("lease")["error"]["type"] == "UnknownNameError"
    assert run.status == 0


def test_tree_options(repl: RunRepl) -> None:
    run = repl(FULL_MAMBA + """\
        insert 1..8
        insert 1..8 9..12
        insert 1..8 20..23
        lock t:1..8,20..23
        tree
        tree t:1..8 --depth 0
        tree --pinned
        """)
    full, top, pinned = run.of("tree")
    assert [(n["id"], n["depth"]) for n in full["nodes"]] == [(1, 0), (2, 1), (3, 2), (4, 2)]
    assert full["nodes"][3]["path"] == "1..8,20..23"
    assert full["nodes"][3]["components"]["full"]["pins"] == [run.last("lock")["leases"]["full"]]
    assert [n["id"] for n in top["nodes"]] == [2]
    assert [n["id"] for n in pinned["nodes"]] == [1, 2, 4]


def test_dot_and_dump(repl: RunRepl, tmp_path: Path) -> None:
    dot = tmp_path / "tree.dot"
    dump = tmp_path / "state.json"
    run = repl(FULL_MAMBA + f"""\
        insert 1..8
        insert 1..12
        backup t:1..12
        dot {dot} --leases
        dot - --node t:1..8
        dump {dump}
        """)
    text = dot.read_text()
    assert text.startswith("digraph unicache {") and text.rstrip().endswith("}")
    assert "n2 -> n3;" in text and "l3 -> n3" in text and 'fillcolor="#ffb3a7"' in text
    printed = run.of("dot")[1]
    assert printed["file"] is None and printed["nodes"] == 2 and "  n3 [" in printed["dot"] and "  n1 [" not in printed["dot"]
    loaded = load_dump(dump)
    assert loaded.error is None and sorted(loaded.nodes) == [1, 2, 3]
    assert [t.id for t in loaded.tickets] == [1]
    assert loaded.transfer is not None and [(j.ticket, j.withheld) for j in loaded.transfer.jobs] == [(1, False)]
    assert loaded.nodes[3].components["full"].pins == (3,) and loaded.leases[3].owner.startswith("backup#1")
    assert run.status == 0


def _run(session: Session, line: str) -> dict[str, Any]:
    outcome = execute(session, line)
    assert outcome is not None
    envelope: dict[str, Any] = outcome.envelope
    return envelope


def test_check_finds_bytes_changed_under_a_held_copy() -> None:
    """The manual engine copies at ack time, reading the source then; `check` compares every
    published slot with the reference model and names node, component and tier."""
    session = Session()
    try:
        for line in (FULL_MAMBA, "insert 1..8", "backup t:1..8"):
            assert _run(session, line)["ok"]
        check = _run(session, "check")
        assert check["clean"] is True and check["data"]["checked"] == 8 + 1
        cache = session.live("test")
        node = cache.node(2)
        pages = residency(node).full_device
        assert pages is not None
        cache.write_slots(Full, pages[:1], torch.full((1, 1, 4), 7.0))
        assert _run(session, "ack T1")["ok"]
        check = _run(session, "check")
        assert check["ok"] and check["clean"] is False and check["violations"] == []
        bad = {(m["node"], m["component"], m["tier"]) for m in check["data"]["mismatches"]}
        assert bad == {(2, "full", "device"), (2, "full", "host")}
        assert all("1 of 8 rows" in m["detail"] for m in check["data"]["mismatches"])
        failed = _run(session, "assert clean")
        assert not failed["ok"] and failed["error"]["type"] == "ConditionError"
    finally:
        session.close()


def test_help_and_quit(repl: RunRepl) -> None:
    run = repl("""\
        help
        help insert
        help lb
        help conditions
        help names
        ! help nosuch
        quit
        insert 1..4
        """)
    listing = run.of("help")[0]
    names = {c["name"] for c in listing["commands"]}
    assert {"new", "insert", "match", "lock", "unlock", "backup", "evict", "reclaim", "load-back", "ack",
            "withhold", "tickets", "pins", "leases", "lease", "history", "tree", "check", "reset", "step",
            "run", "dot", "dump", "help", "quit", "abandon", "assert", "events", "stats"} <= names
    assert {c["name"]: c["needs"] for c in listing["commands"]}["insert"] == "live"
    assert {c["name"]: c["needs"] for c in listing["commands"]}["pins"] == "view"
    one = run.of("help")[1]
    assert one["command"] == "insert" and "usage: insert" in one["help"] and "--no-mamba" in one["help"]
    assert run.of("help")[2]["command"] == "load-back"
    assert "two-components" in run.of("help")[3]["help"]
    assert "t:1,2,3" in run.of("help")[4]["help"]
    assert run.last("quit")["ok"]
    assert [e["cmd"] for e in run.out][-1] == "quit"
    assert run.status == 0


def test_history_filters_combine(repl: RunRepl) -> None:
    """history TARGET --ticket/--lease/--node/--component/--kind: every filter must match."""
    run = repl("""\
        new --components full,mamba --transfer manual --device-tokens 32 --mamba-slots 8
        insert 1..8
        insert 1..8 9..12
        backup t:1..12
        ack all
        evict device 32
        load-back t:1..12
        load-back t:1..8
        ack all
        history T3
        history t:1..8 --component mamba
        history --ticket T3 --node t:1..8 --kind acquire
        history --component mamba --kind release --last 1
        history
        """)
    assert run.status == 0, run.failures()
    by_ticket, mamba_node, narrowed, last_release, everything = run.of("history")
    loads = run.of("load-back")
    assert by_ticket["target"] == {"ticket": 3}
    t3 = {loads[0]["leases"]["full"], loads[0]["leases"]["mamba"]}
    assert by_ticket["events"] and {e["lease"] for e in by_ticket["events"] if e["kind"] != "ack"} == t3
    assert [e["kind"] for e in by_ticket["events"]].count("ack") == 1
    assert all(e["ticket"] == 3 for e in by_ticket["events"])
    assert mamba_node["target"] == {"node": 2, "component": "mamba"}
    mamba_tickets = {e["ticket"] for e in everything["events"] if e["component"] == "mamba"}
    assert mamba_node["events"] and all(2 in e["nodes"] for e in mamba_node["events"])
    assert all(e["component"] == "mamba" or (e["kind"] == "ack" and e["ticket"] in mamba_tickets)
               for e in mamba_node["events"])
    assert loads[1]["ticket"] in [e["ticket"] for e in mamba_node["events"] if e["kind"] == "ack"]
    assert narrowed["target"] == {"ticket": 3, "node": 2, "kind": "acquire"}
    assert [e["lease"] for e in narrowed["events"]] == [loads[0]["leases"]["full"]]
    assert len(last_release["events"]) == 1 and last_release["events"][0]["kind"] == "release"
    assert everything["target"] == {} and len(everything["events"]) > len(by_ticket["events"])


def test_component_filter_keeps_acks_of_tickets_with_that_component(repl: RunRepl) -> None:
    """An ack has no component of its own: --component keeps it when its ticket took a lease of
    that component (the ticket's lease events in the ring say which), in history and events."""
    run = repl("""\
        new --components full,mamba --transfer manual --device-tokens 32 --mamba-slots 8
        insert 1..8
        insert 20..23 --no-mamba
        backup t:1..8
        backup t:20..23
        ack all
        history --component mamba --kind ack
        events --kind ack --component full
        events --kind ack --component mamba
        history T2 --component mamba
        """)
    assert run.status == 0, run.failures()
    backups = [b["ticket"] for b in run.of("backup")]
    mamba_hist, t2_mamba = run.of("history")
    full_events, mamba_events = run.of("events")
    assert [e["ticket"] for e in mamba_hist["events"]] == backups[:1]
    assert [e["ticket"] for e in full_events["events"]] == backups
    assert [e["ticket"] for e in mamba_events["events"]] == backups[:1]
    assert t2_mamba["events"] == []


def test_run_until_lists_acks_and_names_withheld_tickets(repl: RunRepl) -> None:
    run = repl("""\
        new --transfer manual
        insert 1..4
        insert 10..13
        insert 20..23
        backup t:1..4
        backup t:10..13
        backup t:20..23
        withhold T2
        ! run until idle
        run until counter tickets == 1
        ack T2
        assert idle
        """)
    assert run.status == 0, run.failures()
    failed = run.of("run")[0]["error"]
    assert failed["type"] == "ConditionError"
    assert "acks delivered: T1 (done) T3 (done)" in failed["message"]
    assert failed["actual"] == "in flight: T2 (backup at #3, job withheld: 'ack T2' or 'withhold T2 --release')"
    reached = run.of("run")[1]
    assert reached["steps"] == 0 and reached["acks"] == [] and reached["acks_delivered"] == 0


def test_run_until_reports_the_acks_it_delivered(repl: RunRepl) -> None:
    run = repl("new --transfer manual\ninsert 1..4\ninsert 10..13\nbackup t:1..4\nbackup t:10..13\nrun until idle\n")
    assert run.status == 0, run.failures()
    done = run.last("run")
    assert done["steps"] == 2 and done["acks_delivered"] == 2
    assert [(a["ticket"], a["status"], a["kind"]) for a in done["acks"]] == [(1, "done", "backup"), (2, "done", "backup")]
    human = repl("new --transfer manual\ninsert 1..4\nbackup t:1..4\nrun until idle\n", json_mode=False)
    assert "acks delivered" in human.text


def test_evict_lists_backups_started_and_rows_under_copies(repl: RunRepl) -> None:
    """Write-back eviction of unbacked nodes starts backups; their source rows stay held until the acks."""
    run = repl("""\
        new --transfer manual --device-tokens 16 --no-sync-write-back
        insert 1..8
        insert 20..27
        evict device 8
        evict device 8
        ack all
        evict device 8
        """)
    assert run.status == 0, run.failures()
    first, second, third = run.of("evict")
    assert first["freed"] == 0 and first["backups_started"] == [1, 2]
    assert first["in_flight"] == [{"ticket": 1, "kind": "backup", "rows": list(range(8))},
                                  {"ticket": 2, "kind": "backup", "rows": list(range(8, 16))}]
    assert second["backups_started"] == [] and second["blocked"] == 2 and second["in_flight"] == first["in_flight"]
    assert third["freed"] == 8 and third["in_flight"] == [] and third["backups_started"] == []


@pytest.mark.parametrize(("target", "message"), [("missing/tree.dot", "does not exist"),
                                               ("missing/", "does not exist"),
                                               ("file.txt/x", "file.txt is not a directory")])
def test_dot_and_dump_create_no_directories(repl: RunRepl, tmp_path: Path, target: str, message: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "file.txt").write_text("x")
    for command in ("dot", "dump"):
        run = repl(FULL_MAMBA + f"insert 1..8\n!{command} {out}/{target}\n")
        (err,) = run.of(command)
        assert err["ok"] is False and err["error"]["type"] == "OutputPathError", err
        assert message in err["error"]["message"], err
    assert sorted(p.name for p in out.iterdir()) == ["file.txt"]


def test_ack_of_a_joiner_names_the_copy_to_ack(repl: RunRepl) -> None:
    """T3 joined T2's copy, in flight: acking T3 is refused naming T2 and changes nothing (no duplicate
    ack counted, both still held); acking T2 settles both, as the cache's joining says."""
    run = repl(LOADING_T2 + """\
        load-back t:1..8
        ! ack T3
        ! ack T3 --generation 0
        assert counter duplicate_acks == 0
        assert counter tickets == 1
        tickets
        ack T2
        assert counter tickets == 0
        tickets
        assert clean
        """)
    assert run.status == 0 and run.failures() == []
    joined = run.of("load-back")[-1]
    assert joined["ticket"] == 3 and joined["full_tokens"] == 8
    refusals = [e for e in run.of("ack") if not e["ok"]]
    assert len(refusals) == 2
    for e in refusals:
        assert e["error"]["type"] == "JoinedTicketError"
        assert e["error"]["message"] == ("ack T3: T3 joined the copy of T2, which is still in flight, and has no "
                                         "ack of its own; 'ack T2' settles both")
        assert e["error"]["ids"] == {"ticket_id": 3}
    done = run.of("ack")[-1]
    assert done["ok"] and done["acks"][0]["ticket"] == 2 and done["acks"][0]["status"] == "done"
    before = run.of("tickets")[0]
    assert before["settled"] == [] and [t["id"] for t in before["tickets"] if t["held_by_session"]] == [2, 3]
    settled = {r["ticket"]: r["status"] for r in run.last("tickets")["settled"]}
    assert settled == {2: "done", 3: "done"}



def test_dot_and_dump_never_destroy_what_is_there(repl: RunRepl, tmp_path: Path) -> None:
    """Devices, FIFOs, directories and symbolic links are refused (a FIFO is never opened), and so is the
    script being run; a regular file is replaced atomically."""
    import os
    import stat

    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "fifo")
    (out / "real.dot").write_text("keep")
    (out / "link.dot").symlink_to(out / "real.dot")
    cases = [("/dev/null", "is a character device"), (f"{out}/fifo", "is a FIFO"),
             (f"{out}", "is a directory"), (f"{out}/link.dot", "is a symbolic link"),
             ("/proc/tree.dot", "special filesystem"), (f"{tmp_path}/script1.repl", "same file as the input --script")]
    script = FULL_MAMBA + "insert 1..8\n" + "".join(f"!dot {target}\n" for target, _ in cases)
    script += "".join(f"!dump {target}\n" for target, _ in cases if target != str(out))
    script += f"dot {out}/real.dot\n"
    run = repl(script)
    assert run.status == 0, run.failures()
    dots, dumps = run.of("dot"), run.of("dump")
    for (target, message), err in zip([*cases, *[c for c in cases if c[0] != str(out)]], [*dots[:-1], *dumps]):
        assert err["ok"] is False and err["error"]["type"] == "OutputPathError", err
        assert err["error"]["message"].startswith(f"{err['cmd']} {target}: ") and message in err["error"]["message"]
    assert dots[-1]["ok"] and (out / "real.dot").read_text().startswith("digraph")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode) and stat.S_ISFIFO(os.lstat(out / "fifo").st_mode)
    assert (out / "link.dot").is_symlink() and (tmp_path / "script1.repl").read_text().startswith("new ")
    assert sorted(p.name for p in out.iterdir()) == ["fifo", "link.dot", "real.dot"]

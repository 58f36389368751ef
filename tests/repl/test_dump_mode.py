"""`unicache repl --dump FILE`: inspect a crash dump read-only; live commands are refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.repl.conftest import WELL_FORMED, RunRepl
from unicache.dump import load_dump

CRASH_MOMENT = """\
new --components full,mamba --transfer manual --device-tokens 32 --mamba-slots 8
insert 1..8
insert 1..8 9..12
backup t:1..8
backup t:1..12
ack all
evict device 32
load-back t:1..12
withhold T3
load-back t:1..8
dump {dump}
"""


@pytest.fixture
def crash_dump(repl: RunRepl, tmp_path: Path) -> Path:
    """A dump taken at the production-crash moment: two load-backs in flight pinning one node."""
    path = tmp_path / "crash.json"
    run = repl(CRASH_MOMENT.format(dump=path))
    assert run.status == 0 and run.last("dump")["file"] == str(path.resolve())
    return path


def test_inspect_a_dump(repl: RunRepl, crash_dump: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.json"
    run = repl(f"""\
        tree
        pins t:1..8
        leases --component mamba
        lease L7
        history t:1..8
        history T3
        tickets
        events --kind acquire --last 0
        stats
        check
        assert shared t:1..8
        assert two-components t:1..8
        assert counter live == 4
        assert clean
        dot -
        dump {again}
        """, "--dump", str(crash_dump))
    assert run.status == 0, run.failures()
    pins = run.last("pins")
    assert {c: sorted(x["id"] for x in v["leases"]) for c, v in pins["components"].items()} == {
        "full": [7, 9], "mamba": [10]}
    owners = {x["owner"] for v in pins["components"].values() for x in v["leases"]}
    assert owners == {"load_back#3@3", "load_back#4@2"}
    assert [x["id"] for x in run.last("leases")["leases"]] == [8, 10]
    lease = run.last("lease")
    assert lease["live"] and lease["lease"]["tickets"] == [3] and lease["lease"]["nodes"] == [2, 3]
    assert lease["lease"]["site"] is not None and lease["lease"]["site"].endswith(":load_back")
    tickets = run.last("tickets")
    assert [(t["id"], t["withheld"], t["held_by_session"]) for t in tickets["tickets"]] == [
        (3, True, False), (4, False, False)]
    assert {e["lease"] for e in run.of("history")[1]["events"]} == {7, 8}
    assert run.last("check") == {**run.last("check"), "recorded": True, "clean": True, "violations": []}
    assert load_dump(again).to_json() == load_dump(crash_dump).to_json()


def test_live_commands_are_refused_on_a_dump(repl: RunRepl, crash_dump: Path) -> None:
    live = ["insert 1..4", "match 1..4", "lock #2", "unlock R1", "backup #2", "evict device 1", "reclaim",
            "load-back #2", "ack T3", "withhold T3", "reset", "step", "run until idle"]
    run = repl("".join(f"! {c}\n" for c in live), "--dump", str(crash_dump))
    assert run.status == 0
    assert [e["error"]["type"] for e in run.out] == ["NeedsLiveCacheError"] * len(live)
    assert all("read-only" in e["error"]["message"] and f"'{e['cmd']}'" in e["error"]["message"] for e in run.out)


def test_new_leaves_the_dump_for_a_live_cache(repl: RunRepl, crash_dump: Path) -> None:
    run = repl("new\ninsert 1..4\ntree\n", "--dump", str(crash_dump))
    assert run.status == 0 and [n["id"] for n in run.last("tree")["nodes"]] == [1, 2]


def test_banner_names_the_error(repl: RunRepl, crash_dump: Path, tmp_path: Path) -> None:
    doc = json.loads(crash_dump.read_text())
    doc["error"] = {"type": "CorruptionError", "module": "unicache.engine.errors", "message": "bad bytes at #2",
                    "traceback": [], "ids": {"node_id": 2}}
    doc["seed"], doc["step"] = 7, 1234
    doc["extra"] = {"reproduce": "unicache replay --seed 7"}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    run = repl("stats\n", "--dump", str(edited), json_mode=False)
    assert run.status == 0
    assert "error: CorruptionError: bad bytes at #2" in run.text
    assert "seed 7, step 1234" in run.text and "reproduce: unicache replay --seed 7" in run.text


def test_invalid_dump_is_refused(repl: RunRepl, crash_dump: Path, tmp_path: Path) -> None:
    doc = json.loads(crash_dump.read_text())
    doc["tree"]["nodes"][1]["components"]["full"]["pins"] = [999]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    run = repl("tree\n", "--dump", str(bad))
    assert run.status == 2
    assert run.out[0]["error"]["type"] == "DumpFormatError"
    assert "tree.nodes[1].components.full.pins" in run.out[0]["error"]["message"]



def test_check_names_each_inconsistency(repl: RunRepl, crash_dump: Path, tmp_path: Path) -> None:
    """Hand edits a dump still loads with: `check` lists each one, naming its ids, and the dump is not clean."""
    doc = json.loads(crash_dump.read_text())
    assert [(t["id"], t["leases"]) for t in doc["tickets"]] == [(3, {"full": 7, "mamba": 8}),
                                                                 (4, {"full": 9, "mamba": 10})]
    doc["tickets"][0]["leases"]["full"] = 99
    doc["tickets"][1]["node"] = 77
    doc["transfer"]["jobs"][1]["ticket"] = 42
    doc["ledger"]["counters"].update(live=3, released=7)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    expected = [
        ("ticket-lease", None, "full", 99, "ticket 3 holds full lease 99, which is not among the live leases"),
        ("ticket-node", 77, None, None, "ticket 4 (load_back) is anchored at node 77, which is not in the tree"),
        ("lease-ticket", None, "full", 7, "lease 7 is owned by ticket 3 ('load_back#3@3'), which does not hold it"),
        ("job-ticket", None, None, None,
         "the transfer engine holds a load_back job for ticket 42, which is neither live nor quarantined"),
        ("ledger-live", None, None, None, "the ledger counts 3 live lease(s) but the dump lists 4 (leases 7, 8, 9, 10)"),
    ]
    run = repl("check\nassert clean\n", "--dump", str(edited))
    check = run.last("check")
    assert check["clean"] is False and check["inconsistencies"] == len(expected)
    assert [(v["kind"], v["node"], v["component"], v["lease"], v["detail"]) for v in check["violations"]] == expected
    failed = run.last("assert")
    assert failed["ok"] is False
    assert failed["error"]["actual"] == ("recorded check: 0 violation(s); re-checking the dump: 5 inconsistencies "
                                         "(ticket-lease, ticket-node, lease-ticket, job-ticket, ledger-live)")
    text = repl("check\n", "--dump", str(edited), json_mode=False).text
    lines = text.splitlines()
    start = lines.index("NOT clean (as recorded in the dump); re-checking the dump found 5 inconsistencies")
    assert lines[start + 1:start + 6] == [
        "ticket-lease full L99: ticket 3 holds full lease 99, which is not among the live leases",
        "ticket-node #77: ticket 4 (load_back) is anchored at node 77, which is not in the tree",
        "lease-ticket full L7: lease 7 is owned by ticket 3 ('load_back#3@3'), which does not hold it",
        "job-ticket: the transfer engine holds a load_back job for ticket 42, which is neither live nor quarantined",
        "ledger-live: the ledger counts 3 live lease(s) but the dump lists 4 (leases 7, 8, 9, 10)",
    ]


def test_conditions_read_the_dump(repl: RunRepl, crash_dump: Path, tmp_path: Path) -> None:
    doc = json.loads(crash_dump.read_text())
    run = repl("assert leak --not\nassert stale-ack --not\nassert violation --not\nassert multi-pin t:1..8\n"
               "assert unpinned t:1..8 --not\nassert counter full.device.quarantined == 0\n", "--dump", str(crash_dump))
    assert run.status == 0, run.failures()
    doc["ledger"]["counters"]["leaked"] = 1
    doc["ledger"]["leaks"] = [{"id": 99, "component": "full", "owner": "lock#9", "generation": 0,
                               "site": "engine.py:12:run"}]
    doc["counters"]["stale_acks"] = 2
    doc["sanity"] = {"ok": False, "violations": [{"kind": "pins", "node": 2, "component": "full", "lease": 7,
                                                  "detail": "pin set differs from the lease's scope"}]}
    edited = tmp_path / "leaky.json"
    edited.write_text(json.dumps(doc))
    run = repl("assert leak\nassert stale-ack\nassert violation\ncheck\nstats\n", "--dump", str(edited))
    assert run.status == 0, run.failures()
    assert run.last("check")["clean"] is False and run.last("check")["violations"][0]["lease"] == 7
    assert run.last("stats")["leaks"][0]["site"] == "engine.py:12:run"


def test_every_command_gets_its_mode_error_on_a_dump(repl: RunRepl, crash_dump: Path, tmp_path: Path) -> None:
    """Audit: each command, well formed, on a dump: live ones fail with NeedsLiveCacheError (never a
    syntax error), the others work."""
    from unicache.repl.commands import REGISTRY, Needs

    assert set(WELL_FORMED) == set(REGISTRY)
    order = sorted(REGISTRY, key=lambda n: n in ("quit", "new"))
    lines = [("! " if REGISTRY[n].needs is Needs.LIVE else "") + WELL_FORMED[n] for n in order if n != "quit"]
    run = repl("\n".join(lines).format(again=tmp_path / "again.json") + "\n", "--dump", str(crash_dump))
    assert run.status == 0, run.failures()
    for e in run.out:
        live = REGISTRY[e["cmd"]].needs is Needs.LIVE
        assert e["ok"] is not live, e
        if live:
            assert e["error"]["type"] == "NeedsLiveCacheError" and f"'{e['cmd']}'" in e["error"]["message"]


def test_overdue_lists_the_leases_a_dump_recorded_as_held_too_long(repl: RunRepl, tmp_path: Path) -> None:
    """Ages come from the ledger's clock (a fake one here) at the moment of the dump; the limit a
    live dump recorded is the default; nothing is released."""
    from unicache import CacheConfig, Full, UniCache
    from unicache.dump import write_crash_dump

    now = [50.0]
    cache = UniCache(CacheConfig(device_tokens=64, dtype="int32", device="cpu", kv_width=4), clock=lambda: now[0])
    tokens = list(range(1, 9))
    pages = cache.alloc_device(Full, 8)
    assert pages is not None
    cache.insert(tokens, pages)
    old = cache.lock(cache.match_prefix(tokens).device_node)
    now[0] += 40.0
    young = cache.lock(cache.match_prefix(tokens[:4]).device_node)
    now[0] += 5.0
    path = write_crash_dump(cache, tmp_path / "live.json", extra={"lease_age_limit": 30.0}, announce=False)
    (old_lease,) = old.lease_ids()
    cache.unlock(young)
    cache.unlock(old)
    run = repl("overdue\noverdue 1\noverdue 60\n", "--dump", str(path))
    assert run.status == 0, run.failures()
    default, one, sixty = run.of("overdue")
    assert default["limit_seconds"] == 30.0 and [x["id"] for x in default["leases"]] == [old_lease]
    assert default["leases"][0]["age_seconds"] == 45.0 and default["leases"][0]["owner"].startswith("lock#")
    assert [x["age_seconds"] for x in one["leases"]] == [45.0, 5.0] and one["live"] == 2
    assert sixty["leases"] == []
    bare = tmp_path / "bare.json"
    write_crash_dump(UniCache(CacheConfig(device_tokens=64, dtype="int32", device="cpu", kv_width=4)), bare,
                     announce=False)
    run = repl("! overdue 1\n", "--dump", str(bare))
    assert run.out[0]["error"]["type"] == "CommandSyntaxError" and "no lease ages" in run.out[0]["error"]["message"]

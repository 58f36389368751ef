"""Every cross-record check: a real dump of the busy cache, corrupted by hand, loads and `revalidate` names the ids.

The busy dump (tests/dump/conftest.py) is at epoch 1 with live leases 7-9
(lock receipt 2: full, swa, mamba) and 10-12 (backup ticket 2 at node 5,
owner ``backup#2@5``), held jobs for tickets 1 (quarantined by the reset,
generation 0) and 2, and ledger counters acquired 12, released 3, revoked 3,
live 6, leaked 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.dump.conftest import Busy
from unicache.dump import CrashDump, capture, parse_dump

Doc = dict[str, Any]


@pytest.fixture
def doc(busy: Busy) -> Doc:
    d: Doc = capture(busy.cache, seed=1, step=2)
    return d


def _findings(doc: Doc) -> list[tuple[str, str]]:
    return [(v.kind, v.detail) for v in parse_dump(json.dumps(doc), source="mem").revalidate()]


def _node(doc: Doc, node_id: int) -> Doc:
    found: Doc = next(n for n in doc["tree"]["nodes"] if n["id"] == node_id)
    return found


def _lease(doc: Doc, lease_id: int) -> Doc:
    found: Doc = next(x for x in doc["leases"] if x["id"] == lease_id)
    return found


def _event(doc: Doc, kind: str, lease_id: int) -> Doc:
    found: Doc = next(e for e in doc["events"] if e["kind"] == kind and e["lease"] == lease_id)
    return found


def test_a_real_dump_is_consistent(doc: Doc) -> None:
    dump = CrashDump.from_json(json.loads(json.dumps(doc)))
    assert dump.revalidate() == []
    assert [t.id for t in dump.tickets] == [2] and sorted(dump.leases) == [7, 8, 9, 10, 11, 12]
    assert dump.transfer is not None and dump.epoch == 1
    assert [(j.ticket, j.generation) for j in dump.transfer.jobs] == [(1, 0), (2, 1)]


def _ticket_lease_missing(d: Doc) -> None:
    d["tickets"][0]["leases"]["full"] = 99


def _ticket_node_missing(d: Doc) -> None:
    d["tickets"][0]["node"] = 77


def _ticket_lease_of_other_component(d: Doc) -> None:
    d["tickets"][0]["leases"]["full"] = 11


def _ticket_lease_of_other_owner(d: Doc) -> None:
    d["tickets"][0]["leases"]["full"] = 7


def _ticket_owner(d: Doc) -> None:
    d["tickets"][0]["owner"] = "backup#3@5"


def _ticket_generation(d: Doc) -> None:
    d["tickets"][0]["generation"] = 0


def _ticket_quarantined(d: Doc) -> None:
    d["quarantine"][0]["ticket"] = 2


def _job_unknown_ticket(d: Doc) -> None:
    d["transfer"]["jobs"][0]["ticket"] = 42


def _job_kind(d: Doc) -> None:
    d["transfer"]["jobs"][1]["kind"] = "load_back"


def _pending(d: Doc) -> None:
    d["transfer"]["pending"] = 1


def _quarantine_generation(d: Doc) -> None:
    d["quarantine"][0]["generation"] = 5
    d["transfer"]["jobs"][0]["generation"] = 5


def _live_count(d: Doc) -> None:
    d["ledger"]["counters"]["live"] = 5
    d["ledger"]["counters"]["released"] = 4


def _released(d: Doc) -> None:
    d["ledger"]["counters"]["released"] = 4


def _leaked_count(d: Doc) -> None:
    d["ledger"]["counters"]["leaked"] = 1


def _stale(d: Doc) -> None:
    d["ledger"]["counters"]["stale"] = 4


def _acquired(d: Doc) -> None:
    d["ledger"]["counters"]["acquired"] = 11
    d["ledger"]["counters"]["released"] = 2


def _leak(lease_id: int, generation: int) -> Callable[[Doc], None]:
    def corrupt(d: Doc) -> None:
        d["ledger"]["leaks"] = [{"id": lease_id, "component": "Full", "owner": "lock#2", "generation": generation,
                                 "site": None}]
        d["ledger"]["counters"]["leaked"] = 1
    return corrupt


def _ledger_epoch(d: Doc) -> None:
    d["ledger"]["epoch"] = 2


def _ledger_name(d: Doc) -> None:
    d["ledger"]["name"] = "other"


def _lease_generation(d: Doc) -> None:
    _lease(d, 7)["generation"] = 0
    _event(d, "acquire", 7)["generation"] = 0


def _lease_scope(d: Doc) -> None:
    _lease(d, 8)["scope"] = [4]


def _pin_repeated(d: Doc) -> None:
    _node(d, 5)["components"]["full"]["pins"] = [7, 10, 7]


def _lease_nodes(d: Doc) -> None:
    _lease(d, 8)["nodes"] = [5]


def _lease_of_a_ticket_not_live(d: Doc) -> None:
    _lease(d, 7)["owner"] = _event(d, "acquire", 7)["owner"] = "load_back#9@5"


def _receipt_with_two_full_leases(d: Doc) -> None:
    _lease(d, 10)["owner"] = _event(d, "acquire", 10)["owner"] = "lock#2"


def _pool_quarantined(d: Doc) -> None:
    d["pools"]["full.device"]["quarantined"] = 3


def _pool_used(d: Doc) -> None:
    d["pools"]["full.device"].update(used=5, free=27)


def _copy_into_quarantine(d: Doc) -> None:
    d["tickets"][0]["copies"][0]["dst"] = [0, 1]


def _components_not_configured(d: Doc) -> None:
    d["config"]["swa_window"] = None


def _pool_capacity(d: Doc) -> None:
    d["config"]["device_tokens"] = 64


def _event_order(d: Doc) -> None:
    d["events"][1]["seq"] = 1


def _event_step(d: Doc) -> None:
    d["events"][0]["step"] = 5


def _event_generation(d: Doc) -> None:
    d["events"][0]["generation"] = 9


def _event_ends_a_live_lease(d: Doc) -> None:
    _event(d, "acquire", 7)["kind"] = "release"


def _event_acquires_differently(d: Doc) -> None:
    _event(d, "acquire", 9)["component"] = "full"


def _node_span(d: Doc) -> None:
    _node(d, 5).update(start=5, end=7)


def _root_span(d: Doc) -> None:
    _node(d, 3).update(start=1, end=1)


def _sanity_record(d: Doc) -> None:
    d["sanity"] = {"ok": True, "violations": [{"kind": "pins", "node": 5, "component": "full", "lease": 7,
                                               "detail": "pin set differs from the lease's scope"}]}


CASES: list[tuple[Callable[[Doc], None], list[tuple[str, str]]]] = [
    (_ticket_lease_missing, [
        ("ticket-lease", "ticket 2 holds full lease 99, which is not among the live leases"),
        ("lease-ticket", "lease 10 is owned by ticket 2 ('backup#2@5'), which does not hold it")]),
    (_ticket_node_missing, [("ticket-node", "ticket 2 (backup) is anchored at node 77, which is not in the tree")]),
    (_ticket_lease_of_other_component, [
        ("ticket-lease", "ticket 2 holds lease 11 as its full lease, but it is a swa lease"),
        ("lease-ticket", "lease 10 is owned by ticket 2 ('backup#2@5'), which does not hold it")]),
    (_ticket_lease_of_other_owner, [
        ("ticket-lease", "ticket 2 (owner 'backup#2@5') holds lease 7, whose owner is 'lock#2'"),
        ("lease-ticket", "lease 10 is owned by ticket 2 ('backup#2@5'), which does not hold it")]),
    (_ticket_owner, [
        ("ticket-owner", "ticket 2 (backup) has owner 'backup#3@5', which does not name it"),
        ("ticket-lease", "ticket 2 (owner 'backup#3@5') holds lease 10, whose owner is 'backup#2@5'"),
        ("ticket-lease", "ticket 2 (owner 'backup#3@5') holds lease 11, whose owner is 'backup#2@5'"),
        ("ticket-lease", "ticket 2 (owner 'backup#3@5') holds lease 12, whose owner is 'backup#2@5'")]),
    (_ticket_generation, [
        ("ticket-generation", "ticket 2 is of generation 0, but live tickets are of the dump's epoch 1"),
        ("job-ticket", "the held job for ticket 2 is a backup of generation 1, but the ticket is a backup of "
                       "generation 0")]),
    (_ticket_quarantined, [
        ("ticket-quarantined", "ticket 2 is both live and in the quarantine"),
        ("job-ticket", "the transfer engine holds a backup job for ticket 1, which is neither live nor quarantined")]),
    (_job_unknown_ticket, [
        ("job-ticket", "the transfer engine holds a backup job for ticket 42, which is neither live nor "
                       "quarantined")]),
    (_job_kind, [
        ("job-ticket", "the held job for ticket 2 is a load_back of generation 1, but the ticket is a backup of "
                       "generation 1")]),
    (_pending, [
        ("transfer-pending", "the transfer engine counts 1 pending job(s) or ack(s) but lists 2 held job(s) "
                             "(tickets 1, 2)")]),
    (_quarantine_generation, [
        ("quarantine-generation", "quarantined ticket 1 is of generation 5, after the dump's epoch 1")]),
    (_live_count, [
        ("ledger-live", "the ledger counts 5 live lease(s) but the dump lists 6 (leases 7, 8, 9, 10, 11, 12)")]),
    (_released, [("ledger-counts", "acquired 12 is not released 4 + live 6 + revoked 3 + at most leaked 0")]),
    (_leaked_count, [("ledger-leaks", "the ledger counts 1 leak(s) but lists 0 (none)")]),
    (_stale, [("ledger-counts", "4 stale release(s) but only 3 lease(s) were ever revoked")]),
    (_acquired, [
        ("lease-id", "lease 12 has an id above the 11 leases the ledger issued"),
        ("lease-id", "event 19 names lease 12, above the 11 leases the ledger issued")]),
    (_leak(7, 1), [("leak-live", "lease 7 is listed both as leaked and as live")]),
    (_leak(5, 4), [("leak-generation", "leaked lease 5 is of generation 4, after the dump's epoch 1")]),
    (_leak(13, 1), [("lease-id", "leaked lease 13 has an id above the 12 leases the ledger issued")]),
    (_ledger_epoch, [
        ("ledger-epoch", "the ledger is at epoch 2 but the dump records epoch 1"),
        ("ledger-epoch", "the ledger's epoch counter is 1 but its epoch is 2")]),
    (_ledger_name, [("ledger-name", "the ledger is named 'other' but the configuration names 'unicache'")]),
    (_lease_generation, [
        ("lease-generation", "lease 7 is of generation 0, but live leases are of the dump's epoch 1")]),
    (_lease_scope, [("lease-scope", "lease 8 records scope [4] but is held by the pin sets of [4, 5]")]),
    (_pin_repeated, [("pin-repeated", "node 5: the full pin set lists lease 7 more than once")]),
    (_lease_nodes, [("lease-nodes", "lease 8 lists nodes [5] but is held by the pin sets of [4, 5]")]),
    (_lease_of_a_ticket_not_live, [
        ("lease-ticket", "lease 7 is owned by 'load_back#9@5', but ticket 9 is not live")]),
    (_receipt_with_two_full_leases, [
        ("receipt-leases", "lock receipt 2 (lock#2) holds two full leases, 7 and 10"),
        ("ticket-lease", "ticket 2 (owner 'backup#2@5') holds lease 10, whose owner is 'lock#2'")]),
    (_pool_quarantined, [
        ("pool-quarantined", "pool full.device counts 3 quarantined row(s) but the quarantine lists 4")]),
    (_pool_used, [
        ("pool-used", "pool full.device counts 5 used row(s) but nodes, copies and the quarantine hold 10")]),
    (_copy_into_quarantine, [
        ("copy-destination", "ticket 2 copies into full.host row 0, which the quarantine of ticket 1 holds"),
        ("copy-destination", "ticket 2 copies into full.host row 1, which the quarantine of ticket 1 holds")]),
    (_components_not_configured, [
        ("config-components", "the dump enables full, swa, mamba but its configuration enables full, mamba")]),
    (_pool_capacity, [
        ("pool-capacity", "pool full.device has 32 rows but the configuration gives it 64"),
        ("pool-capacity", "pool swa.device has 32 rows but the configuration gives it 64")]),
    (_event_order, [("event-order", "event 1 follows event 1: sequence numbers must increase")]),
    (_event_step, [("event-step", "event 1 is at step 5, after the ledger's step 0")]),
    (_event_generation, [("event-generation", "event 1 is of generation 9, after the dump's epoch 1")]),
    (_event_ends_a_live_lease, [
        ("event-lease", "event 14 (release) ended lease 7, which the dump lists as live")]),
    (_event_acquires_differently, [
        ("event-lease", "event 16 acquired lease 9 as full for 'lock#2' at generation 1, but the live lease is "
                        "mamba for 'lock#2' at generation 1")]),
    (_node_span, [("node-span", "node 5 starts at token 5 but its parent 4 ends at 4")]),
    (_root_span, [
        ("node-span", "root node 3 starts at 1, not 0"),
        ("node-span", "node 4 starts at token 0 but its parent 3 ends at 1")]),
    (_sanity_record, [("sanity-record", "the recorded sanity check says ok=True with 1 violation(s)")]),
]


@pytest.mark.parametrize(("corrupt", "expected"), CASES, ids=[c.__name__.strip("_") for c, _ in CASES])
def test_each_inconsistency_is_found_with_its_ids(doc: Doc, corrupt: Callable[[Doc], None],
                                                  expected: list[tuple[str, str]]) -> None:
    assert _findings(doc) == []
    corrupt(doc)
    assert _findings(doc) == expected


def test_checks_on_a_section_the_writer_could_not_capture_are_skipped(doc: Doc) -> None:
    """A failed section is a placeholder (`capture_errors`): its counts and lists are not compared."""
    doc["ledger"]["counters"]["live"] = 5
    doc["transfer"]["jobs"][0]["ticket"] = 42
    assert [k for k, _ in _findings(doc)] == ["job-ticket", "ledger-live", "ledger-counts"]
    doc["capture_errors"] = [{"section": "leases", "type": "RuntimeError", "message": "ledger corrupt"},
                             {"section": "quarantine", "type": "RuntimeError", "message": "table corrupt"}]
    assert _findings(doc) == []

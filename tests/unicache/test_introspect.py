"""Snapshots for dumps and the REPL are complete and JSON-serializable."""

from __future__ import annotations

import json

from tests.unicache.conftest import MakeCache
from tests.unicache.support import chain
from unicache import Full

SEQ = list(range(400, 408))


def test_dump_state_round_trips_through_json(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, swa_window=4)
    a, b = chain(cache, d, SEQ, [4, 8])
    cache.backup(b)
    d.settle()
    cache.evict_device(Full, 4)
    t = cache.load_back(b)
    assert t is not None
    info = cache.node_info(b)
    assert info.components["Full"].host is not None
    assert sorted(info.components["Full"].pins) == sorted(
        [t.full.id] if t.full is not None else []
    )
    tickets = cache.tickets()
    assert [x.id for x in tickets] == [t.id] and tickets[0].kind == "load_back"
    scopes = cache.lease_coverage()
    assert t.full is not None and scopes[t.full.id][2] == [b.id, a.id]
    state = cache.dump_state()
    text = json.dumps(state)
    assert f'"load_back#{t.id}@{b.id}"' in text
    nodes = state["nodes"]
    assert isinstance(nodes, list)
    assert {n["id"] for n in nodes} == {cache.root.id, a.id, b.id}
    cache.reset()
    q = cache.quarantine()
    assert q and q[0].ticket_id == t.id and q[0].slots["full.device"]
    json.dumps([x.to_json() for x in q])
    d.settle()
    assert t.result().status.value == "stale"
    assert cache.node(cache.root.id) is cache.root

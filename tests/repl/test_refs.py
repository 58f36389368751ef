"""Token lists and names: parsing, compact printing, and resolving a token path without splitting."""

from __future__ import annotations

import pytest

from unicache.dump import CrashDump
from unicache.repl.errors import CommandSyntaxError, UnknownNameError
from unicache.repl.refs import (
    NodeRef,
    format_tokens,
    parse_lease,
    parse_node,
    parse_receipt,
    parse_ticket,
    parse_tokens,
    resolve_node,
)


def test_parse_tokens() -> None:
    assert parse_tokens(["1..4", "7,9", "3"]) == [1, 2, 3, 4, 7, 9, 3]
    assert parse_tokens(["5..5,", ","]) == [5]
    for bad in (["x"], ["3..1"], ["-2"], ["1...3"]):
        with pytest.raises(CommandSyntaxError):
            parse_tokens(bad)


def test_format_tokens_round_trips() -> None:
    tokens = [1, 2, 3, 4, 9, 10, 20, 21, 22, 7]
    text = format_tokens(tokens)
    assert text == "1..4,9,10,20..22,7"
    assert parse_tokens([text]) == tokens
    assert format_tokens(list(range(0, 100, 2)), limit=3).endswith("(50 tokens)")


def test_parse_names() -> None:
    assert parse_node("#12") == NodeRef("#12", id=12)
    assert parse_node("12") == NodeRef("12", id=12)
    assert parse_node("t:1..3") == NodeRef("t:1..3", tokens=(1, 2, 3))
    assert parse_node("root") == NodeRef("root", tokens=())
    assert parse_node("@anchor") == NodeRef("@anchor", alias="anchor")
    assert (parse_lease("L7"), parse_lease("7"), parse_ticket("T3"), parse_receipt("R2")) == (7, 7, 3, 2)
    for fn, bad in ((parse_node, "x1"), (parse_lease, "Lx"), (parse_ticket, "T-1")):
        with pytest.raises(CommandSyntaxError):
            fn(bad)


def _view(page_size_two: bool = False) -> CrashDump:
    def node(nid: int, parent: int | None, start: int, key: list[int], children: list[int]) -> dict[str, object]:
        return {"id": nid, "parent": parent, "start": start, "end": start + len(key), "key": key,
                "children": children, "last_access": 0, "hits": 0,
                "components": {"full": {"device": [], "host": None, "pins": []}}}

    # two children share their first token: only a whole-edge comparison tells them apart
    nodes = [node(1, None, 0, [], [2, 3]), node(2, 1, 0, [5, 6], [4]), node(3, 1, 0, [5, 7], []),
             node(4, 2, 2, [8, 9], [])]
    doc = {
        "format": "unicache-crash-dump", "version": 1, "created_at": "now", "producer": {}, "error": None,
        "seed": None, "step": None, "config": {}, "components": ["full"], "epoch": 0,
        "tree": {"root": 1, "nodes": nodes}, "pools": {}, "leases": [],
        "ledger": {"name": "t", "epoch": 0, "step": 0, "counters": {}, "leaks": []}, "tickets": [],
        "transfer": None, "quarantine": [], "events": [], "counters": {}, "sanity": None, "extra": {},
        "capture_errors": [],
    }
    return CrashDump.from_json(doc)  # type: ignore[arg-type]


def test_resolve_paths_and_aliases() -> None:
    view = _view()
    assert resolve_node(view, parse_node("t:5,7"), {}) == 3
    assert resolve_node(view, parse_node("t:5,6,8,9"), {}) == 4
    assert resolve_node(view, parse_node("root"), {}) == 1
    assert resolve_node(view, parse_node("@last"), {"last": 4}) == 4
    with pytest.raises(UnknownNameError, match="ends inside node #4"):
        resolve_node(view, parse_node("t:5,6,8"), {})
    with pytest.raises(UnknownNameError, match="no edge for token 1"):
        resolve_node(view, parse_node("t:1"), {})
    with pytest.raises(UnknownNameError, match="no longer in the tree"):
        resolve_node(view, parse_node("@last"), {"last": 40})
    with pytest.raises(UnknownNameError, match="defined: @last"):
        resolve_node(view, parse_node("@anchor"), {"last": 4})

"""Dump validation: every malformed document is refused with a typed error naming the JSON path."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.dump.conftest import Busy
from unicache.dump import CrashDump, DumpError, DumpFormatError, DumpVersionError, capture

Doc = dict[str, Any]


@pytest.fixture
def doc(busy: Busy) -> Doc:
    d: Doc = capture(busy.cache, seed=1, step=2)
    assert d["tree"]["nodes"][2]["components"]["full"]["pins"], "the fixture pins node 3 (lock + backup)"
    return d


def _set(path: str, value: object) -> Callable[[Doc], None]:
    def mutate(d: Doc) -> None:
        *head, last = path.split(".")
        target: Any = d
        for part in head:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


def _delete(path: str) -> Callable[[Doc], None]:
    def mutate(d: Doc) -> None:
        *head, last = path.split(".")
        target: Any = d
        for part in head:
            target = target[int(part)] if isinstance(target, list) else target[part]
        del target[last]

    return mutate


def _swap_first_nodes(d: Doc) -> None:
    nodes = d["tree"]["nodes"]
    nodes[1], nodes[2] = nodes[2], nodes[1]


def _extra_child(d: Doc) -> None:
    d["tree"]["nodes"][0]["children"].append(4242)


def _drop_pool_field(d: Doc) -> None:
    del d["pools"]["full.device"]["free"]


def _duplicate_node(d: Doc) -> None:
    d["tree"]["nodes"].append(copy.deepcopy(d["tree"]["nodes"][-1]))


def _duplicate_lease(d: Doc) -> None:
    d["leases"].append(copy.deepcopy(d["leases"][-1]))


CASES: list[tuple[str, Callable[[Doc], None], str, str]] = [
    ("missing section", _delete("tree"), "tree", "missing"),
    ("unknown field", _set("surprise", 1), "surprise", "unknown field"),
    ("string key", _set("tree.nodes.1.key", "1234"), "tree.nodes[1].key", "expected a list of ints"),
    ("bool as int", _set("epoch", True), "epoch", "expected an int, got a bool"),
    ("negative epoch", _set("epoch", -1), "epoch", ">= 0"),
    ("key length", _set("tree.nodes.1.end", 99), "tree.nodes[1].key", "spans"),
    ("dangling parent", _set("tree.nodes.1.parent", 4242), "tree.nodes[1].parent", "parent 4242 is not in the tree"),
    ("unknown child", _extra_child, "tree.nodes[0].children", "child 4242"),
    ("root missing", _set("tree.root", 4242), "tree.root", "not among tree.nodes"),
    ("order", _swap_first_nodes, "tree.nodes[1]", "comes before its parent"),
    ("duplicate node", _duplicate_node, "tree.nodes[3].id", "duplicate node id"),
    ("duplicate lease", _duplicate_lease, "leases[6].id", "duplicate lease id 12"),
    ("node component not enabled", _set("components", ["full", "swa"]), "tree.nodes[0].components",
     "node 3: component 'mamba' is not enabled"),
    ("pin without lease", _set("tree.nodes.2.components.full.pins", [4242]), "tree.nodes[2].components.full.pins",
     "lease 4242, which is not among the live leases"),
    ("mamba slots as list", _set("tree.nodes.2.components.mamba.device", [1]),
     "tree.nodes[2].components.mamba.device", "expected an int"),
    ("unknown component", _set("tree.nodes.2.components.gpu", {}), "tree.nodes[2].components.gpu",
     "unknown component"),
    ("event kind", _set("events.0.kind", "explode"), "events[0].kind", "unknown event kind 'explode'"),
    ("event node type", _set("events.0.nodes", [1.5]), "events[0].nodes[0]", "expected an int or a string"),
    ("lease field", _set("leases.0.generation", "0"), "leases[0].generation", "expected an int, got a string"),
    ("ticket leases", _set("tickets.0.leases", {"full": None}), "tickets[0].leases.full", "expected an int"),
    ("pool", _drop_pool_field, "pools.full.device.free", "missing"),
]


@pytest.mark.parametrize(("mutate", "where", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_format_errors_name_the_path(doc: Doc, mutate: Callable[[Doc], None], where: str, message: str) -> None:
    mutate(doc)
    with pytest.raises(DumpFormatError) as info:
        CrashDump.from_json(doc)
    assert info.value.where == where
    assert message in str(info.value)


def test_pin_in_the_wrong_component(doc: Doc) -> None:
    node = doc["tree"]["nodes"][2]["components"]
    node["mamba"]["pins"] = node["mamba"]["pins"] + node["full"]["pins"][:1]
    with pytest.raises(DumpFormatError, match="mamba pin set holds lease .* of component full"):
        CrashDump.from_json(doc)


@pytest.mark.parametrize(("value", "found"), [([], None), ({"format": "other"}, "other"), ({"version": 2}, 2),
                                              ({"version": "1"}, "1"), ({"version": True}, True)])
def test_version_and_format_tag(doc: Doc, value: object, found: object) -> None:
    bad: object = {**doc, **value} if isinstance(value, dict) else value
    with pytest.raises(DumpVersionError) as info:
        CrashDump.from_json(bad)  # type: ignore[arg-type]
    assert info.value.supported == 1 and info.value.found == found
    assert isinstance(info.value, DumpError)


def test_round_trip_is_exact(doc: Doc) -> None:
    original = copy.deepcopy(doc)
    assert CrashDump.from_json(doc).to_json() == original
    assert doc == original

"""A fuzzer over the dump loader: any mutation of a real dump is loaded or refused with a `DumpError`, never
another exception; what loads re-validates and round-trips."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dump.conftest import busy_cache
from unicache.dump import CrashDump, DumpError, capture, parse_dump

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                       max_leaves=6)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    with busy_cache() as b:
        doc: dict[str, Any] = capture(b.cache, seed=1, step=2)
    return doc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_dumps_load_or_fail_typed(document: dict[str, Any], data: st.DataObject) -> None:
    doc = copy.deepcopy(document)
    paths = _paths(doc)[1:]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        parent: Any = doc
        try:
            for part in path[:-1]:
                parent = parent[part]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent[path[-1]] = data.draw(_VALUES)
        except (KeyError, IndexError, TypeError):
            continue
    text = json.dumps(doc)
    try:
        dump = parse_dump(text, source="fuzz")
    except DumpError:
        return
    assert isinstance(dump.revalidate(), list)
    assert CrashDump.from_json(dump.to_json()).to_json() == dump.to_json()

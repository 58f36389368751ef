"""The canonical form merges states that differ only in ids, and keeps apart states that behave differently."""

from __future__ import annotations

from unicache.explore.canonical import Form, canonical_form
from unicache.explore.replay import replay
from unicache.explore.scope import Scope


def _form(scope: Scope, *lines: str) -> tuple[Form, list[int], int]:
    """The canonical form after `lines`, the node ids and the epoch."""
    form, ids, epoch, _ = _state(scope, *lines)
    return form, ids, epoch


def _state(scope: Scope, *lines: str) -> tuple[Form, list[int], int, list[int]]:
    r = replay(scope, lines)
    try:
        return canonical_form(r), [n.id for n in r.cache.nodes()], r.cache.epoch, [t.id for t in r.cache.tickets()]
    finally:
        assert r.close() is None


def test_states_that_differ_only_in_ids_merge() -> None:
    scope = Scope()
    a, ids_a, epoch_a = _form(scope, "insert 1,2")
    b, ids_b, epoch_b = _form(scope, "insert 1,3", "reset", "insert 1,2")
    assert ids_a != ids_b and epoch_a != epoch_b
    assert a == b


def test_tickets_and_slots_are_renamed() -> None:
    """The same backup in flight, reached with different ticket ids and different raw slots."""
    scope = Scope(components=("full",))
    a, ids_a, _, tickets_a = _state(scope, "insert 1,2", "backup t:1,2", "ack T1 --fail", "backup t:1,2")
    b, ids_b, _, tickets_b = _state(scope, "insert 1,3", "reset", "insert 1,2", "backup t:1,2", "ack T1 --fail",
                                    "backup t:1,2", "ack T2 --fail", "backup t:1,2")
    assert (tickets_a, tickets_b) == ([2], [3]) and ids_a != ids_b
    assert a == b
    assert _form(scope, "insert 1,2", "backup t:1,2", "ack T1 --fail")[0] != a


def test_states_that_behave_differently_stay_apart() -> None:
    scope = Scope()
    base, _, _ = _form(scope, "insert 1,2")
    assert _form(scope, "insert 1,2", "lock t:1,2")[0] != base
    assert _form(scope, "insert 1,2", "backup t:1,2")[0] != base
    assert _form(scope, "insert 1,2", "refuse-alloc full device 1")[0] != base
    assert _form(scope, "insert 1,3")[0] != base
    in_flight, _, _ = _form(scope, "insert 1,2", "backup t:1,2")
    stale, _, _ = _form(scope, "insert 1,2", "backup t:1,2", "reset")
    assert stale != in_flight and stale != _form(scope)[0]


def test_lru_order_is_part_of_the_form() -> None:
    scope = Scope(components=("full",), device_tokens=4)
    a, _, _ = _form(scope, "insert 1,2", "insert 1,3")
    b, _, _ = _form(scope, "insert 1,3", "insert 1,2")
    assert a != b

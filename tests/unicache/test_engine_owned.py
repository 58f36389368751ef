"""The engine-owned mode of the paged stores: the engine's index values go in, and come back exactly once.

Oracle: every value handed in (insert, load-back, backup) is handed back
exactly once over the run, never while a lease pins the node's tier, and
the store allocates nothing (its allocators have capacity 0).
"""

from __future__ import annotations

import random
from array import array
from collections import Counter
from typing import final

import pytest

from leases import Lease, LeaseLedger
from leases.state import Held
from unicache.components.full import FullStore
from unicache.errors import PinnedValuesError
from unicache.markers import Full
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree


@final
class FullHost:
    """Marker of the host pins in these tests."""


def _tree(ps: int) -> tuple[RadixTree, FullStore]:
    store = FullStore.engine_owned(ps, FullHost)
    tree = RadixTree(ps, token_bytes=8)
    tree.register(Full, store)
    return tree, store


def _key(tokens: list[int]) -> bytes:
    return array("q", tokens).tobytes()


def test_the_engine_owned_store_allocates_nothing() -> None:
    _, store = _tree(4)
    assert store.device.capacity == 0 and store.host.capacity == 0
    assert store.device.alloc(1) is None and store.host.alloc_compact(1) is None
    assert store.handed is not None and store.values_per_page == 4


@pytest.mark.parametrize("ps", [1, 4])
def test_values_come_back_as_handed_in_through_a_split(ps: int) -> None:
    tree, store = _tree(ps)
    handed = store.handed
    assert handed is not None
    leaf = tree.add_leaf(tree.root, _key(list(range(4 * ps))))
    values = [1000 + 7 * i for i in range(4 * ps)]
    store.adopt_device(leaf, list(values))
    store.set_host(leaf, array("i", [50 + i for i in range(4 * ps)]))
    upper = tree.split(leaf, ps)  # a split cuts the values at the token, not at the page
    assert store.device_slots(upper) == values[:ps] and store.device_slots(leaf) == values[ps:]
    assert list(store.host_slots(upper) or ()) == list(range(50, 50 + ps))
    assert store.drop_device(leaf) == 3 * ps
    assert store.drop_device(upper) == ps
    assert handed.take_device() == [values[ps:], values[:ps]]
    assert handed.take_device() == []
    store.drop_host(leaf)
    store.drop_host(upper)
    assert [list(h) for h in handed.take_host()] == [
        list(range(50 + ps, 50 + 4 * ps)), list(range(50, 50 + ps))]


def test_a_duplicate_copy_is_handed_back_not_kept() -> None:
    tree, store = _tree(1)
    handed = store.handed
    assert handed is not None
    node = tree.add_leaf(tree.root, _key([1, 2]))
    assert store.adopt_device(node, [10, 11])
    assert not store.adopt_device(node, [20, 21])  # the node keeps its own; the engine gets the copy back
    assert store.device_slots(node) == [10, 11]
    assert handed.take_device() == [[20, 21]]


def test_pinned_values_are_refused_before_anything_changes() -> None:
    tree, store = _tree(1)
    handed = store.handed
    assert handed is not None
    ledger = LeaseLedger("t")
    node = tree.add_leaf(tree.root, _key([5, 6, 7]))
    store.adopt_device(node, [1, 2, 3])
    store.set_host(node, array("i", [4, 5, 6]))
    dev_lease = ledger.acquire(Full, owner="lock", pins=(store.pin_set(node),))
    host_lease = ledger.acquire(FullHost, owner="host lock", pins=(handed.host_pin_set(node),))
    with pytest.raises(PinnedValuesError, match=rf"Full device values of node {node.id} .*\[{dev_lease.id}\]"):
        store.drop_device(node)
    with pytest.raises(PinnedValuesError, match=rf"Full host values of node {node.id} .*\[{host_lease.id}\]"):
        store.drop_host(node)
    assert store.device_slots(node) == [1, 2, 3] and list(store.host_slots(node) or ()) == [4, 5, 6]
    assert handed.take_device() == [] and handed.take_host() == []
    dev_lease.release()
    host_lease.release()
    store.drop_device(node)
    store.drop_host(node)
    assert handed.take_device() == [[1, 2, 3]]
    assert [list(h) for h in handed.take_host()] == [[4, 5, 6]]


@pytest.mark.parametrize("seed", range(6))
def test_random_runs_hand_back_every_value_exactly_once_and_never_while_pinned(seed: int) -> None:
    """Random inserts (with splits), backups, pins and drops; at the end everything is dropped."""
    rng = random.Random(seed)
    ps = rng.choice([1, 2, 4])
    tree, store = _tree(ps)
    handed = store.handed
    assert handed is not None
    ledger = LeaseLedger("t")
    fresh = iter(range(1, 1 << 30))
    handed_in: Counter[tuple[str, int]] = Counter()
    handed_back: Counter[tuple[str, int]] = Counter()
    held: dict[int, tuple[Lease[Full, Held] | Lease[FullHost, Held], str, Node]] = {}

    def alive_nodes() -> list[Node]:
        return [x for x in tree if x.parent is not None]

    def drain() -> None:
        for vals in handed.take_device():
            handed_back.update(("d", v) for v in vals)
        for hvals in handed.take_host():
            handed_back.update(("h", v) for v in hvals)

    for _ in range(300):
        op = rng.random()
        nodes = alive_nodes()
        if op < 0.3 or not nodes:
            tokens = [rng.randrange(3) for _ in range(ps * rng.randint(1, 4))]
            node, pos, _path = tree.walk(_key(tokens), len(tokens))
            if pos < len(tokens) and store.on_device(node):
                leaf = tree.add_leaf(node, _key(tokens[pos:]))
                vals = [next(fresh) for _ in range(len(tokens) - pos)]
                handed_in.update(("d", v) for v in vals)
                store.adopt_device(leaf, vals)
        elif op < 0.45:
            x = rng.choice(nodes)
            if store.on_device(x) and not store.on_host(x):
                hvals = array("i", [next(fresh) for _ in range(x.end - x.start)])
                handed_in.update(("h", v) for v in hvals)
                store.set_host(x, hvals)
        elif op < 0.6:
            x = rng.choice(nodes)
            if store.on_host(x) and rng.random() < 0.5:
                held[next(fresh)] = (ledger.acquire(FullHost, owner="h", pins=(handed.host_pin_set(x),)), "h", x)
            elif store.on_device(x):
                held[next(fresh)] = (ledger.acquire(Full, owner="d", pins=(store.pin_set(x),)), "d", x)
        elif op < 0.75 and held:
            key = rng.choice(sorted(held))
            lease, _, _ = held.pop(key)
            lease.release()
        else:
            x = rng.choice(nodes)
            pinned_dev = bool(store.pins(x))
            pinned_host = bool(handed.host_pins(x))
            if store.on_device(x) and x.dev_children == 0:
                if pinned_dev:
                    with pytest.raises(PinnedValuesError):
                        store.drop_device(x)
                    assert store.on_device(x)
                else:
                    store.drop_device(x)
            elif store.on_host(x) and not store.on_device(x):
                if pinned_host:
                    with pytest.raises(PinnedValuesError):
                        store.drop_host(x)
                    assert store.on_host(x)
                else:
                    store.drop_host(x)
                    if not x.children and not store.on_device(x):
                        tree.remove_leaf(x)
        drain()
        still_held = [("d", v) for col in store.dev for v in col or ()]
        still_held += [("h", v) for hcol in store.host_col for v in hcol or ()]
        for item in still_held:
            assert handed_back[item] == 0, f"value {item} handed back while still held"

    for lease, _, _ in held.values():
        lease.release()
    for x in sorted(alive_nodes(), key=lambda n: -n.end):
        if store.on_device(x):
            store.drop_device(x)
        if store.on_host(x):
            store.drop_host(x)
    drain()
    assert handed_back == handed_in
    assert max(handed_back.values(), default=1) == 1
    assert store.device.used_count == 0 and store.host.used_count == 0
    assert ledger.live_count == 0

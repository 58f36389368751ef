"""The eviction queues: least recently used first, deeper first on ties, lazy re-sorting; all pop as `TupleLRU`."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unicache.tree import Node, RadixTree, encode_tokens
from unicache.tree.lru import COMPILED, FIELD_BITS, EvictionQueue, HeapqLRU, LazyLRU, TupleLRU, new_lru


QUEUES = pytest.mark.parametrize("queue", [LazyLRU, HeapqLRU, TupleLRU])


@QUEUES
def test_order_ties_and_lazy_touch(queue: type[EvictionQueue]) -> None:
    t = RadixTree(1)
    a = t.add_leaf(t.root, encode_tokens([1, 2], 4))
    b = t.add_leaf(a, encode_tokens([3], 4))
    c = t.add_leaf(t.root, encode_tokens([9], 4))
    for x, clk in ((a, 5), (b, 5), (c, 3)):
        x.last_access = clk
    lru = queue(1)
    for x in (a, b, c):
        lru.push(x)
    lru.push(a)
    assert len(lru) == 3
    c.last_access = 9  # touched after being pushed
    assert lru.pop() is b  # tie with a at 5: deeper first
    assert lru.pop() is a
    assert lru.pop() is c and c.lru == 0
    assert lru.pop() is None
    lru.push(c)
    lru.discard_all()
    assert c.lru == 0 and len(lru) == 0


@QUEUES
def test_ties_on_time_and_depth_go_to_the_older_id(queue: type[EvictionQueue]) -> None:
    t = RadixTree(1)
    xs = [t.add_leaf(t.root, encode_tokens([i], 4)) for i in range(20)]
    lru = queue(1)
    for x in reversed(xs):
        x.last_access = 7
        lru.push(x)
    assert [lru.pop() for _ in xs] == xs


def test_each_build_gets_its_queue() -> None:
    """Compiled: the 8-ary `LazyLRU`; interpreted: `HeapqLRU` (see `unicache.tree.lru`)."""
    assert COMPILED == (os.environ.get("UNICACHE_BUILD") == "compiled")
    assert type(new_lru(1)) is (LazyLRU if COMPILED else HeapqLRU)


def _forest(rng_ends: list[int]) -> list[Node]:
    """Nodes at several depths (chains below the root), so `end` ties and differs."""
    t = RadixTree(1)
    nodes: list[Node] = []
    parent = t.root
    for i, depth in enumerate(rng_ends):
        if depth == 0 or not nodes:
            parent = t.root
        x = t.add_leaf(parent, encode_tokens([i + 1] * (1 + depth % 3), 4))
        nodes.append(x)
        parent = x
    return nodes


OPS = st.tuples(st.sampled_from(("push", "push", "touch", "pop", "kill", "discard")), st.integers(0, 39),
                st.integers(0, 12))
"""(op, node index, access time or pop count); `discard` is rare: two in a row empty the queues often enough."""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 4), min_size=40, max_size=40), st.lists(st.integers(0, 12), min_size=40, max_size=40),
       st.lists(OPS, max_size=200))
def test_pops_match_the_heapq_reference(depths: list[int], times: list[int], ops: list[tuple[str, int, int]]) -> None:
    """Random pushes, touches (forward and back, so many ties), pops, deaths and resets: same pops, same bits.

    `LazyLRU` and `HeapqLRU` file the same nodes as the reference `TupleLRU`
    (the queue before issue 15's change), each on its own bit; every pop
    must return the same node from all three, and after every step they
    hold the same entries.
    """
    nodes = _forest(depths)
    for x, clk in zip(nodes, times):
        x.last_access = clk
    ref = TupleLRU(1)
    queues: list[EvictionQueue] = [LazyLRU(2), HeapqLRU(4)]
    for op, i, v in ops:
        if op == "push":
            ref.push(nodes[i])
            for q in queues:
                q.push(nodes[i])
        elif op == "touch":
            nodes[i].last_access = v
        elif op == "pop":
            for _ in range(1 + v % 4):
                a = ref.pop()
                for q in queues:
                    b = q.pop()
                    assert a is b, (type(q).__name__, a, b)
        elif op == "kill":
            nodes[i].slot = 0
        elif v < 3:
            ref.discard_all()
            for q in queues:
                q.discard_all()
        want = sorted(e[:3] for e in ref.entries())
        for q in queues:
            assert sorted(e[:3] for e in q.entries()) == want, type(q).__name__
        for x in nodes:
            assert bool(x.lru & 1) == bool(x.lru & 2) == bool(x.lru & 4), x
    while (a := ref.pop()) is not None:
        for q in queues:
            assert q.pop() is a
    for q in queues:
        assert q.pop() is None and len(q) == 0


def test_packed_queue_refuses_ids_past_its_fields() -> None:
    t = RadixTree(1)
    x = t.add_leaf(t.root, encode_tokens([1], 4))
    x.id = 1 << FIELD_BITS
    q = HeapqLRU(1)
    with pytest.raises(OverflowError, match=f"node {x.id}"):
        q.push(x)
    assert x.lru == 0 and len(q) == 0

"""LazyLRU: least recently used first, deeper first on ties, lazy re-sorting."""

from __future__ import annotations

from unicache.tree import RadixTree, encode_tokens
from unicache.tree.lru import LazyLRU


def test_order_ties_and_lazy_touch() -> None:
    t = RadixTree(1)
    a = t.add_leaf(t.root, encode_tokens([1, 2], 4))
    b = t.add_leaf(a, encode_tokens([3], 4))
    c = t.add_leaf(t.root, encode_tokens([9], 4))
    for x, clk in ((a, 5), (b, 5), (c, 3)):
        x.last_access = clk
    lru = LazyLRU(1)
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

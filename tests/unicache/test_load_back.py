"""Load-back: refusal when the device is pinned full."""

from __future__ import annotations

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain
from unicache import Full


def test_load_back_refused_when_device_is_pinned_full(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8)
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.backup(a)
    d.settle()
    cache.evict_device(Full, 4)
    assert d.serve([1, 2, 3, 4]) is not None
    other = cache.match_prefix([1, 2, 3, 4]).device_node
    r = cache.lock(other)
    mine = cache.alloc_device(Full, 4)
    assert mine is not None
    refused = cache.load_back(a)
    assert refused is None
    assert cache.counters.load_backs_refused == 1 and cache.ledger.live_count == 1
    cache.free_device(Full, mine)
    cache.unlock(r)
    t = cache.load_back(a)
    assert t is not None
    d.settle()
    t.result()
    d.assert_ok()

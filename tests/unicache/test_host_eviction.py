"""Host eviction: unpinned host-only leaves go first."""

from __future__ import annotations

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, is_alive
from unicache import Full


def test_host_eviction_takes_unpinned_host_leaves(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_back")
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert cache.evict_device(Full, 8) == 8
    assert cache.evict_host(Full, 1) == 4 and not b.alive and a.alive
    assert cache.evict_host(Full, 1) == 4 and not is_alive(a)
    assert cache.node_count == 1
    d.assert_ok()

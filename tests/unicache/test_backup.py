"""Backups: write-through chains at the hit threshold."""

from __future__ import annotations

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, host_full_of


def test_write_through_backs_up_chain_at_threshold(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_through", write_through_threshold=2)
    res = d.compute(SEQ[:4])
    assert res is not None and cache.in_flight() == 0  # 1 hit < 2
    assert d.serve(SEQ[:8]) is not None  # [0,4) reaches 2 hits
    assert cache.in_flight() == 1
    d.settle()
    a = cache.match_prefix(SEQ[:4]).device_node
    assert host_full_of(a) is not None
    assert d.serve(SEQ[:8]) is not None  # [4,8) reaches 2 hits
    d.settle()
    b = cache.match_prefix(SEQ[:8]).device_node
    assert host_full_of(b) is not None and cache.counters.backups == 2
    d.assert_ok()

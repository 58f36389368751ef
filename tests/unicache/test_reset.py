"""Reset: everything but request-owned slots is dropped."""

from __future__ import annotations

import pytest

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain
from unicache import Full, UnknownNodeError


def test_reset_drops_everything_but_request_slots(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    mine = cache.alloc_device(Full, 2)
    assert mine is not None
    cache.reset()
    assert not a.alive and cache.node_count == 1
    with pytest.raises(UnknownNodeError):
        cache.lock(a)  # lease: ignore[lease-discarded]
    stats = cache.pools.stats()
    assert stats["full.device"].used == 2 and stats["mamba.device"].used == 0
    cache.free_device(Full, mine)
    d.assert_ok()

"""Request-owned slots, path pages and compact host pages."""

from __future__ import annotations

import pytest

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain
from unicache import SWA, Full, InvalidArgumentError, Tier


def test_alloc_device_evicts_on_shortfall(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8, write_policy="write_back")
    chain(cache, d, SEQ[:8], [4, 8])
    got = cache.alloc_device(Full, 6)
    assert got is not None and len(got) == 6
    assert cache.counters.demotions == 2
    assert cache.alloc_device(Full, 3) is None
    cache.free_device(Full, got)
    with pytest.raises(InvalidArgumentError):
        cache.alloc_device(SWA, 1)
    d.assert_ok()


def test_path_pages(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert cache.path_pages(b) == (a.dev_full or []) + (b.dev_full or [])
    assert cache.path_pages(b, SWA) == (a.dev_swa or []) + (b.dev_swa or [])
    with pytest.raises(InvalidArgumentError):
        cache.path_pages(b, Full, Tier.HOST)


def test_host_pages_are_compact_and_read_as_lists(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    assert cache.backup(a) is not None
    d.settle()
    assert a.host_pages is not None and a.host_pages.typecode == "i"
    assert a.host_full == a.host_pages.tolist() and isinstance(a.host_full, list)
    assert a.host_swa is not None and a.host_swa == list(a.host_swa_pages or [])
    assert cache.path_pages(a, Full, Tier.HOST) == a.host_full
    d.assert_ok()

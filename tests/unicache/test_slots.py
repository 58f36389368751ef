"""Request-owned slots, path pages and compact host pages."""

from __future__ import annotations

import pytest

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, residency
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
    assert cache.path_pages(b) == (residency(a).full_device or []) + (residency(b).full_device or [])
    assert cache.path_pages(b, SWA) == (residency(a).swa_device or []) + (residency(b).swa_device or [])
    with pytest.raises(InvalidArgumentError):
        cache.path_pages(b, Full, Tier.HOST)


def test_host_pages_are_compact_and_read_as_lists(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4)
    (a,) = chain(cache, d, SEQ[:4], [4])
    assert cache.backup(a) is not None
    d.settle()
    host = residency(a).full_host_pages
    assert host is not None and host.typecode == "i"
    assert residency(a).full_host == host.tolist() and isinstance(residency(a).full_host, list)
    assert residency(a).swa_host is not None and residency(a).swa_host == list(residency(a).swa_host or [])
    assert cache.path_pages(a, Full, Tier.HOST) == residency(a).full_host
    d.assert_ok()

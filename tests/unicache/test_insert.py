"""Insert: splits, duplicates, un-eviction, argument checks, Mamba donation."""

from __future__ import annotations

import pytest

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, dev_full_of
from unicache import SWA, Full, InvalidArgumentError, InvalidSlotError


def test_insert_split_duplicates_unevict(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    res = d.compute(SEQ[:8])
    assert res is not None and res.new_tokens == 8
    res2 = d.compute(SEQ[:4] + [1, 2, 3, 4])
    assert res2 is not None and res2.new_tokens == 4 and res2.duplicate_pages_freed == 4
    assert cache.counters.splits == 1 and cache.node_count == 4
    res3 = d.compute(SEQ[:8])  # fully cached: every page a duplicate
    assert res3 is not None and res3.new_tokens == 0 and res3.duplicate_pages_freed == 8
    node = res3.node
    cache.backup(node)
    cache.backup(node.parent)  # type: ignore[arg-type]
    d.settle()
    cache.match_prefix(SEQ[:4] + [1, 2, 3, 4])
    assert cache.evict_device(Full, 4) == 4 and dev_full_of(node) is None
    res4 = d.compute(SEQ[:8])
    assert res4 is not None and res4.unevicted_tokens == 4 and dev_full_of(node) is not None
    assert cache.pools.stats()["full.device"].used == 12
    d.assert_ok()


def test_insert_arguments_are_checked(make_cache: MakeCache) -> None:
    cache, d = make_cache(page_size=4, swa_window=4)
    fs = cache.alloc_device(Full, 1)
    ss = cache.alloc_device(SWA, 1)
    assert fs is not None and ss is not None
    with pytest.raises(InvalidArgumentError):
        cache.insert(SEQ[:6], fs, swa_slots=ss)  # not whole pages
    with pytest.raises(InvalidArgumentError):
        cache.insert(SEQ[:8], fs, swa_slots=ss)  # 1 page for 2
    with pytest.raises(InvalidArgumentError):
        cache.insert(SEQ[:4], fs)  # SWA enabled, no SWA pages
    with pytest.raises(InvalidArgumentError):
        cache.insert(SEQ[:4], fs, swa_slots=ss, mamba_slot=0)
    with pytest.raises(InvalidSlotError):
        cache.insert(SEQ[:4], [fs[0] + 1], swa_slots=ss)
    assert cache.lent_slots(Full) == set(fs)  # nothing moved
    cache.free_device(Full, fs)
    cache.free_device(SWA, ss)
    d.assert_ok()


def test_prefix_missing_frees_donated(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    res = d.compute(SEQ[:8], 4)
    assert res is not None and res.prefix_missing
    assert all(s.used == 0 for s in cache.pools.stats().values())
    assert cache.counters.prefix_missing == 1
    d.assert_ok()


def test_mamba_copy_and_duplicate(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, mamba_device_slots=4)
    res = d.compute(SEQ[:4], donate=False)
    assert res is not None and res.mamba == "copied"
    assert cache.pools.stats()["mamba.device"].used == 1
    res2 = d.compute(SEQ[:4])
    assert res2 is not None and res2.mamba == "duplicate"
    assert cache.counters.mamba_duplicates == 1
    d.assert_ok()

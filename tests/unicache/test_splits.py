"""Splits under in-flight copies keep transfer records and pins right."""

from __future__ import annotations

import pytest

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, dev_full_of, host_full_of, residency
from unicache import Full
from unicache.tree.pins import backup_in_flight


@pytest.mark.parametrize("what", ["load_back", "backup"])
def test_split_under_an_in_flight_copy(make_cache: MakeCache, what: str) -> None:
    cache, d = make_cache(swa_window=4, mamba=True)
    (a,) = chain(cache, d, SEQ[:8], [8])
    if what == "load_back":
        cache.backup(a)
        d.settle()
        cache.evict_device(Full, 8)
        t = cache.load_back(a)
        assert t is not None
        cache.match_prefix(SEQ[:4] + [9, 9])  # splits a at 4 while the copy is in flight
        upper = a.parent
        assert upper is not None and upper.end == 4 and t.full is not None
        pins = residency(upper).full_pins
        assert pins is not None and t.full in pins
        assert cache.sanity_check().ok
        d.settle()
        assert t.result().ok and dev_full_of(upper) is not None and dev_full_of(a) is not None
    else:
        tid = cache.backup(a)
        assert tid is not None
        cache.match_prefix(SEQ[:4] + [9, 9])
        upper = a.parent
        assert upper is not None and backup_in_flight(residency(upper).full_pins)
        d.settle()
        assert host_full_of(upper) is not None and host_full_of(a) is not None and not backup_in_flight(residency(upper).full_pins)
    d.assert_ok()

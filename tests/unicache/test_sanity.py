"""sanity_check: each corruption is reported by node, component and lease."""

from __future__ import annotations

import pytest

from leases import PinSet
from tests.unicache.conftest import MakeCache
from tests.unicache.support import chain, residency
from unicache import Full, Mamba, SanityError, Violation

SEQ = list(range(300, 316))


def _kinds(vs: list[Violation]) -> set[str]:
    return {v.kind for v in vs}


def test_clean_cache_is_ok(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True, swa_window=4)
    chain(cache, d, SEQ[:8], [4, 8])
    r = cache.sanity_check()
    assert r.ok and r.nodes == 3 and "ok" in r.describe()
    cache.check()


def test_foreign_pin_without_scope(make_cache: MakeCache) -> None:
    cache, d = make_cache(mamba=True)
    (a,) = chain(cache, d, SEQ[:4], [4])
    pins = residency(a).mamba_pins = PinSet(Mamba, a)
    rogue = cache.ledger.acquire(Mamba, owner="rogue", pins=(pins,))
    r = cache.sanity_check()
    assert not r.ok
    hits = [v for v in r.violations if v.lease_id == rogue.id]
    assert {v.kind for v in hits} == {"lease", "pin"}
    assert any(v.node_id == a.id and v.component == "Mamba" for v in hits)
    with pytest.raises(SanityError) as err:
        cache.check()
    assert f"lease #{rogue.id}" in str(err.value)
    rogue.release()
    assert cache.sanity_check().ok


def test_lease_missing_from_pin_set(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    (a,) = chain(cache, d, SEQ[:4], [4])
    rc = cache.lock(a)
    assert rc.full is not None and residency(a).full_pins is not None
    held = residency(a).full_pins
    residency(a).full_pins = PinSet(Full, a)  # the node lost its pin set behind the ledger's back
    r = cache.sanity_check()
    assert any(
        v.kind == "pin" and v.lease_id == rc.full.id and v.node_id == a.id for v in r.violations
    )
    residency(a).full_pins = held
    assert cache.sanity_check().ok
    cache.unlock(rc)


def test_structure_pool_and_count_corruptions(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    a.dev_children = 2
    assert "count" in _kinds(cache.sanity_check().violations)
    a.dev_children = 1
    pages = residency(a).full_device
    assert pages is not None
    residency(a).full_device = None
    r = cache.sanity_check()
    assert {"residency", "pool"} <= _kinds(r.violations)
    assert any(v.node_id == b.id and v.component == "Full" for v in r.violations)
    residency(a).full_device = pages
    cache.pools.device_pool(Full).alloc.free(pages[:1])  # freed behind the cache's back
    r = cache.sanity_check()
    assert any(v.kind == "pool" and "free list" in v.detail for v in r.violations)
    assert r.to_json()["ok"] is False


def test_missing_heap_entry_and_duplicate_tracking(make_cache: MakeCache) -> None:
    cache, d = make_cache()
    (a,) = chain(cache, d, SEQ[:4], [4])
    cache.backup(a)
    d.settle()
    cache.components.full.dups.clear()
    assert "dups" in _kinds(cache.sanity_check().violations)

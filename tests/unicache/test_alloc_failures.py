"""Allocation failures injected inside cache operations: each op refuses cleanly or degrades as documented.

An allocator told to refuse (`SlotAllocator.refuse`, device or host, any
component) answers None as a short pool does, inside load-back, backup,
insert (write-through backups, Mamba copies) and request allocation. The
operation must then return its refusal outcome having started nothing (no
ticket, no lease, no job: the in-flight part of `CacheSnapshot` unchanged), or
succeed without what it could not allocate (a backup skipped, a Mamba state
not copied), and the cache stays sane and byte-exact with no lease left
unowned. An op that evicted before its allocation was refused keeps the
eviction (and, under write-back, the backups that eviction started), as it
does when the pool is really short (docs/cache.md, "Refused calls change
nothing").
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unicache.snapshot import CacheSnapshot
from tests.unicache.support import Driver
from tests.unicache.test_atomicity import ACTIONS, CONFIGS, World, _build, _tokens
from unicache import Full, LoadBack, UniCache

OPS = ("load_back", "backup", "serve", "alloc", "evict")


def _load_backs(cache: UniCache) -> list[int]:
    return [t.id for t in cache.live_tickets() if isinstance(t, LoadBack)]


def _unowned_leases(w: World) -> set[int]:
    """Live leases no live ticket, held receipt or held load-back claim owns (a refused op's leak)."""
    owned: set[int] = set()
    for t in w.cache.live_tickets():
        owned.update(t.lease_ids().values())
    for r in w.receipts:
        owned.update(r.lease_ids())
    for c in w.tickets:
        owned.update(c.lease_ids().values())
    return {lease.id for lease in w.cache.ledger.live()} - owned


def _attempt(w: World, op: str, a: int, b: int) -> bool:
    """Run `op`; True when it returned its refusal outcome (None)."""
    cache = w.cache
    ps = cache.config.page_size
    tokens = _tokens(a % 4, 1 + b % 6, ps)
    if op == "load_back":
        m = cache.match_prefix(tokens)
        if not m.needs_load_back:
            return False
        t = cache.load_back(m.anchor)
        if t is None:
            return True
        w.tickets.append(t)
        return False
    if op == "backup":
        nodes = w.live_nodes()
        return bool(nodes) and cache.backup(nodes[b % len(nodes)]) is None
    if op == "serve":
        res = w.driver.serve(tokens)
        if res is not None:
            w.served.append(tokens)
        return res is None
    if op == "alloc":
        got = cache.alloc_device(Full, 1 + a % 3)
        if got is None:
            return True
        w.lent += got
        return False
    comp = cache.config.components[b % len(cache.config.components)]
    cache.evict_device(comp, 1 + a % 8)
    return False


def _check(w: World, label: str) -> None:
    report = w.cache.sanity_check()
    assert report.ok, f"{label}: {report.describe()}"
    errors = w.driver.oracle.check(w.cache)
    assert not errors, f"{label}: {errors}"


@pytest.mark.parametrize("config", sorted(CONFIGS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    actions=st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 99), st.integers(0, 99)), max_size=25),
    trials=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 99), st.integers(0, 99),
                              st.integers(0, 99), st.sampled_from((1, 2, 3, 1000))), min_size=1, max_size=12),
)
def test_injected_allocation_failures_refuse_cleanly(
    config: str, seed: int, actions: list[tuple[str, int, int]],
    trials: list[tuple[str, int, int, int, int]],
) -> None:
    cache = _build(config, seed)
    w = World(cache, Driver(cache))
    for action, a, b in actions:
        w.step(action, a, b)
    pools = cache.pools
    device = [pools.device_pool(c).alloc for c in cache.config.components]
    host = [pools.host_pool(c).alloc for c in cache.config.components]
    relevant = {"load_back": device, "backup": host, "evict": host, "alloc": device, "serve": device + host}
    for op, a, b, which, count in trials:
        targets = relevant[op]
        target = targets[which % len(targets)]
        target.refuse = count
        before = CacheSnapshot.of(cache)
        load_backs = _load_backs(cache)
        lent = cache.lent_slots(Full)
        refused = _attempt(w, op, a, b)
        spent = count - target.refuse if count != 1000 else target.injected_refusals
        target.refuse = 0
        label = f"{op} with {target.name} refusing {count}"
        if refused and spent:
            after = CacheSnapshot.of(cache)
            assert _load_backs(cache) == load_backs, f"{label}: refused but started a load-back"
            assert cache.lent_slots(Full) == lent, f"{label}: refused but lent slots"
            if op == "load_back" or not cache.config.write_policy == "write_back":
                assert after.tickets == before.tickets and after.engine_pending == before.engine_pending, (
                    f"{label}: refused but started a copy: {before.diff(after)}")
        assert not _unowned_leases(w), f"{label}: leases nobody owns: {_unowned_leases(w)}"
        _check(w, label)
    w.close()


def test_refusals_are_injected_and_counted() -> None:
    cache: UniCache = _build("mamba-wt-ps4", 3)
    d = Driver(cache)
    alloc = cache.pools.device_pool(Full).alloc
    alloc.refuse = 2
    assert cache.alloc_device(Full, 1) is None
    assert alloc.refuse == 0 and alloc.injected_refusals == 2
    assert cache.counters.alloc_refused_full == 1
    got = cache.alloc_device(Full, 1)
    assert got is not None
    cache.free_device(Full, got)
    host = cache.pools.host_pool(Full).alloc
    host.refuse = 1000
    assert d.serve(_tokens(1, 2, 4)) is not None  # write-through: the backup is skipped, the insert stands
    host.refuse = 0
    assert cache.counters.backups == 0 and cache.counters.backups_refused >= 1
    _check(World(cache, d), "after a skipped backup")

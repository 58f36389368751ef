"""The harness workload on SGLang's real cache: the lease core does the Python core's work."""

from __future__ import annotations

import pytest
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

from unicache.integrations.sglang.cache import LeaseUnifiedRadixCache
from unicache.integrations.sglang.core import LeaseTreeCore
from unicache.integrations.sglang.workload import (
    Request,
    build_cache,
    gen_workload,
    pool_sizes,
    replay,
)

_WORKLOAD: dict[int, tuple[list[Request], int]] = {}


def _workload(sessions: int) -> tuple[list[Request], int]:
    if sessions not in _WORKLOAD:
        _WORKLOAD[sessions] = gen_workload(0, sessions=sessions)
    return _WORKLOAD[sessions]


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("mamba", [False, True], ids=["FULL", "FULL+MAMBA"])
def test_lease_core_matches_python_core(mamba: bool, policy: str) -> None:
    reqs, unique = _workload(24)
    device, ctx = pool_sizes(reqs, unique)
    runs = {}
    for backend in ("python", "leases"):
        setup = build_cache(backend=backend, mamba=mamba, device_tokens=device,
                            policy=policy, max_context_len=ctx)
        runs[backend] = replay(setup, reqs, check_every=5)
        core = setup.cache.tree_core
        if backend == "leases":
            assert isinstance(core, LeaseTreeCore)
            assert core.ledger.live_count == 0
            assert core.ledger.acquired == core.ledger.released
            assert not core.load_backs
        setup.cache.release_host_resources()
    py, lc = runs["python"], runs["leases"]
    assert py.load_backs > 0, "the workload must exercise load-back"
    assert lc.per_request == py.per_request
    assert lc.digest == py.digest
    assert (lc.load_backs, lc.load_backs_declined) == (py.load_backs, py.load_backs_declined)


def test_write_back_load_backs_take_and_return_leases() -> None:
    reqs, unique = _workload(24)
    device, ctx = pool_sizes(reqs, unique)
    setup = build_cache(backend="leases", mamba=True, device_tokens=device, max_context_len=ctx)
    res = replay(setup, reqs, check_every=0)
    core = setup.cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    assert res.load_backs > 0
    assert core.ledger.acquired >= res.load_backs
    assert core.ledger.released == core.ledger.acquired
    assert core.ledger.leaked == 0
    setup.cache.release_host_resources()


def test_forked_swa_workload_stock_refuses_a_host_hit_the_lease_cache_loads() -> None:
    """Full+SWA (window 128), forked sessions, acks every 4 requests: the SWA crash shape in traffic.

    Identical per-request outcomes up to the request stock 0.5.23 refuses;
    there stock recomputes a host hit the lease cache loads from host.
    """
    reqs, unique = gen_workload(0, sessions=24, fork=0.5)
    device, ctx = pool_sizes(reqs, unique, floor_requests=3)
    runs = {}
    for backend, cls in (("python", UnifiedRadixCache), ("leases", LeaseUnifiedRadixCache)):
        setup = build_cache(backend=backend, mamba=False, swa_window=128, device_tokens=device,
                            max_context_len=ctx, cache_class=cls)
        runs[backend] = replay(setup, reqs, check_every=5, ack_every=4)
        core = setup.cache.tree_core
        if backend == "leases":
            assert isinstance(core, LeaseTreeCore)
            assert core.overlapping_load_backs >= 1
            assert core.ledger.live_count == 0 and not core.load_backs
            assert core.ledger.acquired == core.ledger.released and core.ledger.leaked == 0
        setup.cache.release_host_resources()
    py, lc = runs["python"], runs["leases"]
    assert py.load_backs_declined == 1 and py.declined_host_hit_tokens > 0
    assert lc.load_backs_declined == 0 and lc.load_backs == py.load_backs + 1
    first = next(i for i, (a, b) in enumerate(zip(py.per_request, lc.per_request)) if a != b)
    dev, host_hit, loaded = lc.per_request[first]
    assert py.per_request[first] == (dev - loaded, host_hit, 0), "stock recomputes the host hit"
    assert loaded == host_hit == py.declined_host_hit_tokens, "the lease cache loads all of it"

"""The harness workload on SGLang's real cache: tree core "unicache" does the Python core's work (FULL,
FULL+MAMBA, FULL+SWA)."""

from __future__ import annotations

import pytest
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    EvictDeviceNextNodeResult,
    UnifiedTreeCoreInterface,
)

from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.workload import ReplayResult, Request, build_cache, gen_workload, pool_sizes, replay

_WORKLOAD: dict[tuple[int, float, int], tuple[list[Request], int]] = {}


def _workload(sessions: int, fork: float = 0.0, page_size: int = 1) -> tuple[list[Request], int]:
    if (sessions, fork, page_size) not in _WORKLOAD:
        _WORKLOAD[(sessions, fork, page_size)] = gen_workload(0, sessions=sessions, fork=fork, page_size=page_size)
    return _WORKLOAD[(sessions, fork, page_size)]


@pytest.mark.parametrize("ack_every", [1, 4])
@pytest.mark.parametrize("fork", [0.0, 0.5])
@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_unicache_core_matches_python_core(policy: str, fork: float, ack_every: int) -> None:
    """Per-request (device prefix, host hit, loaded), digest and op counts equal; sanity_check every 5.

    With acks deferred (every 4 requests) under write-through, stock 0.5.23's
    own `sanity_check` fails ("Duplicate missing": a node settled on both tiers
    while another load-back's ack is pending is not re-indexed), so the
    Python core runs unchecked there; "unicache" is checked every 5 requests
    in every case.
    """
    reqs, unique = _workload(24, fork)
    device, ctx = pool_sizes(reqs, unique, floor_requests=2 if ack_every == 1 else 5)
    runs = {}
    for backend in ("python", "unicache"):
        setup = build_cache(backend=backend, mamba=False, device_tokens=device, policy=policy, max_context_len=ctx)
        stock_unchecked = backend == "python" and policy == "write_through" and ack_every > 1
        runs[backend] = replay(setup, reqs, check_every=0 if stock_unchecked else 5, ack_every=ack_every)
        core = setup.cache.tree_core
        if backend == "unicache":
            assert isinstance(core, UnicacheTreeCore)
            _assert_no_lease_left(core)
        setup.cache.release_host_resources()
    _assert_same_work(runs)


@pytest.mark.parametrize("slots", [6, 24])
@pytest.mark.parametrize("ack_every", [1, 4])
@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_unicache_core_matches_python_core_with_mamba(policy: str, ack_every: int, slots: int) -> None:
    """FULL+MAMBA (page size 1): per-request outcomes, digest and load-back counts equal; sanity every 5.

    With 6 Mamba slots the Mamba pool runs out first: its own eviction walk
    (tombstones, write-back backup pauses) and its host eviction run; with
    24, Mamba states go with their Full leaves.
    """
    reqs, unique = _workload(24, 0.5)
    device, ctx = pool_sizes(reqs, unique, floor_requests=2 if ack_every == 1 else 5)
    runs = {}
    for backend in ("python", "unicache"):
        setup = build_cache(backend=backend, mamba=True, device_tokens=device, policy=policy, max_context_len=ctx,
                            mamba_slots=slots)
        stock_unchecked = backend == "python" and policy == "write_through" and ack_every > 1
        runs[backend] = replay(setup, reqs, check_every=0 if stock_unchecked else 5, ack_every=ack_every)
        core = setup.cache.tree_core
        if backend == "unicache":
            assert isinstance(core, UnicacheTreeCore) and core.mamba is not None
            _assert_no_lease_left(core)
        setup.cache.release_host_resources()
    _assert_same_work(runs)


@pytest.mark.parametrize("ack_every", [1, 4])
@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_unicache_core_matches_python_core_with_swa(policy: str, ack_every: int) -> None:
    """FULL+SWA (page size 1, window 16, SWA pool 0.3 of the Full pool): outcomes equal; sanity every 5.

    The small SWA pool makes SWA run out first: its own eviction walk
    (tombstones; under write-back, pauses for the backup of the unbacked
    window), its host eviction, and load-backs of host-only windows on
    nodes whose Full KV is on device; inserts rebuild SWA on overlapped
    tombstones.
    """
    reqs, unique = _workload(24, 0.5)
    device, ctx = pool_sizes(reqs, unique, floor_requests=2 if ack_every == 1 else 5)
    runs = {}
    for backend in ("python", "unicache"):
        setup = build_cache(backend=backend, mamba=False, device_tokens=device, policy=policy, max_context_len=ctx,
                            swa_window=16, swa_tokens=int(device * 0.3))
        core = setup.cache.tree_core
        walks = _count_swa_walks(core)
        stock_unchecked = backend == "python" and policy == "write_through" and ack_every > 1
        runs[backend] = replay(setup, reqs, check_every=0 if stock_unchecked else 5, ack_every=ack_every)
        assert walks["swa walks"] > 0, "the SWA eviction walk must run"
        assert (walks["backup pauses"] > 0) == (policy == "write_back")
        if backend == "unicache":
            assert isinstance(core, UnicacheTreeCore) and core.swa is not None
            _assert_no_lease_left(core)
        setup.cache.release_host_resources()
    _assert_same_work(runs)


def _count_swa_walks(core: UnifiedTreeCoreInterface) -> dict[str, int]:
    """Count the core's SWA eviction walks and SWA backup pauses (instance attributes the cache calls)."""
    counts = {"swa walks": 0, "backup pauses": 0}
    start, finish = core.evict_device_start, core.finish_swa_state_eviction

    def counted_start(component_type: ComponentType, request_cnt: int) -> None:
        counts["swa walks"] += component_type == ComponentType.SWA
        start(component_type, request_cnt)

    def counted_finish(node_id: int) -> EvictDeviceNextNodeResult:
        counts["backup pauses"] += 1
        return finish(node_id)

    setattr(core, "evict_device_start", counted_start)
    setattr(core, "finish_swa_state_eviction", counted_finish)
    return counts


def _assert_no_lease_left(core: UnicacheTreeCore) -> None:
    """Every lease the replay took was released, none leaked, no load-back or write-through mark left."""
    assert core.ledger.live_count == 0 and core.ledger.acquired == core.ledger.released
    assert core.ledger.leaked == 0 and not core.load_backs and not core.write_marks


def _assert_same_work(runs: dict[str, ReplayResult]) -> None:
    """The two cores' per-request outcomes, digests and load-back counts are equal (and load-backs happened)."""
    py, uc = runs["python"], runs["unicache"]
    assert py.load_backs > 0, "the workload must exercise load-back"
    assert uc.per_request == py.per_request
    assert uc.digest == py.digest
    assert (uc.load_backs, uc.load_backs_declined) == (py.load_backs, py.load_backs_declined)


@pytest.mark.parametrize("components", ["FULL", "FULL+MAMBA", "FULL+SWA"])
@pytest.mark.parametrize("ack_every", [1, 4])
@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_unicache_core_matches_python_core_at_page_size_16(policy: str, ack_every: int, components: str) -> None:
    """Page size 16 (paged allocator), forked sessions: Mamba with SGLang's extra buffer and 6 slots; SWA
    with window 32 and an SWA pool of half the Full pool (whole pages), so its own eviction walk runs
    (at 0.3, as at page size 1, the SWA pool is smaller than one locked 3,504-token request plus the
    next one's pages and both cores fail the allocation alike).

    Per-request outcomes, digest and load-back counts equal the Python
    core's; both cores are `sanity_check`ed every 5 requests (at this page
    size stock's write-through "Duplicate missing" does not arise here).
    """
    reqs, unique = _workload(24, 0.5, page_size=16)
    device, ctx = pool_sizes(reqs, unique, floor_requests=2 if ack_every == 1 else 5, page_size=16)
    swa = components == "FULL+SWA"
    runs = {}
    for backend in ("python", "unicache"):
        setup = build_cache(backend=backend, mamba=components == "FULL+MAMBA", device_tokens=device, policy=policy,
                            max_context_len=ctx, mamba_slots=6, page_size=16,
                            swa_window=32 if swa else None, swa_tokens=device // 2 // 16 * 16 if swa else None)
        core = setup.cache.tree_core
        walks = _count_swa_walks(core)
        runs[backend] = replay(setup, reqs, check_every=5, ack_every=ack_every)
        assert (walks["swa walks"] > 0) == swa
        if backend == "unicache":
            assert isinstance(core, UnicacheTreeCore) and core.page_size == 16
            assert (core.swa is not None) == swa and (core.mamba is not None) == (components == "FULL+MAMBA")
            _assert_no_lease_left(core)
        setup.cache.release_host_resources()
    _assert_same_work(runs)


@pytest.mark.parametrize("bad", [0, -16, True])
def test_page_size_is_validated(bad: int) -> None:
    """A bad page size, or a device pool of part pages, is a typed error, not clamped."""
    with pytest.raises(ValueError, match="page_size"):
        build_cache(backend="unicache", mamba=False, device_tokens=64, page_size=bad)
    with pytest.raises(ValueError, match="page_size"):
        gen_workload(0, sessions=1, page_size=bad)
    with pytest.raises(ValueError, match="device_tokens=40"):
        build_cache(backend="unicache", mamba=False, device_tokens=40, page_size=16)
    reqs, _ = gen_workload(0, sessions=1, turns=1, sys_len=(17, 17), turn_len=(1, 1))
    setup = build_cache(backend="unicache", mamba=False, device_tokens=64, page_size=16)
    with pytest.raises(ValueError, match="request 0 has 18 tokens"):
        replay(setup, reqs)
    setup.cache.release_host_resources()

"""A seeded random driver calling SGLang's cache the way its scheduler does, on tree core "unicache".

Operations, in random order: requests (match, load-back of a host hit with
its ack deferred, lock, allocate with eviction, insert; the lock kept until
a later release), releases in any order, deferred load-back acks,
write-through acks, device and host evictions, and an occasional reset.
After every operation: SGLang's `sanity_check` (which runs the core's:
sizes, pins and queues recomputed from the tree and the live leases) and
conservation of both pools (free indices plus the tree's values is the pool:
an index handed back twice or never shows). The same seed on SGLang's
Python core must give the same per-request outcomes. At the end every lease
is released and none leaked.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional, cast

import pytest
import torch
from sglang.srt.mem_cache.base_prefix_cache import (
    DecLockRefParams,
    EvictParams,
    InitLoadBackParams,
    InsertParams,
    MatchPrefixParams,
)
from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import TreeLock
from sglang.srt.mem_cache.hicache_storage import PoolName
from sglang.srt.mem_cache.pool_host.group import HostPoolGroup
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.treecore.errors import SpentReceiptError
from unicache.integrations.sglang.workload import CacheSetup, build_cache, request_stand_in

DEVICE = 128
MAMBA_SLOTS = 8
SWA_DEVICE = 48
"""The SWA pool of the FULL+SWA runs: smaller than the Full pool, so SWA's own eviction walk runs."""
STEPS = 160


@dataclass
class Run:
    outcomes: list[tuple[str, int, int, int]] = field(default_factory=list)
    locks: list[tuple[int, DecLockRefParams]] = field(default_factory=list)
    spent: list[tuple[int, DecLockRefParams]] = field(default_factory=list)


def _host(setup: CacheSetup) -> tuple[int, int]:
    controller = setup.cache.cache_controller
    assert controller is not None
    pool = controller.mem_pool_host
    return int(pool.available_size()), int(pool.size)


def _conserved(setup: CacheSetup, core: UnicacheTreeCore) -> None:
    tree_device = core.total_size()[0]
    alloc = setup.allocator
    swa = core.swa
    if isinstance(alloc, SWATokenToKVPoolAllocator):
        assert swa is not None
        assert alloc.full_available_size() + tree_device == DEVICE, (alloc.full_available_size(), tree_device)
        assert alloc.swa_available_size() + swa.total == SWA_DEVICE, (alloc.swa_available_size(), swa.total)
        group = cast("Optional[HostPoolGroup]", setup.cache.host_pool_group)  # typed None until HiCache attaches
        assert group is not None
        pool = group.get_pool(PoolName.SWA)
        tree_swa_host = sum(h.numel() for x in core.nodes() for h in [swa.host_state(x)] if h is not None)
        assert int(pool.available_size()) + tree_swa_host == int(pool.size), (pool.available_size(), tree_swa_host)
    else:
        assert alloc.available_size() + tree_device == DEVICE, (alloc.available_size(), tree_device)
    free, size = _host(setup)
    tree_host = sum(len(h) for x in core.nodes() if x.parent is not None
                    for h in [core.host_values(x)] if h is not None)
    assert free + tree_host == size, (free, tree_host, size)
    mamba_alloc = setup.mamba_allocator
    if mamba_alloc is not None:
        assert core.mamba is not None
        assert mamba_alloc.available_size() + core.mamba.total == mamba_alloc.size, (mamba_alloc.available_size(),
                                                                                     core.mamba.total)


def _request(setup: CacheSetup, run: Run, rng: random.Random, seqs: list[list[int]], i: int) -> None:
    cache = setup.cache
    base = rng.choice(seqs) if seqs and rng.random() < 0.7 else []
    tokens = base[: rng.randint(0, len(base))] + [rng.randrange(6) for _ in range(rng.randint(1, 24))]
    key = RadixKey(array("q", tokens))
    m = cache.match_prefix(MatchPrefixParams(key=key))
    node, dev_len, loaded = m.last_device_node, int(m.device_prefix_len), 0
    if (m.host_hit_length > 0 or m.mamba_host_hit_length > 0
            or cache.tree_core.is_full_device_evicted(m.best_match_node)):
        before = len(cache.ongoing_load_back)
        out = cache.init_load_back(InitLoadBackParams(
            best_match_node=m.best_match_node, host_hit_length=int(m.host_hit_length),
            req=request_stand_in(i, node, m.swa_host_hit_length, m.mamba_host_hit_length)))
        if len(cache.ongoing_load_back) > before and out is not None:
            loaded, node = out
            dev_len += loaded
            cache.ready_to_load_host_cache()
            if rng.random() < 0.5:
                cache.loading_check()
    lock = cache.inc_lock_ref(node)
    need = len(tokens) - dev_len
    alloc = setup.allocator
    if need > 0 and alloc.available_size() < need:
        if isinstance(alloc, SWATokenToKVPoolAllocator):
            cache.evict_for_alloc(EvictParams(num_tokens=max(0, need - alloc.full_available_size()),
                                              swa_num_tokens=max(0, need - alloc.swa_available_size())))
        else:
            cache.evict_for_alloc(EvictParams(num_tokens=need - alloc.available_size()))
    new = setup.allocator.alloc(need) if need > 0 else torch.empty(0, dtype=torch.int64)
    run.outcomes.append(("request", dev_len, int(m.host_hit_length), loaded))
    if new is None:
        run.outcomes.append(("no room", need, 0, 0))
        cache.dec_lock_ref(node, lock.to_dec_params())
        return
    slot = None
    mamba_alloc = setup.mamba_allocator
    if mamba_alloc is not None:
        slot = mamba_alloc.alloc(1)
        if slot is None:
            cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))
            slot = mamba_alloc.alloc(1)
        if slot is None:
            run.outcomes.append(("no state", 0, 0, 0))
            setup.allocator.free(new)
            cache.dec_lock_ref(node, lock.to_dec_params())
            return
    prefix = cache.path_device_indices(node) if dev_len > 0 else torch.empty(0, dtype=torch.int64)
    ins = cache.insert(InsertParams(key=key, value=torch.cat((prefix, new)), mamba_value=slot, prev_prefix_len=dev_len))
    if mamba_alloc is not None and slot is not None and ins.mamba_exist:
        mamba_alloc.free(slot)
    run.locks.append((node, lock.to_dec_params()))
    seqs.append(tokens)


def drive(backend: str, seed: int, policy: str, check: bool, mamba: bool = False, mamba_slots: int = MAMBA_SLOTS,
          after: Callable[[UnicacheTreeCore], None] | None = None, swa_window: int | None = None) -> Run:
    """Run the driver; `after` (with `check`) is called on the core after every operation.

    With `swa_window` (FULL+SWA, an SWA pool of `SWA_DEVICE` tokens) a
    release first gives back the lock's SWA window early (SGLang's
    `release_swa`, as for a request decoding past its window) half the time.
    """
    rng = random.Random(seed)
    setup = build_cache(backend=backend, mamba=mamba, device_tokens=DEVICE, policy=policy, max_context_len=64,
                        host_ratio=2.0, mamba_slots=mamba_slots, swa_window=swa_window,
                        swa_tokens=SWA_DEVICE if swa_window is not None else None)
    cache = setup.cache
    cache.load_back_threshold = 1  # every host hit loads back (SGLang's default is 10 tokens)
    run = Run()
    seqs: list[list[int]] = []
    core = cache.tree_core
    for i in range(STEPS):
        op = rng.random()
        if op < 0.45:
            _request(setup, run, rng, seqs, i)
        elif op < 0.7 and run.locks:
            node, params = run.locks.pop(rng.randrange(len(run.locks)))
            if swa_window is None:
                cache.dec_lock_ref(node, params)
            else:
                lock = TreeLock(node, params)
                if rng.random() < 0.5 and params.component_lock_uuids.get(ComponentType.SWA) is not None:
                    cache.release_swa(lock)
                cache.unlock(lock)
        elif op < 0.8:
            cache.ready_to_load_host_cache()
            cache.loading_check()
            cache.check_hicache_events()
        elif op < 0.9:
            res = cache.evict_for_alloc(EvictParams(num_tokens=rng.randint(1, 24)))
            run.outcomes.append(("evict", res.num_tokens_evicted, 0, 0))
        elif op < 0.985:
            run.outcomes.append(("evict_host", cache.evict_host(rng.randint(1, 24)), 0, 0))
        else:
            cache.ready_to_load_host_cache()
            cache.loading_check()
            cache.writing_check(write_back=True)
            run.spent += run.locks
            run.locks = []
            cache.reset()
            setup.allocator.clear()  # as SGLang's flush_cache does after the cache's reset
            if setup.mamba_allocator is not None:
                setup.mamba_allocator.clear()
            seqs = []
        if check:
            assert isinstance(core, UnicacheTreeCore)
            cache.sanity_check()
            if not cache.ongoing_load_back and not cache.ongoing_write_through:
                _conserved(setup, core)
            if after is not None:
                after(core)
    cache.ready_to_load_host_cache()
    cache.loading_check()
    for node, params in run.locks:
        cache.dec_lock_ref(node, params)
    cache.writing_check(write_back=True)
    if isinstance(core, UnicacheTreeCore):
        for node, params in run.spent:
            with pytest.raises(SpentReceiptError, match="revoked by a reset"):
                core.dec_lock_ref(node, params)
        cache.sanity_check()
        assert core.ledger.live_count == 0 and core.ledger.leaked == 0
        assert core.protected_size() == 0 and core.mamba_protected_size() == 0 and core.swa_protected_size() == 0
    setup.cache.release_host_resources()
    return run


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
@pytest.mark.parametrize("seed", range(4))
def test_random_driver_checks_every_step_and_matches_python(seed: int, policy: str) -> None:
    ours = drive("unicache", seed, policy, check=True)
    stock = drive("python", seed, policy, check=False)
    assert any(kind == "request" and loaded for kind, _, _, loaded in ours.outcomes), "no load-back exercised"
    assert ours.outcomes == stock.outcomes


@pytest.mark.parametrize("slots", [3, MAMBA_SLOTS])
@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_random_driver_with_mamba_checks_every_step_and_matches_python(policy: str, slots: int) -> None:
    """FULL+MAMBA with 3 or 8 Mamba slots (the Mamba pool runs out too), seeds 0-3; some seed loads back."""
    loaded_any = False
    for seed in range(4):
        ours = drive("unicache", seed, policy, check=True, mamba=True, mamba_slots=slots)
        stock = drive("python", seed, policy, check=False, mamba=True, mamba_slots=slots)
        assert ours.outcomes == stock.outcomes, seed
        loaded_any |= any(kind == "request" and loaded for kind, _, _, loaded in ours.outcomes)
    assert loaded_any, "no load-back exercised"


@pytest.mark.parametrize("window", [4, 16])
@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_random_driver_with_swa_checks_every_step_and_matches_python(policy: str, window: int) -> None:
    """FULL+SWA (windows 4 and 16, SWA pool 48 of 128 tokens), seeds 0-3, early SWA releases; some seed loads
    back."""
    loaded_any = False
    for seed in range(4):
        ours = drive("unicache", seed, policy, check=True, swa_window=window)
        stock = drive("python", seed, policy, check=False, swa_window=window)
        assert ours.outcomes == stock.outcomes, seed
        loaded_any |= any(kind == "request" and loaded for kind, _, _, loaded in ours.outcomes)
    assert loaded_any, "no load-back exercised"

"""The SGLang CPU harness workload and its per-request driver, for tests and benchmarks.

A rewrite of the request loop of the project's SGLang CPU harness
(shared/bench/sglang_harness.py: `gen_workload`, `build_cache`, `run_once`),
same workload for the same seed and same digest, so figures compare with
it. Drives SGLang's own `UnifiedRadixCache` + HiCache controller on CPU with
any registered tree core.
"""

from __future__ import annotations

import gc
import random
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Optional, cast

import torch
from sglang.srt.configs.mamba_utils import Mamba2CacheParams, Mamba2StateShape
from sglang.srt.environ import envs
from sglang.srt.mem_cache.allocator import (
    BaseTokenToKVPoolAllocator,
    PagedTokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
)
from sglang.srt.mem_cache.allocator.mamba import MambaSlotAllocator
from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import (
    EvictParams,
    InitLoadBackParams,
    InsertParams,
    MatchPrefixParams,
)
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.memory_pool import (
    HybridLinearKVPool,
    HybridReqToTokenPool,
    KVCache,
    MHATokenToKVPool,
    ReqToTokenPool,
)
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
from sglang.srt.server_args import set_global_server_args_for_scheduler

from unicache.integrations.sglang.cpu import install_cpu_shims, server_args

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req

Request = tuple[int, int, "array[int]"]


def _align(n: int, page: int) -> int:
    return max(page, (n // page) * page)


def check_page_size(page_size: int, where: str) -> int:
    """`page_size` if it is an int >= 1, else a `ValueError` naming `where` (no clamping)."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ValueError(f"{where}: page_size must be an int >= 1, got {page_size!r}")
    return page_size


def gen_workload(
    seed: int,
    *,
    sessions: int = 200,
    turns: int = 5,
    n_sys: int = 8,
    sys_len: tuple[int, int] = (1024, 2048),
    turn_len: tuple[int, int] = (64, 512),
    window: int = 16,
    vocab: int = 150_000,
    fork: float = 0.0,
    page_size: int = 1,
) -> tuple[list[Request], int]:
    """Multi-turn sessions sharing system prompts, interleaved `window` at a time.

    Returns (requests, unique tokens); a request is (session, turn, tokens).
    As in the harness, every system prompt and every turn's chunk is
    `_align`ed down to whole pages of `page_size` (at least one page), so
    every request is page-aligned; at page size 1 nothing changes.
    `fork > 0` (not in the harness): a session that starts forks, with this
    probability, from the current history of a random active session (a
    regenerated or branched chat), so a node holding a Mamba state becomes
    internal; with `fork=0` the requests are the harness's, draw for draw.
    """
    page = check_page_size(page_size, "gen_workload")
    rng = random.Random(seed)
    prompts = [[rng.randint(1, vocab) for _ in range(_align(rng.randint(*sys_len), page))] for _ in range(n_sys)]
    sess_sys = [rng.randrange(n_sys) for _ in range(sessions)]
    history: list[list[int]] = [list(prompts[s]) for s in sess_sys]
    next_turn = [0] * sessions
    pending = list(range(sessions))
    active = [pending.pop(0) for _ in range(min(window, sessions))]
    reqs: list[Request] = []
    unique = sum(len(p) for p in prompts)
    while active:
        k = rng.randrange(len(active))
        s = active[k]
        chunk = _align(rng.randint(*turn_len), page)
        history[s].extend(rng.randint(1, vocab) for _ in range(chunk))
        unique += chunk
        reqs.append((s, next_turn[s], array("q", history[s])))
        next_turn[s] += 1
        if next_turn[s] == turns:
            history[s] = []
            if pending:
                nxt = active[k] = pending.pop(0)
                if fork and rng.random() < fork:
                    donor = active[rng.randrange(len(active))]
                    if donor != nxt and next_turn[donor] > 0:
                        history[nxt] = list(history[donor])
            else:
                active.pop(k)
    return reqs, unique


@dataclass(slots=True)
class CacheSetup:
    """SGLang objects of one cache: the cache, its KV allocator, its req-to-token pool and page size."""

    cache: UnifiedRadixCache
    allocator: BaseTokenToKVPoolAllocator
    req_to_token: ReqToTokenPool
    page_size: int = 1

    @property
    def mamba_allocator(self) -> Optional[MambaSlotAllocator]:
        pool = self.req_to_token
        return pool.mamba_allocator if isinstance(pool, HybridReqToTokenPool) else None


def request_stand_in(
    rid: int, last_node: int, swa_host_hit: int, mamba_host_hit: int
) -> Req:
    """What `init_load_back` reads of a scheduler `Req`, as the harness passes it.

    `holds_mamba=True` and no pool index: no per-request copy-on-write slot
    (see the harness notes). A full `Req` needs a tokenizer-side setup the
    cache never reads; the cast says the stand-in is deliberate.
    """
    kv = SimpleNamespace(holds_mamba=True, mamba_pool_idx=None)
    return cast("Req", SimpleNamespace(
        rid=rid, last_node=last_node, swa_host_hit_length=swa_host_hit,
        mamba_host_hit_length=mamba_host_hit, kv=kv,
    ))


def build_cache(
    *,
    backend: Optional[str],
    mamba: bool,
    device_tokens: int,
    policy: str = "write_back",
    copy_bytes: bool = True,
    host_ratio: float = 12.0,
    mamba_slots: int = 64,
    max_context_len: int = 8192,
    swa_window: Optional[int] = None,
    swa_tokens: Optional[int] = None,
    cache_class: type[UnifiedRadixCache] = UnifiedRadixCache,
    page_size: int = 1,
) -> CacheSetup:
    """A real `UnifiedRadixCache` with HiCache on CPU, page size `page_size`, tree core `backend`.

    `backend=None` leaves the choice to SGLang (`SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND`).
    `swa_window` (not with `mamba`) builds Full+SWA with that sliding window,
    an SWA pool of `swa_tokens` (default: as large as the Full pool; smaller, and
    the SWA eviction walk runs). `cache_class`: `UnifiedRadixCache`
    or a subclass (`LeaseUnifiedRadixCache`).

    At `page_size > 1` the device pools, the host pools (through the server
    arguments) and the tree all use that page; the KV allocator is SGLang's
    paged one (`PagedTokenToKVPoolAllocator`; for SWA both of its halves);
    `device_tokens` must be whole pages. With Mamba, SGLang requires its
    extra (ping-pong) buffer above page size 1 (`MambaComponent` asserts
    it), so it is switched on there as SGLang's unit-test kit does, and the
    Mamba cache chunk is `max(64, page_size)` as in the kit and the harness.
    """
    page = check_page_size(page_size, "build_cache")
    if mamba and swa_window is not None:
        raise ValueError("build_cache: choose Mamba or SWA, not both")
    if device_tokens < page or device_tokens % page:
        raise ValueError(f"build_cache: device_tokens={device_tokens} is not a positive number of "
                         f"whole pages of page_size={page}")
    install_cpu_shims(copy_bytes=copy_bytes)
    args = server_args(
        model_path="dummy",
        page_size=page,
        hicache_io_backend="direct",
        hicache_write_policy=policy,
        hicache_ratio=host_ratio,
        hicache_mem_layout="page_first_direct",
    )
    args._mamba_cache_chunk_size = max(64, page)
    set_global_server_args_for_scheduler(args)
    extra_buffer = mamba and page > 1
    dtype = torch.bfloat16
    r2t: ReqToTokenPool
    kv: KVCache
    swa_kv: Optional[SWAKVPool] = None
    comps: tuple[ComponentType, ...]
    if mamba:
        with envs.SGLANG_MAMBA_SSM_DTYPE.override("bfloat16"):
            shape = Mamba2StateShape.create(
                tp_world_size=1, intermediate_size=64, n_groups=1, num_heads=2,
                head_dim=16, state_size=16, conv_kernel=4,
            )
            params = Mamba2CacheParams(shape=shape, layers=[0])
        r2t = HybridReqToTokenPool(
            size=4, mamba_size=mamba_slots, mamba_spec_state_size=4,
            max_context_len=max_context_len, device="cpu", enable_memory_saver=False,
            cache_params=params, mamba_layer_ids=[0], enable_mamba_extra_buffer=extra_buffer,
            speculative_num_draft_tokens=3,
        )
        kv = HybridLinearKVPool(
            size=device_tokens, dtype=dtype, page_size=page, head_num=1, head_dim=8,
            full_attention_layer_ids=[1], device="cpu", enable_memory_saver=False,
            mamba_pool=r2t.mamba_pool,
        )
        comps = (ComponentType.FULL, ComponentType.MAMBA)
    elif swa_window is not None:
        r2t = ReqToTokenPool(size=4, max_context_len=max_context_len, device="cpu",
                             enable_memory_saver=False)
        kv = swa_kv = SWAKVPool(
            size=device_tokens, size_swa=swa_tokens or device_tokens, page_size=page, dtype=dtype, head_num=1,
            head_dim=8, swa_attention_layer_ids=[1], full_attention_layer_ids=[0], device="cpu",
        )
        comps = (ComponentType.FULL, ComponentType.SWA)
    else:
        r2t = ReqToTokenPool(size=4, max_context_len=max_context_len, device="cpu",
                             enable_memory_saver=False)
        kv = MHATokenToKVPool(
            size=device_tokens, page_size=page, dtype=dtype, head_num=1, head_dim=8,
            layer_num=1, device="cpu", enable_memory_saver=False,
        )
        comps = (ComponentType.FULL,)
    alloc: BaseTokenToKVPoolAllocator
    if swa_kv is not None:
        alloc = SWATokenToKVPoolAllocator(size=device_tokens, size_swa=swa_tokens or device_tokens, page_size=page,
                                          dtype=dtype, device="cpu", kvcache=swa_kv, need_sort=False)
    elif page > 1:
        alloc = PagedTokenToKVPoolAllocator(size=device_tokens, page_size=page, dtype=dtype, device="cpu",
                                            kvcache=kv, need_sort=False)
    else:
        alloc = TokenToKVPoolAllocator(size=device_tokens, dtype=dtype, device="cpu",
                                       kvcache=kv, need_sort=False)
    init = CacheInitParams(
        req_to_token_pool=r2t, token_to_kv_pool_allocator=alloc, page_size=page, disable=False,
        tree_components=comps, enable_mamba_extra_buffer=extra_buffer, eviction_policy="lru",
        tree_core_backend=backend, sliding_window_size=swa_window,
    )
    cache = cache_class(params=init)
    cache.init_hicache(args, init)
    return CacheSetup(cache, alloc, r2t, page)


@dataclass(slots=True)
class ReplayResult:
    """Outcome of one replay: the harness digest, counts and wall time."""

    digest: int = 0
    wall_s: float = 0.0
    requests: int = 0
    load_backs: int = 0
    load_backs_declined: int = 0
    loaded_tokens: int = 0
    host_hit_tokens: int = 0
    declined_host_hit_tokens: int = 0
    per_request: list[tuple[int, int, int]] = field(default_factory=list)


def replay(
    setup: CacheSetup,
    reqs: list[Request],
    *,
    check_every: int = 0,
    ack_every: int = 1,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> ReplayResult:
    """Drive the harness's per-request op sequence; `sanity_check` every `check_every` requests.

    Per request: match -> [init_load_back, start loading, ack] -> lock ->
    [evict_for_alloc] -> alloc -> insert -> unlock -> check_hicache_events.
    The digest is the harness's: over (device prefix, host hit, loaded) per
    request. `ack_every=1` starts and acks each load-back at once (the
    harness); `n > 1` starts and acks the queued load-backs only every `n`
    requests, so load-backs overlap as they do while GPU copies are in flight.
    """
    cache, alloc, page = setup.cache, setup.allocator, setup.page_size
    for i, (_s, _t, tokens) in enumerate(reqs):
        if len(tokens) % page:
            raise ValueError(f"replay: request {i} has {len(tokens)} tokens, not whole pages of "
                             f"page_size={page} (generate it with gen_workload(page_size={page}))")
    mamba_alloc = setup.mamba_allocator
    swa_alloc = alloc if isinstance(alloc, SWATokenToKVPoolAllocator) else None
    paged_swa = swa_alloc is not None and page > 1
    core = cache.tree_core
    empty = torch.empty(0, dtype=torch.int64)
    res = ReplayResult(requests=len(reqs))
    queued = 0
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    t0 = clock()
    for i, (_s, _t, tokens) in enumerate(reqs):
        key = RadixKey(tokens)
        m = cache.match_prefix(MatchPrefixParams(key=key))
        node = m.last_device_node
        dev_len = int(m.device_prefix_len)
        host_hit = int(m.host_hit_length)
        res.host_hit_tokens += host_hit
        loaded = 0
        if host_hit > 0 or m.mamba_host_hit_length > 0 or core.is_full_device_evicted(m.best_match_node):
            req = request_stand_in(i, node, m.swa_host_hit_length, m.mamba_host_hit_length)
            before = len(cache.ongoing_load_back)
            out = cache.init_load_back(InitLoadBackParams(
                best_match_node=m.best_match_node, host_hit_length=host_hit, req=req))
            if len(cache.ongoing_load_back) > before:
                queued += 1
                loaded, node = out
                res.load_backs += 1
                res.loaded_tokens += loaded
                dev_len += loaded
            else:
                res.load_backs_declined += 1
                res.declined_host_hit_tokens += host_hit
        if queued and (i + 1) % ack_every == 0:
            cache.ready_to_load_host_cache()
            cache.loading_check()
            queued = 0
        lock = cache.inc_lock_ref(node)
        need = len(tokens) - dev_len
        if need > 0 and alloc.available_size() < need:
            if swa_alloc is None:
                cache.evict_for_alloc(EvictParams(num_tokens=need - alloc.available_size()))
            else:
                cache.evict_for_alloc(EvictParams(
                    num_tokens=max(0, need - swa_alloc.full_available_size()),
                    swa_num_tokens=max(0, need - swa_alloc.swa_available_size())))
        new_idx: Optional[torch.Tensor]
        if need <= 0:
            new_idx = empty
        elif paged_swa:
            new_idx = _alloc_paged_swa(alloc, dev_len, len(tokens))
        else:
            new_idx = alloc.alloc(need)
        if new_idx is None:
            raise RuntimeError(f"request {i}: device KV allocation of {need} tokens failed")
        slot = None
        if mamba_alloc is not None:
            slot = mamba_alloc.alloc(1)
            if slot is None:
                cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))
                slot = mamba_alloc.alloc(1)
            if slot is None:
                raise RuntimeError(f"request {i}: Mamba slot allocation failed")
        prefix = cache.path_device_indices(node) if dev_len > 0 else empty
        value = torch.cat((prefix, new_idx)) if dev_len > 0 else new_idx
        ins = cache.insert(InsertParams(key=key, value=value, mamba_value=slot, prev_prefix_len=dev_len))
        if mamba_alloc is not None and slot is not None and ins.mamba_exist:
            mamba_alloc.free(slot)
        cache.dec_lock_ref(node, lock.to_dec_params())
        cache.check_hicache_events()
        res.digest = (res.digest * 1_000_003 + dev_len * 7 + host_hit * 13 + loaded) % (1 << 61)
        res.per_request.append((dev_len, host_hit, loaded))
        if check_every and i % check_every == 0:
            cache.sanity_check()
    if queued:
        cache.ready_to_load_host_cache()
        cache.loading_check()
    res.wall_s = (clock() - t0) / 1e9
    if was:
        gc.enable()
    cache.sanity_check()
    return res


def _alloc_paged_swa(alloc: BaseTokenToKVPoolAllocator, prefix_len: int, seq_len: int) -> Optional[torch.Tensor]:
    """KV slots for tokens [prefix_len, seq_len) of one request, from SWA's paged allocator.

    That allocator's `alloc` asserts page size 1; its `alloc_extend` takes a
    batch, here of one request. The prefix is whole pages, so no slot
    continues the prefix's last page and `last_loc` -1 (no prefix) is
    exact for every request.
    """
    lens = torch.tensor([prefix_len], dtype=torch.int64)
    seqs = torch.tensor([seq_len], dtype=torch.int64)
    out: Optional[torch.Tensor] = cast(SWATokenToKVPoolAllocator, alloc).alloc_extend(
        prefix_lens=lens, prefix_lens_cpu=lens, seq_lens=seqs, seq_lens_cpu=seqs,
        last_loc=torch.tensor([-1], dtype=torch.int64), extend_num_tokens=seq_len - prefix_len)
    return out


def pool_sizes(
    reqs: list[Request], unique: int, host_ratio: float = 12.0, floor_requests: int = 2, page_size: int = 1
) -> tuple[int, int]:
    """(device tokens, max context) as the harness sizes them: unique/host_ratio, floored, whole pages.

    The floor is `floor_requests` x the longest request (the harness uses 2:
    one locked request plus its load-back); deferred acks need one more per
    load-back kept in flight. The device size is `_align`ed down to whole
    pages of `page_size` (the floor is whole pages already when the requests
    are) and the context is the longest request plus two pages, as in the
    harness.
    """
    page = check_page_size(page_size, "pool_sizes")
    longest = max(len(t) for _, _, t in reqs)
    return _align(max(int(unique / host_ratio), floor_requests * longest), page), longest + 2 * page

"""The production-crash chains on the real 0.5.23 cache, shared by the integration tests.

Chain root -> X -> D is inserted (with a Mamba state per request when the
cache has a Mamba pool), then evicted to host. A load-back is started with
its ack withheld, so a second load-back can overlap it: Full+Mamba
(`crash_shape`) and Full+SWA with window `WINDOW` (`swa_crash_shape`).
"""

from __future__ import annotations

from array import array

import torch
from sglang.srt.mem_cache.base_prefix_cache import (
    EvictParams,
    InitLoadBackParams,
    InsertParams,
    MatchPrefixParams,
)
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache, _OngoingLoadBack

from unicache.integrations.sglang.core import LeaseTreeCore
from unicache.integrations.sglang.node import LeaseTreeNode
from unicache.integrations.sglang.workload import CacheSetup, build_cache, request_stand_in

X = list(range(1, 33))
D = X + list(range(100, 132))
WINDOW = 8

LoadBackStart = tuple[int, int, int, bool]
"""(anchor, host hit, tokens loaded, started) of a load-back whose ack is withheld."""


def insert_tokens(setup: CacheSetup, tokens: list[int]) -> None:
    """Insert `tokens` as a finished request would: device prefix reused, the rest newly allocated."""
    cache, alloc = setup.cache, setup.allocator
    key = RadixKey(array("q", tokens))
    m = cache.match_prefix(MatchPrefixParams(key=key))
    dev = int(m.device_prefix_len)
    prefix = cache.path_device_indices(m.last_device_node) if dev else torch.empty(0, dtype=torch.int64)
    new = alloc.alloc(len(tokens) - dev)
    assert new is not None
    mamba = setup.mamba_allocator
    slot = None if mamba is None else mamba.alloc(1)
    cache.insert(InsertParams(key=key, value=torch.cat((prefix, new)), mamba_value=slot,
                              prev_prefix_len=dev))


def start_load_back(setup: CacheSetup, tokens: list[int], rid: int) -> LoadBackStart:
    """Start the load-back a request for `tokens` would start; its ack is withheld."""
    cache = setup.cache
    m = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens))))
    req = request_stand_in(rid, m.last_device_node, m.swa_host_hit_length, m.mamba_host_hit_length)
    anchor = int(m.best_match_node)
    out = cache.init_load_back(InitLoadBackParams(
        best_match_node=anchor, host_hit_length=m.host_hit_length, req=req))
    assert out is not None
    return anchor, int(m.host_hit_length), int(out[0]), anchor in cache.ongoing_load_back


def warm_chain(backend: str, cache_class: type[UnifiedRadixCache] = UnifiedRadixCache) -> CacheSetup:
    """Full+Mamba cache holding root -> X -> D on host only."""
    setup = build_cache(backend=backend, mamba=True, device_tokens=256, mamba_slots=16,
                        max_context_len=512, cache_class=cache_class)
    setup.cache.load_back_threshold = 0
    insert_tokens(setup, X)
    insert_tokens(setup, D)
    setup.cache.evict_for_alloc(EvictParams(num_tokens=256, mamba_num=16))
    return setup


def warm_swa_chain(backend: str) -> CacheSetup:
    """Full+SWA cache (window `WINDOW`) holding root -> X -> D on host only."""
    setup = build_cache(backend=backend, mamba=False, swa_window=WINDOW, device_tokens=256,
                        max_context_len=512)
    setup.cache.load_back_threshold = 0
    insert_tokens(setup, X)
    insert_tokens(setup, D)
    setup.cache.evict_for_alloc(EvictParams(num_tokens=256, swa_num_tokens=256))
    return setup


def crash_shape(backend: str) -> tuple[CacheSetup, list[LoadBackStart]]:
    """Full+Mamba: load-back A (anchor D) in flight, then load-back B (anchor X)."""
    setup = warm_chain(backend)
    return setup, [start_load_back(setup, D, 1), start_load_back(setup, X, 2)]


def swa_crash_shape(backend: str) -> tuple[CacheSetup, list[LoadBackStart]]:
    """Full+SWA: load-back A (anchor D) in flight, then load-back B (anchor X), each loading a window."""
    setup = warm_swa_chain(backend)
    started = []
    for rid, tokens in ((1, D), (2, X)):
        m = setup.cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens))))
        assert int(m.device_prefix_len) == 0 and int(m.swa_host_hit_length) == WINDOW
        started.append(start_load_back(setup, tokens, rid))
    return setup, started


def overlap_served(setup: CacheSetup, a: LoadBackStart,
                   b: LoadBackStart) -> tuple[LeaseTreeCore, LeaseTreeNode]:
    """Assert the lease core served both load-backs from host; (core, X's node)."""
    core = setup.cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    assert a[3] and a[2] == len(D)
    assert b[3] and b[2] == len(X), "the overlapping load-back must be served from host"
    assert core.overlapping_load_backs == 1
    x_node = core.node_by_id(b[0])
    assert isinstance(x_node, LeaseTreeNode)
    assert x_node.load_back_pending_id == a[0]
    return core, x_node


def ack_both_and_check(setup: CacheSetup, core: LeaseTreeCore, anchors: tuple[int, int]) -> None:
    """The live leases are exactly the two load-backs'; acking both releases each once, none stale or leaked."""
    live = {lease.id for lease in core.ledger.live()}
    assert live == {i for anchor in anchors for i in core.load_backs[anchor][0].lease_ids().values()}
    cache = setup.cache
    cache.sanity_check()
    cache.ready_to_load_host_cache()
    cache.loading_check()
    cache.sanity_check()
    assert core.ledger.live_count == 0
    assert core.ledger.released == core.ledger.acquired == len(live)
    assert core.ledger.stale == 0 and core.ledger.leaked == 0
    assert not core.load_backs


def lease_core(setup: CacheSetup) -> LeaseTreeCore:
    """The cache's tree core, which must be the lease core."""
    core = setup.cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    return core


def node_of(setup: CacheSetup, tokens: list[int]) -> int:
    """The id of the node a request for `tokens` matches to."""
    return int(setup.cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens)))).best_match_node)


def lock_counters(core: LeaseTreeCore) -> dict[tuple[int, int], tuple[int, int]]:
    """(node id, component) -> (lock_ref, host_lock_ref) over the whole tree."""
    return {
        (n.id, ct): (int(n.component_data[ct].lock_ref), int(n.component_data[ct].host_lock_ref))
        for n in core._collect_all_nodes()
        for ct in range(len(n.component_data))
    }


def second_load_back_on(setup: CacheSetup, anchor: int) -> None:
    """What `_load_back_transfers` does for a load-back, on an anchor already loading."""
    cache = setup.cache
    core = cache.tree_core
    host = cache.inc_host_lock_ref(anchor).to_dec_params()
    kv_xfer, comp_xfers = core.build_load_back_spec(anchor)
    controller = cache.cache_controller
    assert controller is not None and kv_xfer.host_indices is not None
    dev = controller.load(host_indices=kv_xfer.host_indices, node_id=anchor, extra_pools=None)
    assert dev is not None
    cache._apply_cache_actions(core.commit_load_back(anchor, dev, kv_xfer, comp_xfers))
    cache.ongoing_load_back[anchor] = _OngoingLoadBack(
        anchor, cache.inc_lock_ref(anchor).to_dec_params(), host)

"""The production-crash shape on Full+SWA (write-back, sliding window 8).

Chain root -> X -> D, both demoted to host. Load-back A (anchor D) reads X's
and D's Full and D's SWA window; X's own SWA stays host-only, so a request
for X alone (load-back B, anchor X) must load X's SWA window from host, on a
node A pins for Full. Stock 0.5.23 refuses B (empty spec: the request
recomputes X); the lease core serves both.
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
from sglang.srt.mem_cache.unified_cache.components import ComponentType

from unicache.integrations.sglang.core import LeaseTreeCore
from unicache.integrations.sglang.node import LeaseTreeNode
from unicache.integrations.sglang.workload import CacheSetup, build_cache, request_stand_in

X = list(range(1, 33))
D = X + list(range(100, 132))
WINDOW = 8


def _insert(setup: CacheSetup, tokens: list[int]) -> None:
    cache, alloc = setup.cache, setup.allocator
    key = RadixKey(array("q", tokens))
    m = cache.match_prefix(MatchPrefixParams(key=key))
    dev = int(m.device_prefix_len)
    prefix = cache.path_device_indices(m.last_device_node) if dev else torch.empty(0, dtype=torch.int64)
    new = alloc.alloc(len(tokens) - dev)
    assert new is not None
    cache.insert(InsertParams(key=key, value=torch.cat((prefix, new)), prev_prefix_len=dev))


def _start_load_back(setup: CacheSetup, tokens: list[int], rid: int) -> tuple[int, int, int, bool]:
    """(anchor, host hit, tokens loaded, started) of a load-back whose ack is withheld."""
    cache = setup.cache
    m = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens))))
    assert int(m.device_prefix_len) == 0 and int(m.swa_host_hit_length) == WINDOW
    req = request_stand_in(rid, m.last_device_node, m.swa_host_hit_length, m.mamba_host_hit_length)
    anchor = int(m.best_match_node)
    out = cache.init_load_back(InitLoadBackParams(
        best_match_node=anchor, host_hit_length=m.host_hit_length, req=req))
    assert out is not None
    return anchor, int(m.host_hit_length), int(out[0]), anchor in cache.ongoing_load_back


def _crash_shape(backend: str) -> tuple[CacheSetup, list[tuple[int, int, int, bool]]]:
    setup = build_cache(backend=backend, mamba=False, swa_window=WINDOW, device_tokens=256,
                        max_context_len=512)
    setup.cache.load_back_threshold = 0
    _insert(setup, X)
    _insert(setup, D)
    setup.cache.evict_for_alloc(EvictParams(num_tokens=256, swa_num_tokens=256))
    a = _start_load_back(setup, D, 1)
    b = _start_load_back(setup, X, 2)
    return setup, [a, b]


def test_stock_core_refuses_the_second_swa_load_back() -> None:
    setup, (a, b) = _crash_shape("python")
    assert a[3] and a[2] == len(D)
    assert b[1] == len(X) and not b[3] and b[2] == 0, "stock 0.5.23 refuses the overlap"
    setup.cache.sanity_check()
    setup.cache.ready_to_load_host_cache()
    setup.cache.loading_check()
    setup.cache.sanity_check()


def test_lease_core_serves_both_swa_load_backs_and_releases_every_lease_once() -> None:
    setup, (a, b) = _crash_shape("leases")
    cache = setup.cache
    core = cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    assert a[3] and a[2] == len(D)
    assert b[3] and b[2] == len(X), "the overlapping SWA load-back must be served from host"
    assert core.overlapping_load_backs == 1
    x_node = core.node_by_id(b[0])
    assert isinstance(x_node, LeaseTreeNode)
    lb_a, lb_b = core.load_backs[a[0]][0], core.load_backs[b[0]][0]
    a_full, a_swa = lb_a.lease(ComponentType.FULL), lb_a.lease(ComponentType.SWA)
    b_swa = lb_b.lease(ComponentType.SWA)
    assert a_full is not None and a_swa is not None and b_swa is not None
    x_full, x_swa = x_node.pins(ComponentType.FULL), x_node.pins(ComponentType.SWA)
    assert x_full is not None and x_swa is not None
    assert a_full.id in x_full.ids()
    assert x_swa.ids() == [b_swa.id], "X's SWA is pinned by B alone"
    assert x_node.load_back_pending_id == a[0]
    live = {lease.id for lease in core.ledger.live()}
    assert live == set(lb_a.lease_ids().values()) | set(lb_b.lease_ids().values())
    cache.sanity_check()
    cache.ready_to_load_host_cache()
    cache.loading_check()
    cache.sanity_check()
    assert core.ledger.live_count == 0
    assert core.ledger.released == core.ledger.acquired == len(live)
    assert core.ledger.stale == 0 and core.ledger.leaked == 0
    assert not core.load_backs
    after = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", X))))
    assert int(after.device_prefix_len) == len(X), "X is on device, SWA window included"

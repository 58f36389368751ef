"""`LeaseUnifiedRadixCache`: several live load-backs on one anchor inside SGLang's cache.

The second load-back on anchor D is recorded exactly as SGLang's
`_load_back_transfers` records one (host lock on the anchor, controller load,
core commit, device lock, ``ongoing_load_back[anchor] = ...``) while the
first is still in flight. Stock `UnifiedRadixCache` overwrites the first
entry (its lock receipts are lost) and the second ack raises ``KeyError``;
the lease cache acks both in commit order and every lock and lease returns.
"""

from __future__ import annotations

from array import array

import pytest
from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.registry import get_radix_cache_factory
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache, _OngoingLoadBack

from tests.integrations.sglang.chains import D, second_load_back_on, start_load_back, warm_chain
from unicache.integrations.sglang.cache import AnchorLoadBacks, LeaseUnifiedRadixCache
from unicache.integrations.sglang.core import LeaseTreeCore
from unicache.integrations.sglang.plugin import lease_radix_cache_factory
from unicache.integrations.sglang.workload import CacheSetup


def _locks(setup: CacheSetup, node_id: int) -> tuple[int, int]:
    data = setup.cache.tree_core.node_by_id(node_id).component_data[ComponentType.FULL]
    return int(data.lock_ref), int(data.host_lock_ref)


def _two_on_one_anchor(cache_class: type[UnifiedRadixCache]) -> tuple[CacheSetup, int, tuple[int, int]]:
    setup = warm_chain("leases", cache_class)
    anchor = int(setup.cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", D)))).best_match_node)
    idle = _locks(setup, anchor)
    a = start_load_back(setup, D, 1)
    assert a[0] == anchor and a[3]
    second_load_back_on(setup, anchor)
    return setup, anchor, idle


def test_stock_cache_loses_the_first_load_back_on_a_shared_anchor() -> None:
    setup, anchor, _idle = _two_on_one_anchor(UnifiedRadixCache)
    assert len(setup.cache.ongoing_load_back) == 1, "the second entry overwrote the first"
    setup.cache.ready_to_load_host_cache()
    with pytest.raises(KeyError):
        setup.cache.loading_check()
    core = setup.cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    lost = sorted(str(receipt) for receipt in core.live_lock_receipts())
    assert lost == [f"host lock #1 on node {anchor}", f"lock #3 on node {anchor}"], (
        "the overwritten entry's receipts are lost, but their lock leases stay visible"
    )
    setup.cache.reset()
    assert not core.tree_locks and core.lock_ledger.live_count == 0


def test_lease_cache_acks_both_load_backs_on_one_anchor_in_order() -> None:
    setup, anchor, idle = _two_on_one_anchor(LeaseUnifiedRadixCache)
    cache = setup.cache
    core = cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    ongoing = cache.ongoing_load_back
    assert isinstance(ongoing, AnchorLoadBacks)
    assert len(ongoing) == 2 and ongoing.queued(anchor) == 2
    assert len(core.load_backs[anchor]) == 2
    assert _locks(setup, anchor) > idle
    cache.sanity_check()
    cache.ready_to_load_host_cache()
    cache.loading_check()
    assert len(ongoing) == 0 and ongoing.queued(anchor) == 0
    assert _locks(setup, anchor) == idle, "both load-backs' device and host locks returned"
    assert not core.load_backs and core.ledger.live_count == 0
    assert core.ledger.released == core.ledger.acquired
    cache.sanity_check()
    after = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", D))))
    assert int(after.device_prefix_len) == len(D), "D stays on device, its Mamba state included"


def test_anchor_load_backs_behaves_as_a_fifo_per_anchor() -> None:
    first, second, other = (_OngoingLoadBack(n, None, None) for n in (7, 7, 9))  # type: ignore[arg-type]
    d = AnchorLoadBacks()
    d[7] = first
    d[7] = second
    d[9] = other
    assert len(d) == 3 and d[7] is first and 7 in d and d.queued(7) == 2
    assert sorted(k for k, _ in d.items()) == [7, 9]
    assert d.pop(7) is first and d[7] is second and len(d) == 2
    assert d.pop(7) is second and 7 not in d and d.queued(7) == 0
    with pytest.raises(KeyError):
        d.pop(7)
    assert d.pop(7, None) is None
    d.clear()
    assert len(d) == 0 and not d


def test_radix_cache_backend_leases_builds_the_lease_cache() -> None:
    assert get_radix_cache_factory("leases") is lease_radix_cache_factory
    setup = warm_chain("leases", LeaseUnifiedRadixCache)
    assert isinstance(setup.cache.ongoing_load_back, AnchorLoadBacks)
    setup.cache.reset()
    assert isinstance(setup.cache.ongoing_load_back, AnchorLoadBacks), "reset keeps the FIFO map"

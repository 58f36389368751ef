"""Radix cache "unicache": tree core "unicache" in `LeaseUnifiedRadixCache`, two live load-backs on one anchor."""

from __future__ import annotations

from array import array

from sglang.srt.mem_cache.base_prefix_cache import EvictParams, MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.registry import get_radix_cache_factory

from tests.integrations.sglang.chains import insert_tokens, second_load_back_on, start_load_back
from unicache.integrations.sglang.cache import AnchorLoadBacks, LeaseUnifiedRadixCache
from unicache.integrations.sglang.plugin import unicache_radix_cache_factory
from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.workload import build_cache

X = list(range(100, 132))
D = X + list(range(500, 532))


def test_two_load_backs_on_one_anchor_are_acked_in_order() -> None:
    assert get_radix_cache_factory("unicache") is unicache_radix_cache_factory
    setup = build_cache(backend="unicache", mamba=False, device_tokens=256, max_context_len=128,
                        cache_class=LeaseUnifiedRadixCache)
    cache = setup.cache
    core = cache.tree_core
    assert isinstance(core, UnicacheTreeCore)
    insert_tokens(setup, X)
    insert_tokens(setup, D)
    cache.evict_for_alloc(EvictParams(num_tokens=256))  # write-back: both nodes backed up, then demoted
    anchor = int(cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", D)))).best_match_node)
    first = start_load_back(setup, D, 1)
    assert first[0] == anchor and first[3], "the first load-back started"
    second_load_back_on(setup, anchor)
    ongoing = cache.ongoing_load_back
    assert isinstance(ongoing, AnchorLoadBacks) and ongoing.queued(anchor) == 2
    assert len(core.load_backs[anchor]) == 2
    cache.sanity_check()
    cache.ready_to_load_host_cache()
    cache.loading_check()
    assert len(ongoing) == 0 and not core.load_backs
    assert core.ledger.live_count == 0 and core.ledger.released == core.ledger.acquired
    assert core.protected_size() == 0
    cache.sanity_check()
    after = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", D))))
    assert int(after.device_prefix_len) == len(D)
    cache.release_host_resources()

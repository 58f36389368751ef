"""`swa_tombstone_ranges` and `attach_swa_window` on tree core "unicache": the Python core's results."""

from __future__ import annotations

from array import array

import pytest
from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.treecore.errors import NodeStateError
from unicache.integrations.sglang.workload import build_cache

TOKENS = list(range(100, 132))


def _flow(backend: str) -> list[object]:
    """Insert 32 tokens (window 4: the leaf is capped into [0, 28) + [28, 32)), tombstone the older part's SWA
    with the SWA walk (the oldest SWA values; the leaf is a Full leaf), read the ranges, attach [20, 28), read them again."""
    setup = build_cache(backend=backend, mamba=False, device_tokens=128, policy="write_through",
                        max_context_len=64, swa_window=4)
    cache, alloc = setup.cache, setup.allocator
    assert isinstance(alloc, SWATokenToKVPoolAllocator)
    key = RadixKey(array("q", TOKENS))
    value = alloc.alloc(len(TOKENS))
    assert value is not None
    cache.insert(InsertParams(key=key, value=value, prev_prefix_len=0))
    core = cache.tree_core
    out: list[object] = [core.swa_tombstone_ranges(key, 0, 32)]
    cache.writing_check(write_back=True)  # the insert's write-through backup is acked (its lock released)
    cache.evict(EvictParams(num_tokens=0, swa_num_tokens=8))
    out.append(core.swa_tombstone_ranges(key, 0, 32))
    out.append(core.swa_tombstone_ranges(key, 10, 30))
    loaded = alloc.swa_attn_allocator.alloc(8)
    assert loaded is not None
    cache._apply_cache_actions(core.attach_swa_window(key, 20, 28, loaded))
    out.append(core.swa_tombstone_ranges(key, 0, 32))
    out.append(int(cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", TOKENS[:24])))).device_prefix_len))
    out.append((core.swa_evictable_size(), core.swa_protected_size()))
    cache.sanity_check()
    if isinstance(core, UnicacheTreeCore):
        with pytest.raises(NodeStateError, match="live SWA"):
            core.attach_swa_window(key, 20, 28, loaded)
        with pytest.raises(ValueError, match="component is not enabled"):
            core.swa_tombstone_ranges(key, 0, 32, component_type=ComponentType.MAMBA)
    setup.cache.release_host_resources()
    return out


def test_swa_windows_as_the_python_core() -> None:
    ours, stock = _flow("unicache"), _flow("python")
    assert ours == stock
    assert ours[1] == [(0, 28)] and ours[3] == [(0, 20)], ours

"""`LeaseMambaComponent`: SGLang's Mamba component without the #36770 crashes.

Stock 0.5.23 asserts ``Can not alloc mamba cache`` in two places when a Mamba
slot is needed and eviction frees none (every cached state is pinned):

* checkpointing a request (`_alloc_mamba_slot`, reached from
  `prepare_for_caching_req`, with or without the extra buffer): here the
  allocation does SGLang's steps (the lazy extra buffer's early release of
  the lock's Mamba part, eviction, retry) and then raises
  `MambaSlotUnavailable`; the checkpoint catches it, the state is not cached
  (counted in `states_not_cached`), nothing is inserted for it, and the
  request proceeds with its own slot untouched;
* the copy-on-write of a matched state into the request's own slot
  (`finalize_match_result_in_cache`, ``assert dst_index is not None``): here
  the state is not copied (counted in `states_not_copied`) and the match is
  turned into a miss with SGLang's own `zero_match_result` (a Mamba prefix
  cannot be reused without its state), so the request proceeds and
  recomputes; the scheduler allocates its slot as for any miss.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from dataclasses import replace

import torch
from sglang.srt.mem_cache.base_prefix_cache import (
    EvictParams,
    InsertParams,
    MatchPrefixParams,
    MatchResult,
    zero_match_result,
)
from sglang.srt.mem_cache.allocator.mamba import MambaSlotAllocator
from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool
from sglang.srt.mem_cache.unified_cache.components.mamba import MambaComponent
from sglang.srt.runtime_context import get_exec

from unicache.integrations.sglang.errors import MambaSlotUnavailable

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req


class LeaseMambaComponent(MambaComponent):
    """The Mamba driver of a lease core; installed by `LeaseTreeCore` on the cache's own instance."""

    states_not_cached = 0
    states_not_copied = 0

    def _allocator(self) -> MambaSlotAllocator:
        pool = self.cache.req_to_token_pool
        if not isinstance(pool, HybridReqToTokenPool):
            raise TypeError(f"Mamba component on a {type(pool).__name__}, not a HybridReqToTokenPool")
        return pool.mamba_allocator

    def _alloc_mamba_slot(self, req: Optional[Req] = None) -> torch.Tensor:
        """SGLang's slot allocation (lazy extra-buffer release, evict, retry); none left raises typed."""
        allocator = self._allocator()
        slot: Optional[torch.Tensor] = allocator.alloc(1)
        if slot is not None:
            return slot
        if req is not None and get_exec().mamba.enable_mamba_extra_buffer_lazy:
            self._release_consumed_cow_lock(req)
        self.cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))
        slot = allocator.alloc(1)
        if slot is None:
            raise MambaSlotUnavailable(1, int(allocator.available_size()))
        return slot

    def _release_consumed_cow_lock(self, req: Req) -> None:
        """SGLang's lazy extra buffer (0.5.23 `components/mamba.py:531-548`): give back the Mamba part
        of the request's lock, whose copy-on-write source prefill has consumed, keeping its KV locks."""
        lock = req.lock
        ct = self.component_type
        if lock is None or lock.swa_released or ct in lock.receipt.skipped_lock_components:
            return
        others = tuple(c for c in self.cache.tree_components if c != ct)
        self.cache.dec_lock_ref(lock.node, replace(lock.receipt, skipped_lock_components=others))
        lock.receipt.skipped_lock_components += (ct,)

    def prepare_for_caching_req(
        self,
        req: Req,
        insert_params: InsertParams,
        token_ids_len: int,
        is_finished: bool,
    ) -> Optional[int]:
        try:
            return super().prepare_for_caching_req(req, insert_params, token_ids_len, is_finished)
        except MambaSlotUnavailable:
            self.states_not_cached += 1
            insert_params.mamba_value = None
            return 0

    def finalize_match_result_in_cache(
        self, params: MatchPrefixParams, result: MatchResult
    ) -> MatchResult:
        """SGLang's copy-on-write of the matched state; no slot after eviction -> a miss, counted."""
        if not params.cow_mamba:
            return result
        core = self.tree_core
        if core is None:
            raise TypeError("LeaseMambaComponent is not attached to a tree core")
        src_index = core.get_component_device_value(result.best_match_node, self.component_type)
        if src_index is None:
            return result
        req = params.req
        if req is None:
            raise TypeError("match_prefix(cow_mamba=True) needs the request whose slot receives the copy")
        if not req.kv.holds_mamba:
            allocator = self._allocator()
            dst_index = allocator.alloc(1)
            if dst_index is None:
                lock = self.cache.inc_lock_ref(result.best_match_node)
                self.cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))
                dst_index = allocator.alloc(1)
                self.cache.dec_lock_ref(result.best_match_node, lock.to_dec_params())
                if dst_index is None:
                    self.states_not_copied += 1
                    return zero_match_result(self.cache, result, extra_key=req.extra_key)
            req.kv.mamba_pool_idx = dst_index[0]
        req.kv.mamba_cow_src_index = src_index
        req.kv.mamba_needs_clear = False
        return result

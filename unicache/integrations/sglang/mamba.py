"""`LeaseMambaComponent`: SGLang's Mamba component without the #36770 crash.

Stock 0.5.23 asserts ``Can not alloc mamba cache`` when a checkpoint needs a
Mamba slot and eviction frees none (every cached state is pinned). Here the
allocation raises `MambaSlotUnavailable`, and checkpointing an unfinished
request catches it: the state is not cached (counted in
`states_not_cached`), nothing is inserted for this checkpoint, and the
request proceeds with its own slot untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams
from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool
from sglang.srt.mem_cache.unified_cache.components.mamba import MambaComponent

from unicache.integrations.sglang.errors import MambaSlotUnavailable

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req


class LeaseMambaComponent(MambaComponent):
    """The Mamba driver of a lease core; installed by `LeaseTreeCore` on the cache's own instance."""

    states_not_cached = 0

    def _alloc_mamba_slot(self, req: Optional[Req] = None) -> torch.Tensor:
        pool = self.cache.req_to_token_pool
        if not isinstance(pool, HybridReqToTokenPool):
            raise TypeError(f"Mamba component on a {type(pool).__name__}, not a HybridReqToTokenPool")
        allocator = pool.mamba_allocator
        slot: Optional[torch.Tensor] = allocator.alloc(1)
        if slot is not None:
            return slot
        if req is not None and self.cache.enable_mamba_extra_buffer:
            return super()._alloc_mamba_slot(req)
        self.cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))
        slot = allocator.alloc(1)
        if slot is None:
            raise MambaSlotUnavailable(1, int(allocator.available_size()))
        return slot

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

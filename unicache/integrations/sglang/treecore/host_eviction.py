"""Host eviction: duplicate host copies first under write-back, then host leaves, least recent first."""

from __future__ import annotations

from array import array
from typing import Final

from sglang.srt.environ import envs
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import DriveHostEvictionResult
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.state import FULL, TreeState
from unicache.integrations.sglang.treecore.values import host_tensor

_DIGEST_MASK: Final = (1 << 42) - 1
"""The duplicate-reclaim digest keeps 42 bits (as SGLang's)."""

@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class HostEviction(TreeState):
    """The host eviction part of `UnicacheTreeCore` (see the module docstring)."""

    def drive_host_eviction(self, component_type: ComponentType, num_tokens: int) -> DriveHostEvictionResult:
        result = DriveHostEvictionResult()
        if component_type != FULL:
            for part in self.aux:
                if part.component_type == component_type:
                    part.drive_host_eviction(num_tokens, result)
            return result
        hvals: list[array[int]] = []
        freed = 0
        if self.is_write_back and not envs.SGLANG_HICACHE_SKIP_HOST_DUPLICATE_RECLAIM.get():
            freed = self._reclaim_duplicates(num_tokens, hvals)
        lru = self.store.lru_host
        while freed < num_tokens:
            x = lru.pop()
            if x is None:
                break
            if not self.is_evictable_host_leaf(x):
                continue
            freed += self._drop_host(x, hvals)
            for part in self.aux:
                part.drop_all(x, result, count_host=True)
            parent = x.parent
            assert parent is not None
            self._remove(x)
            self._remove_tombstones(parent, result)
        if freed:
            result.tracker[FULL] = freed
        if hvals:
            result.host_frees[FULL].extend(host_tensor(h) for h in hvals)
        return result

    def _reclaim_duplicates(self, num_tokens: int, hvals: list[array[int]]) -> int:
        """Free host copies of nodes also on device: a first pass sparing device leaves, then all (SGLang's order)."""
        dups = self.store.dups
        dev, host = self.store.dev, self.store.host_col
        freed = 0
        swept: list[int] = []
        for spare_leaves in (True, False):
            if freed >= num_tokens:
                break
            for nid, x in dups.items():
                if freed >= num_tokens:
                    break
                if x.slot == 0 or dev[x.slot] is None or host[x.slot] is None:
                    swept.append(nid)
                    continue
                if spare_leaves and self.is_evictable_device_leaf(x):
                    continue
                if self._host_pinned(x):
                    continue
                freed += self._drop_host(x, hvals)
                self.write_back_duplicate_reclaim_digest = (
                    self.write_back_duplicate_reclaim_digest * 1000003 + x.id + 1) & _DIGEST_MASK
                swept.append(nid)
        for nid in swept:
            dups.pop(nid, None)
        return freed

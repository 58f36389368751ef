"""What tree core ``"unicache"`` does not cover yet, refused at construction with one line naming it.

As SGLang's Rust core refuses what it does not support (`rust_tree_core/adapter.py`),
each refusal is a `ValueError` naming what is refused and pointing to tree
core ``"leases"``, which covers every configuration SGLang's Python core does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.runtime_context import get_exec

if TYPE_CHECKING:
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.unified_cache.components import TreeComponent

COVERED = ((ComponentType.FULL,), (ComponentType.FULL, ComponentType.MAMBA), (ComponentType.FULL, ComponentType.SWA))
"""The component sets covered, in SGLang's order."""

LEASES_HINT = "; use tree core 'leases' (SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=leases)"


def refusal(params: CacheInitParams, components: dict[ComponentType, TreeComponent]) -> str | None:
    """The first configuration of `params` this core does not cover, in words; None when it covers all."""
    comps = tuple(params.tree_components or components)
    if comps not in COVERED:
        names = "+".join(c.name for c in comps)
        return f"components {names} (it covers FULL, FULL+MAMBA and FULL+SWA so far)"
    if ComponentType.MAMBA in comps and get_exec().mamba.mamba_max_states_per_path >= 0:
        return "a Mamba path cap (--mamba-max-states-per-path)"
    if ComponentType.SWA in comps:
        what = _swa_refusal(params)
        if what is not None:
            return what
    if params.enable_session_radix_cache:
        return "--enable-session-radix-cache"
    if params.component_registry_override:
        return "component_registry_override (custom components)"
    if params.is_eagle:
        return "EAGLE bigram keys"
    if params.enable_kv_cache_events:
        return "KV cache events"
    if params.eviction_policy.lower() != "lru":
        return f"eviction policy {params.eviction_policy!r} (it covers 'lru')"
    return None


def refuse_unsupported(params: CacheInitParams, components: dict[ComponentType, TreeComponent]) -> None:
    """Raise `ValueError` (one line) if `params` names a configuration this core does not cover."""
    what = refusal(params, components)
    if what is not None:
        raise ValueError(f"tree core 'unicache' does not support {what}{LEASES_HINT}")


def _swa_refusal(params: CacheInitParams) -> str | None:
    """The first SWA setting this core does not cover, in words."""
    window = params.swa_retain_window
    if window is None or window <= 0:
        return "an SWA component without a positive sliding_window_size"
    if not params.swa_gates_prefix_match:
        return "an SWA request ring (swa_gates_prefix_match=False)"
    from sglang.srt.mem_cache.allocator.unified_hybrid_swa import UnifiedSWAAllocatorBase

    if isinstance(params.token_to_kv_pool_allocator, UnifiedSWAAllocatorBase):
        return "the unified SWA allocator (its SWA rows move under compaction)"
    return None

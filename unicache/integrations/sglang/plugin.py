"""Registration of the ``"leases"`` tree core with SGLang's registry.

`register` is the ``sglang.srt.plugins`` entry point of this distribution:
SGLang's `load_plugins()` runs it in every server process (engine, scheduler,
detokenizer) before any cache is built. Idempotent.
"""

from __future__ import annotations

from typing import Final

from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.unified_cache.components import ComponentType, TreeComponent
from sglang.srt.mem_cache.unified_cache.tree_core_registry import (
    get_tree_core_factory,
    register_tree_core_backend,
)
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    UnifiedTreeCoreInterface,
)

BACKEND_NAME: Final = "leases"


def lease_tree_core_factory(
    params: CacheInitParams, components: dict[ComponentType, TreeComponent]
) -> UnifiedTreeCoreInterface:
    """Build a `LeaseTreeCore` (SGLang's `TreeCoreFactory` signature)."""
    from unicache.integrations.sglang.core import LeaseTreeCore

    return LeaseTreeCore(params, components)


def register() -> None:
    """Register backend ``"leases"`` unless already registered."""
    if get_tree_core_factory(BACKEND_NAME) is None:
        register_tree_core_backend(BACKEND_NAME, lease_tree_core_factory)

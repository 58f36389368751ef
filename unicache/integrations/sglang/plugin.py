"""Registration of ``"leases"`` and ``"unicache"`` with SGLang's tree-core and radix-cache registries.

`register` is the ``sglang.srt.plugins`` entry point of this distribution:
SGLang's `load_plugins()` runs it in every server process (engine, scheduler,
detokenizer) before any cache is built. Idempotent. Three names:

* tree core ``"unicache"`` (``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=unicache``):
  `UnicacheTreeCore`, unicache's own tree and leases behind SGLang's
  interface (FULL so far; other configurations refused at construction);
  radix cache ``"unicache"`` (``--radix-cache-backend unicache``): that core
  inside `LeaseUnifiedRadixCache`;

* tree core ``"leases"`` (``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=leases``):
  `LeaseTreeCore` inside SGLang's stock `UnifiedRadixCache`;
* radix cache ``"leases"`` (``--radix-cache-backend leases``): the same core
  inside `LeaseUnifiedRadixCache`, which also keeps several live load-backs
  on one anchor. The recommended setting.

With ``UNICACHE_SGLANG_RESET_REPORT=<path>`` set, `register` also installs
the reset report (`report`): before each cache reset, whatever the tree
core, SGLang's sanity check and the leases left, one JSON line to `path`.
"""

from __future__ import annotations

from typing import Final

from sglang.srt.mem_cache.base_prefix_cache import BasePrefixCache
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.registry import (
    TreeCacheBuildContext,
    create_unified_radix_cache,
    get_radix_cache_factory,
    register_radix_cache_backend,
)
from sglang.srt.mem_cache.unified_cache.components import ComponentType, TreeComponent
from sglang.srt.mem_cache.unified_cache.tree_core_registry import (
    get_tree_core_factory,
    register_tree_core_backend,
)
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    UnifiedTreeCoreInterface,
)

from unicache.integrations.sglang.report import install_reset_report

BACKEND_NAME: Final = "leases"
UNICACHE_BACKEND: Final = "unicache"


def lease_tree_core_factory(
    params: CacheInitParams, components: dict[ComponentType, TreeComponent]
) -> UnifiedTreeCoreInterface:
    """Build a `LeaseTreeCore` (SGLang's `TreeCoreFactory` signature)."""
    from unicache.integrations.sglang.core import LeaseTreeCore

    return LeaseTreeCore(params, components)


def unicache_tree_core_factory(
    params: CacheInitParams, components: dict[ComponentType, TreeComponent]
) -> UnifiedTreeCoreInterface:
    """Build a `UnicacheTreeCore` (SGLang's `TreeCoreFactory` signature)."""
    from unicache.integrations.sglang.treecore.core import UnicacheTreeCore

    return UnicacheTreeCore(params, components)


def lease_radix_cache_factory(ctx: TreeCacheBuildContext) -> BasePrefixCache:
    """Build `LeaseUnifiedRadixCache` with tree core ``"leases"`` through SGLang's own builder."""
    from unicache.integrations.sglang.cache import LeaseUnifiedRadixCache

    ctx.params.tree_core_backend = BACKEND_NAME
    return create_unified_radix_cache(ctx, cache_class=LeaseUnifiedRadixCache)


def unicache_radix_cache_factory(ctx: TreeCacheBuildContext) -> BasePrefixCache:
    """Build `LeaseUnifiedRadixCache` with tree core ``"unicache"`` through SGLang's own builder."""
    from unicache.integrations.sglang.cache import LeaseUnifiedRadixCache

    ctx.params.tree_core_backend = UNICACHE_BACKEND
    return create_unified_radix_cache(ctx, cache_class=LeaseUnifiedRadixCache)


def register() -> None:
    """Register tree cores and radix caches ``"leases"`` and ``"unicache"`` unless already registered.

    Also the reset report's hook when ``UNICACHE_SGLANG_RESET_REPORT`` is set (`install_reset_report`).
    """
    if get_tree_core_factory(BACKEND_NAME) is None:
        register_tree_core_backend(BACKEND_NAME, lease_tree_core_factory)
    if get_tree_core_factory(UNICACHE_BACKEND) is None:
        register_tree_core_backend(UNICACHE_BACKEND, unicache_tree_core_factory)
    if get_radix_cache_factory(BACKEND_NAME) is None:
        register_radix_cache_backend(BACKEND_NAME, lease_radix_cache_factory)
    if get_radix_cache_factory(UNICACHE_BACKEND) is None:
        register_radix_cache_backend(UNICACHE_BACKEND, unicache_radix_cache_factory)
    install_reset_report()

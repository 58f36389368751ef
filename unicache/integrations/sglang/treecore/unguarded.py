"""`UnguardedTreeCore`: the parts of tree core "unicache" joined into one class, without its failure guards.

The parts (`locks`, `sizes`, `match`, `inserts`, `eviction`,
`host_eviction`, `backup`, `load_back`, `views`, `sanity`, `unsupported`)
are traits over `state.TreeState`; this class joins them under SGLang's
`UnifiedTreeCoreInterface`, builds the tools and answers the configuration
SGLang switches on after construction. The class SGLang builds is
`core.UnicacheTreeCore`: this one with `failures.dumps_on_failure`, which
rewrites methods on its class at import (so that class is interpreted,
and this one allows interpreted subclasses; see docs/sglang.md, "Compiled
build"). The design is in `core`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from mypy_extensions import mypyc_attr
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.components import TreeComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import UnifiedTreeCoreInterface

from unicache.integrations.sglang.metrics import SGLangMetrics
from unicache.integrations.sglang.treecore.backup import Backups
from unicache.integrations.sglang.treecore.dump import dump_directory
from unicache.integrations.sglang.treecore.errors import RefusedFeatureError
from unicache.integrations.sglang.treecore.eviction import DeviceEviction
from unicache.integrations.sglang.treecore.failures import FailureDumps
from unicache.integrations.sglang.treecore.host_eviction import HostEviction
from unicache.integrations.sglang.treecore.inserts import Inserts
from unicache.integrations.sglang.treecore.livedump import LiveDump
from unicache.integrations.sglang.treecore.load_back import LoadBacks
from unicache.integrations.sglang.treecore.locks import Locks
from unicache.integrations.sglang.treecore.match import Matching
from unicache.integrations.sglang.treecore.metrics import register_core_metrics
from unicache.integrations.sglang.treecore.sanity import SanityCheck
from unicache.integrations.sglang.treecore.sizes import Sizes
from unicache.integrations.sglang.treecore.swa_windows import SWAWindows
from unicache.integrations.sglang.treecore.unsupported import UnsupportedFeatures
from unicache.integrations.sglang.treecore.views import TreeViews

if TYPE_CHECKING:
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams


@mypyc_attr(allow_interpreted_subclasses=True)
class UnguardedTreeCore(
    Locks, Sizes, Matching, Inserts, DeviceEviction, HostEviction, Backups, LoadBacks, TreeViews, SanityCheck,
    SWAWindows, UnsupportedFeatures, UnifiedTreeCoreInterface,
):
    """Tree core "unicache" without its failure guards (see the module docstring)."""

    def __init__(self, params: CacheInitParams, components: dict[ComponentType, TreeComponent]) -> None:
        super().__init__(params, components)
        directory = dump_directory()
        self.failure_dumps = FailureDumps(self, directory)
        self.live_dump = LiveDump(self, directory)
        self._live_request = self.live_dump.request
        self.metrics: Optional[SGLangMetrics] = register_core_metrics(self) if params.enable_metrics else None

    # ==== configuration switched on after construction ====

    @property
    def enable_storage(self) -> bool:
        return False

    @enable_storage.setter
    def enable_storage(self, value: bool) -> None:
        if value:
            raise RefusedFeatureError("a HiCache storage backend")

    @property
    def enable_external_cache_linker(self) -> bool:
        return False

    @enable_external_cache_linker.setter
    def enable_external_cache_linker(self, value: bool) -> None:
        if value:
            raise RefusedFeatureError("the external cache linker")

    def set_hicache_enabled(self) -> None:
        self.enable_hicache = True

    def set_host_memory_buffer_only(self) -> None:
        raise RefusedFeatureError("buffer-only host memory (--hicache-host-memory-mode buffer)")

"""`UnicacheTreeCore`: SGLang's `UnifiedTreeCoreInterface` on unicache's tree, stores, eviction queues and leases.

Design.

*Handles.* SGLang names nodes by `NodeId` (an int it passes across the
boundary in match results, receipts and acks). Here a NodeId is the id of a
unicache `Node` of one `RadixTree` (token ids as 8-byte keys, SGLang's page
size): ids come from one counter that survives resets and are never
reused, and `_nodes` maps the live ones to their nodes (a removed node
leaves it at once, so a stale id raises `UnknownNodeError`, a `KeyError` as
SGLang expects). A split keeps the lower fragment's id (unicache's split
does, as SGLang's does) and registers the new upper one.

*Memory.* SGLang's allocators own every device and host index. The core
keeps them in a `FullStore` in its engine-owned mode
(`unicache.components.handed`): insert, load-back and backup hand the index
values in (converted once from the tensors, `values`), the store records
them per node, one per token, and where unicache's own engine would free to
its pools it hands them back; every eviction step drains that outbox into
its result's `device_frees`/`host_frees`. The store never allocates, and
refuses to hand back values a live lease pins. Beside the values the core
keeps the tensor each node's device values came in as (a clone, sliced by
splits: `_tensors`): it is what SGLang reads back
(`collect_full_device_indices`, backup specs) and gets back (device frees),
so device values cross the boundary as a tensor once, at insert or
load-back; `sanity_check` compares it with the store's values.

*Pins.* Every pin is a lease of one `LeaseLedger`; nothing else pins and
there is no counter. Device tier: a device lock (`inc_lock_ref`) is one
lease pinning the Full pin set of every node from its anchor to the root
(the device-evicted bottom segment included, as SGLang locks it); a Full
pin (`inc_full_pin`, which hands SGLang no receipt) is the same, kept on a
per-node stack. Host tier (`FullHost` pin sets): a host lock pins its
anchor, a write-through mark (`mark_write_through_pending`) pins every node
its backup covers, a load-back pin (`commit_load_back`) pins the nodes whose
host copies it reads. Owners: the `TreeReceipt` SGLang holds for a lock
(its `to_dec_params()` is itself), `WriteThroughMark` by ack id,
`LoadBackPin` by anchor (a FIFO per anchor, so several load-backs on one
anchor are acked in order). Every release checks the receipt first: a
plain SGLang receipt or one of another core raises `ForeignReceiptError`,
a released or reset-revoked one `SpentReceiptError`, one given to the
wrong node or release `MisdirectedReceiptError`, each naming node, lock and
component, before anything changes. A split pins the new upper fragment
with every lease of the lower one (SGLang copies its counters there). The
inspection reads SGLang's tests use (lock refs, pending ids) count the
leases in the node's pin sets. A node's pin sets are made at its first pin
and kept while it lives (the store drops them with the node), so a lock
allocates its receipt and its lease, and no pin set once the path has one.

*Sizes.* Device tokens held (`_total`) and protected tokens (`_protected`,
device tokens of nodes whose Full pin set is non-empty) are kept
incrementally: a lease acquire adds the tokens of each node whose pin set
it makes non-empty, a release subtracts those of each it drains, values
published onto a pinned node count as protected. Evictable = total -
protected. `sanity_check` recomputes both from the tree and the live
leases.

*Eviction.* SGLang drives device eviction step-wise (start, next node,
leaf, demote / backup / drop, end). The candidates are the store's device
eviction queue (`EvictionQueue`, least recently used first): every node
that may have become an evictable device leaf is pushed when it does (its
values published, its last pin drained, its last device child dropped, a
split), and a pop that finds a node that is not one drops it. A node
handed to SGLang and left on device is filed again at the walk's end.
Host eviction pops the store's host queue the same way; under write-back
it first reclaims host copies of nodes also on device (the store's
insertion-ordered duplicate index), sparing device leaves in a first pass,
as SGLang does. Access times mirror SGLang's clock event for event (a tick
per node creation, per insert step, per split; a match stamps its path
bottom-up with decreasing times), scaled so the orders agree, which makes
the LRU victims SGLang's.

*Inserts* run in SGLang's steps: the walk suspends after a step that emits
a `BackupKV` (write-through), the only barrier Full has; frees of
duplicate request KV (`FreeDeviceKV`) are deferred to the barrier.

*Components.* Full is the core itself; every other configured component
is a `part.ComponentPart` in `aux` (Mamba: `mamba.MambaPart`, whose
essay says how its states, LRU lists, walks and leases work), called at
each step where SGLang's core calls its component drivers. The Full code
loops over `aux` and holds no component's logic.

What it covers and refuses: `refusals` (FULL or FULL+MAMBA, LRU, no
Mamba path cap, no session cache, no custom components, no EAGLE, no KV
events) at construction; a
storage backend, buffer-only host memory and the external cache linker
when SGLang switches them on (`RefusedFeatureError`); namespaced keys
(`extra_key`, `cache_salt`) at match or insert (`NamespacedKeyError`). The
interface methods only those configurations reach raise the same errors.

*Modules.* The class SGLang sees is `UnicacheTreeCore`, here; its parts,
one concept each, are classes over the shared `state.TreeState`: `locks`,
`sizes`, `match`, `inserts` (with `walk`), `eviction` (the device walk),
`host_eviction`, `backup` (and write-through marks), `load_back`, `views`
(reads and reset), `sanity`, `unsupported` (the refused features' methods);
the auxiliary components: `part` (what the core asks of one), `mamba`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.components import TreeComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import UnifiedTreeCoreInterface

from unicache.integrations.sglang.metrics import SGLangMetrics

from unicache.integrations.sglang.treecore.backup import Backups
from unicache.integrations.sglang.treecore.dump import dump_directory
from unicache.integrations.sglang.treecore.errors import RefusedFeatureError
from unicache.integrations.sglang.treecore.eviction import DeviceEviction
from unicache.integrations.sglang.treecore.failures import FailureDumps, dumps_on_failure
from unicache.integrations.sglang.treecore.host_eviction import HostEviction
from unicache.integrations.sglang.treecore.inserts import Inserts
from unicache.integrations.sglang.treecore.livedump import LiveDump
from unicache.integrations.sglang.treecore.load_back import LoadBacks
from unicache.integrations.sglang.treecore.locks import Locks
from unicache.integrations.sglang.treecore.match import Matching
from unicache.integrations.sglang.treecore.metrics import register_core_metrics
from unicache.integrations.sglang.treecore.sanity import SanityCheck
from unicache.integrations.sglang.treecore.sizes import Sizes
from unicache.integrations.sglang.treecore.state import LEASE_HISTORY_ENV, lease_history
from unicache.integrations.sglang.treecore.swa_windows import SWAWindows
from unicache.integrations.sglang.treecore.unsupported import UnsupportedFeatures
from unicache.integrations.sglang.treecore.views import TreeViews

if TYPE_CHECKING:
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams

__all__ = ["LEASE_HISTORY_ENV", "UnicacheTreeCore", "lease_history"]


@dumps_on_failure
class UnicacheTreeCore(
    Locks, Sizes, Matching, Inserts, DeviceEviction, HostEviction, Backups, LoadBacks, TreeViews, SanityCheck,
    SWAWindows, UnsupportedFeatures, UnifiedTreeCoreInterface,
):
    """Tree core ``"unicache"`` for FULL and FULL+MAMBA (see the module docstring).

    Tools (`dump`, `failures`, `livedump`, `metrics`, `record`): a lease
    error or failed sanity check writes a dump into the dump directory,
    SIGUSR1 writes one at the next safe point (`match_prefix`,
    `evictable_size`), and with ``enable_metrics`` the ledger has a clock and
    the core's metrics are in SGLang's ``/metrics``.
    """

    supports_rotation_base = False

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

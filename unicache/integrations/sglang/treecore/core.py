"""`UnicacheTreeCore`: SGLang's `UnifiedTreeCoreInterface` on unicache's tree, Full store, eviction queues and leases.

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

What it covers and refuses: `refusals` (FULL alone, LRU, no session
cache, no custom components, no EAGLE, no KV events) at construction; a
storage backend, buffer-only host memory and the external cache linker
when SGLang switches them on (`RefusedFeatureError`); namespaced keys
(`extra_key`, `cache_salt`) at match or insert (`NamespacedKeyError`). The
interface methods only those configurations reach raise the same errors.
"""

from __future__ import annotations

import os
import time
from array import array
from collections import defaultdict, deque
from collections.abc import Sequence
from itertools import count
from typing import TYPE_CHECKING, Final, Optional, TypeVar, cast

import torch
from sglang.srt.environ import envs
from sglang.srt.mem_cache.base_prefix_cache import (
    DecLockRefParams,
    DecLockRefResult,
    IncLockRefResult,
    InsertParams,
    InsertResult,
    MatchPrefixParams,
    MatchResult,
)
from sglang.srt.mem_cache.events import KVCacheEventRecorder
from sglang.srt.mem_cache.hicache_storage import PoolName, PoolTransfer
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.cache_action import (
    BackupKV,
    CacheAction,
    ComponentAction,
    FreeDeviceKV,
    UpdatePendingBackupOnNodeSplit,
)
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.components import CacheTransferPhase, TreeComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core import StorageBackupSpec, UnifiedTreeNode
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    BufferBackupSnapshot,
    BufferBackupState,
    DecSwaLockOnlyResult,
    DemoteResult,
    DriveHostEvictionResult,
    DropSubtreeNoHostResult,
    EvictDeviceLeafResult,
    EvictDeviceNextNodeResult,
    InsertStepResult,
    NodeId,
    RadixCacheWalkResult,
    TreePathNodeInfo,
    UnifiedTreeCoreInterface,
)

from leases import Borrowed, Held, Lease, LeaseLedger, PinSet
from unicache.components.full import FullStore
from unicache.components.handed import HandedValues
from unicache.integrations.sglang.metrics import SGLangMetrics
from unicache.integrations.sglang.treecore.dump import dump_directory
from unicache.integrations.sglang.treecore.errors import (
    ForeignReceiptError,
    FullPinMissingError,
    MisdirectedReceiptError,
    NamespacedKeyError,
    NodeStateError,
    PendingMarkError,
    RefusedFeatureError,
    SpentReceiptError,
    TreeCoreSanityError,
    UnknownLoadBackError,
    UnknownNodeError,
)
from unicache.integrations.sglang.treecore.failures import FailureDumps, dumps_on_failure
from unicache.integrations.sglang.treecore.livedump import LiveDump
from unicache.integrations.sglang.treecore.metrics import register_core_metrics
from unicache.integrations.sglang.treecore.receipts import (
    DEVICE_LOCK,
    FULL_PIN,
    HOST_LOCK,
    FullHost,
    LoadBackPin,
    TreeReceipt,
    WriteThroughMark,
)
from unicache.integrations.sglang.treecore.record import CoreRecord
from unicache.integrations.sglang.treecore.refusals import refuse_unsupported
from unicache.integrations.sglang.treecore.values import host_array, host_tensor, id_list
from unicache.markers import Full
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree, common_pages

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.hicache_storage import PoolTransferResult

_FULL: Final = ComponentType.FULL
_TB: Final = 8
"""Bytes a token id takes in the keys (SGLang's token ids are int64)."""
_TICK: Final = 1 << 20
"""Clock units per SGLang time-counter step: a match stamps a path of up to `_TICK` nodes below one step."""
_DIGEST_MASK: Final = (1 << 42) - 1

LEASE_HISTORY_ENV: Final = "UNICACHE_SGLANG_LEASE_HISTORY"
"""Lease events the ledger keeps (its flight recorder, which dumps carry); 0, the default, keeps none (the ring
costs a record per acquire and release: `benchmarks/bench_treecore_tools.py`). Dumps carry the core's own record
of its last acks and refused load-backs either way (`record`)."""

Actions = list[CacheAction | ComponentAction]
C = TypeVar("C")


def lease_history() -> int:
    """The ledger's event-ring size from `UNICACHE_SGLANG_LEASE_HISTORY` (0 when unset); a bad value raises."""
    raw = os.environ.get(LEASE_HISTORY_ENV, "0")
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"{LEASE_HISTORY_ENV}={raw!r}: must be an int >= 0 (lease events kept for dumps)")
    return n


def _holders(lease: Borrowed[Lease[C, Held]]) -> list[Node]:
    """The nodes a lease pins (every pin set of this core is made by a store for a node: `pin_set`, `host_pin_set`)."""
    return cast("list[Node]", [p.holder for p in lease.pin_sets()])


class _InsertWalk:
    """The state of the one suspended insert: where the walk stands and what it still has to emit."""

    __slots__ = ("params", "tb", "n", "value", "node", "pos", "result", "pending")

    def __init__(self, params: InsertParams, tb: bytes, n: int, value: torch.Tensor, node: Node) -> None:
        self.params = params
        self.tb = tb
        self.n = n
        self.value = value
        self.node = node
        self.pos = 0
        self.result = InsertResult(prefix_len=0, adopted_ranges={} if params.track_adopted_ranges else None)
        self.pending: Actions = []


@dumps_on_failure
class UnicacheTreeCore(UnifiedTreeCoreInterface):
    """Tree core ``"unicache"`` for FULL (see the module docstring).

    Tools (`dump`, `failures`, `livedump`, `metrics`, `record`): a lease
    error or failed sanity check writes a dump into the dump directory,
    SIGUSR1 writes one at the next safe point (`match_prefix`,
    `evictable_size`), and with ``enable_metrics`` the ledger has a clock and
    the core's metrics are in SGLang's ``/metrics``.
    """

    supports_rotation_base = False

    def __init__(self, params: CacheInitParams, components: dict[ComponentType, TreeComponent]) -> None:
        refuse_unsupported(params, components)
        self.page_size = params.page_size
        self.is_eagle = False
        alloc = params.token_to_kv_pool_allocator
        self.device = torch.device(alloc.device) if alloc is not None else torch.device("cpu")
        self.enable_hicache = False
        self.is_host_memory_buffer_only = False
        self.write_through_threshold = 256
        self.is_write_back = False
        self.has_swa_host_pool = False
        self.write_back_duplicate_reclaim_digest = 0
        self.kv_events = KVCacheEventRecorder(enabled=False, page_size=params.page_size,
                                              lora_names=params.kv_event_lora_names)
        self.ledger = LeaseLedger("sglang tree core 'unicache'", history=lease_history(),
                                  clock=time.monotonic if params.enable_metrics else None)
        self.record = CoreRecord(self.ledger)
        self._ids = count(1)
        self._clock = 0
        self._load_back_seq = count(1)
        self._empty = torch.empty((0,), dtype=torch.int64, device=self.device)
        self._empty_host = torch.empty((0,), dtype=torch.int64, device="cpu")
        self.device_locks: dict[int, Lease[Full, Held]] = {}
        self.host_locks: dict[int, Lease[FullHost, Held]] = {}
        self.full_pins: dict[int, list[Lease[Full, Held]]] = {}
        self.write_marks: dict[int, Lease[FullHost, Held]] = {}
        self.load_backs: dict[int, deque[Lease[FullHost, Held]]] = {}
        self._build_tree()
        directory = dump_directory()
        self.failure_dumps = FailureDumps(self, directory)
        self.live_dump = LiveDump(self, directory)
        self._live_request = self.live_dump.request
        self.metrics: Optional[SGLangMetrics] = register_core_metrics(self) if params.enable_metrics else None

    def _build_tree(self) -> None:
        """A fresh tree, store and bookkeeping (construction and `reset`)."""
        self.store = FullStore.engine_owned(self.page_size, FullHost)
        handed = self.store.handed
        assert handed is not None
        self.handed: HandedValues = handed
        self.tree = RadixTree(self.page_size, ids=self._ids, owner=self, on_split=self._on_split, token_bytes=_TB)
        self.tree.register(Full, self.store)
        self.root = self.tree.root
        self.root.last_access = self._tick()
        self._nodes: dict[int, Node] = {self.root.id: self.root}
        self._tensors: dict[int, torch.Tensor] = {}
        self._total = 0
        self._protected = 0
        self._insert: Optional[_InsertWalk] = None
        self._walk_quota: Optional[int] = None
        self._walk_returned: list[Node] = []
        self._split_action: Optional[UpdatePendingBackupOnNodeSplit] = None
        self._empty_match = MatchResult(device_prefix_len=0, last_device_node=self.root.id,
                                        last_host_node=self.root.id, best_match_node=self.root.id,
                                        cache_actions=[])

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

    # ==== nodes, clock, residency ====

    def _tick(self) -> int:
        self._clock += _TICK
        return self._clock

    def node(self, node_id: NodeId) -> Node:
        """The live node named `node_id` (`UnknownNodeError`, a `KeyError`, otherwise)."""
        node = self._nodes.get(node_id)
        if node is None:
            raise UnknownNodeError(node_id)
        return node

    def nodes(self) -> list[Node]:
        """Every live node, root first (pre-order)."""
        return list(self.tree)

    def device_values(self, node: Node) -> Optional[list[int]]:
        """The node's device index values (one per token), or None."""
        return self.store.device_slots(node)

    def host_values(self, node: Node) -> Optional[array[int]]:
        """The node's host index values, or None."""
        return self.store.host_slots(node)

    def _dev_pinned(self, node: Node) -> bool:
        p = self.store.pin_sets.get(node.slot)
        return p is not None and bool(p)

    def between_walks(self) -> bool:
        """No device eviction walk and no suspended insert in progress: a safe point for a live dump."""
        return self._walk_quota is None and self._insert is None

    def _host_pinned(self, node: Node) -> bool:
        p = self.handed.host_pin_sets.get(node.slot)
        return p is not None and bool(p)

    def device_lock_count(self, node: Node) -> int:
        """Leases pinning the node's device tier (device locks and Full pins); the root counts 1, as SGLang's."""
        if node is self.root:
            return 1
        p = self.store.pins(node)
        return len(p) if p is not None else 0

    def host_leases(self, node: Node) -> list[Lease[FullHost, Held]]:
        """The leases pinning the node's host tier (host locks, write-through marks, load-back pins)."""
        p = self.handed.host_pins(node)
        return list(p) if p is not None else []

    def host_lock_count(self, node: Node) -> int:
        """Host locks on the node (SGLang's `host_lock_ref`)."""
        return sum(1 for lease in self.host_leases(node) if isinstance(lease.owner, TreeReceipt))

    def write_through_ack(self, node: Node) -> Optional[int]:
        """The ack id of the in-flight backup marking the node (SGLang's `write_through_pending_id`), or None."""
        p = self.handed.host_pin_sets.get(node.slot)
        if p is None or not p:
            return None
        for lease in p:
            owner = lease.owner
            if isinstance(owner, WriteThroughMark):
                return owner.ack_id
        return None

    def _load_back_pinned(self, node: Node) -> bool:
        return any(isinstance(lease.owner, LoadBackPin) for lease in self.host_leases(node))

    def is_evictable_device_leaf(self, node: Node) -> bool:
        """SGLang's D-leaf: not the root, Full on device, no child on device, no device pin."""
        slot = node.slot
        if node.parent is None or slot == 0 or node.dev_children or self.store.dev[slot] is None:
            return False
        p = self.store.pin_sets.get(slot)
        return p is None or not p

    def is_evictable_host_leaf(self, node: Node) -> bool:
        """SGLang's H-leaf: not the root, Full on host only, no children, no pin on either tier."""
        slot = node.slot
        return (node.parent is not None and slot != 0 and not node.children
                and self.store.dev[slot] is None and self.store.host_col[slot] is not None
                and not self._dev_pinned(node) and not self._host_pinned(node))

    def _maybe_file(self, node: Node) -> None:
        """File `node` in the eviction queue of the tier it just became an evictable leaf of."""
        store = self.store
        slot = node.slot
        if node.parent is None or slot == 0:
            return
        p = store.pin_sets.get(slot)
        if p is not None and p:
            return
        if store.dev[slot] is not None:
            if not node.dev_children:
                store.lru_device.push(node)
        elif not node.children and store.host_col[slot] is not None and not self._host_pinned(node):
            store.lru_host.push(node)

    def _publish_device(self, node: Node, values: list[int], tensor: torch.Tensor) -> None:
        """Give `node` (no device values) the device `values` (`tensor`: the same, as SGLang handed them in)."""
        self._tensors[node.id] = tensor
        dups = self.store.dups
        was = node.id in dups
        self.store.adopt_device(node, values)
        if not was:
            dups.pop(node.id, None)
        n = len(values)
        self._total += n
        if self._dev_pinned(node):
            self._protected += n

    def _drop_device(self, node: Node, frees: list[torch.Tensor]) -> int:
        """Hand back `node`'s device values (it must be unpinned) into `frees`; the parent may become a leaf.

        The store hands the values back; `frees` gets them as the tensor kept
        beside them (`_tensors`), so returning them costs no conversion.
        """
        n = self.store.drop_device(node)
        handed = self.handed.take_device()
        tensor = self._tensors.pop(node.id)
        assert len(handed) == 1 and len(handed[0]) == tensor.numel() == n, node.id
        frees.append(tensor)
        self._total -= n
        parent = node.parent
        if parent is not None:
            self._maybe_file(parent)
        return n

    def _drop_host(self, node: Node, frees: list[array[int]]) -> int:
        n = self.store.drop_host(node)
        frees.extend(self.handed.take_host())
        return n

    def _remove(self, node: Node) -> None:
        """Take a childless node with no values and no pins out of the tree."""
        self.store.dups.pop(node.id, None)
        del self._nodes[node.id]
        self.tree.remove_leaf(node)

    def track_duplicate(self, node_id: NodeId) -> None:
        """Refresh the node's entry in the duplicate index (SGLang's `_update_duplicate_tracking`)."""
        self._track_dup(self.node(node_id))

    def _track_dup(self, node: Node) -> None:
        """SGLang's duplicate tracking: index a settled node on both tiers (keeping its place), drop others."""
        slot = node.slot
        dups = self.store.dups
        settled = (node.parent is not None and slot != 0 and self.store.dev[slot] is not None
                   and self.store.host_col[slot] is not None)
        if settled:
            p = self.handed.host_pin_sets.get(slot)
            settled = p is None or not any(isinstance(lease.owner, (WriteThroughMark, LoadBackPin)) for lease in p)
        if settled:
            dups.setdefault(node.id, node)
        else:
            dups.pop(node.id, None)

    def _on_split(self, upper: Node, lower: Node) -> None:
        """The tree's split callback: register `upper`, carry every pin of `lower` to it, file it."""
        self._nodes[upper.id] = upper
        tensor = self._tensors.pop(lower.id, None)
        if tensor is not None:
            cut = upper.end - upper.start
            self._tensors[upper.id] = tensor[:cut]
            self._tensors[lower.id] = tensor[cut:]
        upper.last_access = self._tick()
        lower.last_access = self._tick()
        ledger = self.ledger
        pins = self.store.pins(lower)
        if pins is not None and pins:
            target = self.store.pin_set(upper)
            for lease in pins:
                ledger.pin(lease, target)
        host = self.handed.host_pins(lower)
        if host is not None and host:
            host_target = self.handed.host_pin_set(upper)
            for host_lease in host:
                ledger.pin(host_lease, host_target)
        self.store.file_split(upper)
        self._track_dup(upper)
        ack = self.write_through_ack(lower)
        if ack is not None:
            self._split_action = UpdatePendingBackupOnNodeSplit(
                ack_id=ack, old_node_id=lower.id, new_node_id=upper.id, new_child_node_id=lower.id)

    def _take_split_action(self, out: Actions) -> None:
        action = self._split_action
        if action is not None:
            out.append(action)
            self._split_action = None

    # ==== keys ====

    def _key_bytes(self, key: RadixKey) -> tuple[bytes, int]:
        """The key's token bytes and its page-aligned length in tokens; namespaced keys refused."""
        if key.is_bigram:
            raise NamespacedKeyError("bigram (EAGLE) views")
        if key.extra_key is not None or key.cache_salt is not None:
            raise NamespacedKeyError("an extra_key or cache_salt namespace")
        tokens = key.raw_token_ids()
        n = len(tokens)
        n -= n % self.page_size
        return tokens.tobytes(), n

    def _follow(self, node: Node, tb: bytes, pos: int, n: int) -> tuple[Node, int, bool]:
        """Match the child of `node` at token `pos` against `tb`: (child, tokens matched, partial)."""
        child = node.children[tb[pos * _TB: (pos + self.page_size) * _TB]]
        kb = child.kb
        if tb.startswith(kb, pos * _TB, n * _TB):
            return child, child.end - child.start, False
        m = common_pages(tb[pos * _TB: n * _TB], kb, self.page_size * _TB) // _TB
        return child, m, True

    # ==== locks ====

    def _path(self, node: Node) -> list[Node]:
        out: list[Node] = []
        root = self.root
        x = node
        while x is not root:
            out.append(x)
            parent = x.parent
            assert parent is not None
            x = parent
        return out

    def _pin_device(self, path: list[Node], owner: object) -> tuple[Lease[Full, Held], int]:
        """One lease pinning the device tier of every node of `path`; returns it and the tokens newly protected."""
        store = self.store
        dev = store.dev
        delta = 0
        sets: list[PinSet[Full, Node]] = []
        for x in path:
            p = store.pin_set(x)
            if not p:
                vals = dev[x.slot]
                if vals is not None:
                    delta += len(vals)
            sets.append(p)
        lease = self.ledger.acquire(Full, owner=owner, pins=tuple(sets))
        self._protected += delta
        return lease, delta

    def _unpin_device(self, lease: Lease[Full, Held]) -> None:
        """Release a device lease; every node it drains stops being protected and may become a leaf."""
        holders = _holders(lease)
        lease.release()
        store = self.store
        dev = store.dev
        lru = store.lru_device
        for x in holders:
            slot = x.slot
            p = store.pin_sets.get(slot)
            if p is not None and not p:
                vals = dev[slot]
                if vals is None:
                    self._maybe_file(x)
                else:
                    self._protected -= len(vals)
                    if not x.dev_children:
                        lru.push(x)

    def _unpin_host(self, lease: Lease[FullHost, Held]) -> list[Node]:
        """Release a host lease; returns the nodes it pinned (each drained one may become a host leaf)."""
        holders = _holders(lease)
        lease.release()
        sets = self.handed.host_pin_sets
        for x in holders:
            p = sets.get(x.slot)
            if p is not None and not p:
                self._maybe_file(x)
        return holders

    def inc_lock_ref(
        self, node_id: NodeId, skip_lock_components: Sequence[ComponentType] = ()
    ) -> IncLockRefResult:
        node = self.node(node_id)
        skipped = tuple(skip_lock_components)
        receipt = TreeReceipt(node_id=node.id, skipped_lock_components=skipped, lease_id=self.ledger.acquired + 1,
                              kind=DEVICE_LOCK, issuer=id(self), epoch=self.ledger.epoch)
        path = [] if _FULL in skipped else self._path(node)
        lease, delta = self._pin_device(path, receipt)
        receipt.lease_id = lease.id
        receipt.delta = delta
        self.device_locks[lease.id] = lease
        return receipt

    def _receipt(self, node_id: NodeId, params: DecLockRefParams, kind: str) -> TreeReceipt:
        """The receipt `params` is, checked against this core, `kind` and `node_id`; raises before any change."""
        if not isinstance(params, TreeReceipt):
            raise ForeignReceiptError(node_id, kind, "FULL",
                                      f"receipt {params!r} was not issued by this core (no lease behind it)")
        if params.issuer != id(self):
            raise ForeignReceiptError(node_id, str(params), "FULL", "the receipt was issued by another tree core")
        if params.kind != kind:
            raise MisdirectedReceiptError(node_id, str(params), "FULL", f"released as a {kind}")
        if params.node_id != node_id:
            raise MisdirectedReceiptError(node_id, str(params), "FULL",
                                          f"the receipt is anchored on node {params.node_id}")
        locks = self.host_locks if kind == HOST_LOCK else self.device_locks
        if params.lease_id not in locks:
            why = ("its lease was revoked by a reset" if params.epoch != self.ledger.epoch
                   else "its lease was already released (one receipt, one release)")
            raise SpentReceiptError(node_id, str(params), "FULL", why)
        return params

    def dec_lock_ref(self, node_id: NodeId, params: DecLockRefParams, skip_swa: bool = False) -> DecLockRefResult:
        receipt = self._receipt(node_id, params, DEVICE_LOCK)
        self._unpin_device(self.device_locks.pop(receipt.lease_id))
        return DecLockRefResult()

    def dec_swa_lock_only(self, node_id: NodeId, params: DecLockRefParams) -> DecSwaLockOnlyResult:
        """FULL alone has no SWA part: the receipt is checked, nothing is released (SGLang's outcome)."""
        self._receipt(node_id, params, DEVICE_LOCK)
        return DecSwaLockOnlyResult()

    def inc_host_lock_ref(self, node_id: NodeId) -> IncLockRefResult:
        node = self.node(node_id)
        receipt = TreeReceipt(node_id=node.id, lease_id=self.ledger.acquired + 1, kind=HOST_LOCK,
                              issuer=id(self), epoch=self.ledger.epoch)
        locked = node is not self.root and (self.store.host_col[node.slot] is not None or self.is_write_back)
        pins = (self.handed.host_pin_set(node),) if locked else ()
        lease = self.ledger.acquire(FullHost, owner=receipt, pins=pins)
        receipt.lease_id = lease.id
        if locked:
            receipt.set_lock_uuid(_FULL, lease.id, lock_host=True)
        self.host_locks[lease.id] = lease
        return receipt

    def dec_host_lock_ref(self, node_id: NodeId, params: DecLockRefParams) -> DecLockRefResult:
        receipt = self._receipt(node_id, params, HOST_LOCK)
        self._unpin_host(self.host_locks.pop(receipt.lease_id))
        if self.record.attempt is not None:
            pinning = [*self.device_locks, *(lease.id for pins in self.full_pins.values() for lease in pins)]
            self.record.given_up(node_id, self._protected, self._total, sorted(pinning))
        return DecLockRefResult()

    def inc_full_pin(self, node_id: NodeId) -> None:
        node = self.node(node_id)
        owner = TreeReceipt(node_id=node.id, lease_id=self.ledger.acquired + 1, kind=FULL_PIN, issuer=id(self),
                            epoch=self.ledger.epoch)
        lease, _ = self._pin_device(self._path(node), owner)
        owner.lease_id = lease.id
        self.full_pins.setdefault(node.id, []).append(lease)

    def dec_full_pin(self, node_id: NodeId) -> None:
        self.node(node_id)
        pins = self.full_pins.get(node_id)
        if not pins:
            raise FullPinMissingError(node_id)
        self._unpin_device(pins.pop())
        if not pins:
            del self.full_pins[node_id]

    # ==== sizes ====

    def evictable_size(self) -> int:
        if self._live_request.pending:
            self.live_dump.poll()
        return self._total - self._protected

    def protected_size(self) -> int:
        return self._protected

    def component_evictable_size(self, component_type: ComponentType) -> int:
        return self._total - self._protected if component_type == _FULL else 0

    def component_protected_size(self, component_type: ComponentType) -> int:
        return self._protected if component_type == _FULL else 0

    def full_evictable_size(self) -> int:
        return self._total - self._protected

    def full_protected_size(self) -> int:
        return self._protected

    def swa_evictable_size(self) -> int:
        return 0

    def mamba_evictable_size(self) -> int:
        return 0

    def swa_protected_size(self) -> int:
        return 0

    def mamba_protected_size(self) -> int:
        return 0

    def adjust_component_size(self, node_id: NodeId, component_type: ComponentType, delta: int) -> None:
        """Only hybrid allocators' donors call this (Mamba, SWA compaction), which this core refuses."""
        self.node(node_id)
        if component_type != _FULL:
            raise ValueError(f"component is not enabled: {component_type}")
        raise RefusedFeatureError("per-node size adjustments (its sizes are derived from values and leases)")

    def total_size(self) -> tuple[int, int]:
        return self._total, 0

    # ==== match ====

    def match_prefix(self, params: MatchPrefixParams) -> MatchResult:
        if self._live_request.pending:
            self.live_dump.poll()
        tb, n = self._key_bytes(params.key)
        if n == 0:
            return self._empty_match
        store = self.store
        dev = store.dev
        host = store.host_col
        hicache = self.enable_hicache
        root = node = best = best_dev = self.root
        pos = 0
        full_hit = 0
        actions: Actions = []
        children = node.children
        while pos < n and children:
            if tb[pos * _TB: (pos + self.page_size) * _TB] not in children:
                break
            child, m, partial = self._follow(node, tb, pos, n)
            slot = child.slot
            on_dev = dev[slot] is not None
            if not on_dev and host[slot] is None:
                break
            full_hit += m
            if partial:
                child = self.tree.split(child, m)
                self._take_split_action(actions)
            node = child
            if on_dev:
                best = best_dev = child
            elif hicache:
                best = child
            if partial:
                break
            pos += m
            children = child.children
        t = self._tick()
        x: Optional[Node] = best
        while x is not None:
            x.last_access = t
            t -= 1
            x = x.parent
        host_hit = 0
        x = best
        while x is not best_dev and x is not root and x is not None:
            h = host[x.slot]
            if h is not None:
                host_hit += len(h)
            x = x.parent
        return MatchResult(
            device_prefix_len=best_dev.end,
            last_device_node=best_dev.id,
            last_host_node=(best if hicache else best_dev).id,
            best_match_node=best.id,
            host_hit_length=host_hit,
            full_kv_hit_length=full_hit,
            last_visited_node_id=node.id if node is not root else None,
            cache_actions=actions,
        )

    def match_full_device_prefix(self, key: RadixKey) -> tuple[int, NodeId, int]:
        tb, n = self._key_bytes(key)
        dev = self.store.dev
        node = self.root
        pos = matched = pinned = 0
        while pos < n:
            if tb[pos * _TB: (pos + self.page_size) * _TB] not in node.children:
                break
            child, m, partial = self._follow(node, tb, pos, n)
            if dev[child.slot] is None:
                break
            matched += m
            node = child
            pinned += child.end - child.start
            if partial:
                break
            pos += m
        return matched, node.id, pinned

    @property
    def empty_match_result(self) -> MatchResult:
        return self._empty_match

    def is_full_device_evicted(self, node_id: NodeId) -> bool:
        node = self.node(node_id)
        return node.parent is not None and self.store.dev[node.slot] is None

    def collect_full_device_indices(self, from_node_id: NodeId, until_node_id: NodeId) -> torch.Tensor:
        until = self.node(until_node_id)
        node = self.node(from_node_id)
        chunks: list[torch.Tensor] = []
        tensors = self._tensors
        while node is not until:
            t = tensors.get(node.id)
            if t is None:
                raise NodeStateError("collect_full_device_indices", node.id, "its Full KV is not on device")
            chunks.append(t)
            parent = node.parent
            if parent is None:
                raise NodeStateError("collect_full_device_indices", until.id, f"not an ancestor of {from_node_id}")
            node = parent
        if not chunks:
            return self._empty
        if len(chunks) == 1:
            return chunks[0]
        chunks.reverse()
        return torch.cat(chunks)

    # ==== insert ====

    def begin_insert(self, params: InsertParams) -> InsertStepResult:
        if self._insert is not None:
            raise RuntimeError("concurrent insert walks")
        if params.key is None:
            raise ValueError("insert: params.key is None")
        if params.rotation_base is not None:
            raise RefusedFeatureError("logical-page KV sharding (rotation bases)")
        tb, n = self._key_bytes(params.key)
        value = params.value
        if value is None:
            value = torch.frombuffer(bytearray(tb[: n * _TB]), dtype=torch.int64).clone()
        value = value[:n]
        self.root.last_access = self._tick()
        if n == 0:
            return InsertStepResult(actions=[], result=InsertResult(
                prefix_len=0, mamba_exist=True, last_device_node=self.root.id))
        self._insert = _InsertWalk(params, tb, n, value, self.root)
        return self._advance_insert()

    def resume_insert(self) -> InsertStepResult:
        if self._insert is None:
            raise RuntimeError("no in-flight insert")
        return self._advance_insert()

    def has_ongoing_insert(self) -> bool:
        return self._insert is not None

    def end_insert(self) -> Actions:
        walk = self._insert
        self._insert = None
        return walk.pending if walk is not None else []

    def _hit(self, node: Node) -> bool:
        """SGLang's hit count and write-through trigger for a node the insert reached on device."""
        if self.store.dev[node.slot] is None or self.is_write_back:
            return False
        node.hits += 1
        return (self.enable_hicache and self.store.host_col[node.slot] is None
                and node.hits >= self.write_through_threshold)

    def _advance_insert(self) -> InsertStepResult:
        walk = self._insert
        assert walk is not None
        store = self.store
        tb, n, params = walk.tb, walk.n, walk.params
        while True:
            node, pos = walk.node, walk.pos
            if pos >= n or tb[pos * _TB: (pos + self.page_size) * _TB] not in node.children:
                return self._commit_insert(walk)
            barrier = False
            child, m, partial = self._follow(node, tb, pos, n)
            child.last_access = self._tick()
            if partial:
                child = self.tree.split(child, m)
                self._take_split_action(walk.pending)
            if store.dev[child.slot] is None:
                part = walk.value[pos: pos + m].clone()
                self._publish_device(child, id_list(part), part)
                self._track_dup(child)
                self._maybe_file(child)
                if walk.result.adopted_ranges is not None:
                    walk.result.record_adopted_range(_FULL, pos, pos + m)
            else:
                dup_start = max(0, params.prev_prefix_len - pos)
                if dup_start < m:
                    walk.pending.append(FreeDeviceKV([walk.value[pos + dup_start: pos + m]]))
            if pos + m > params.inserted_len and self._hit(child):
                walk.pending.append(self._backup_action(child, write_back=False))
                barrier = True
            walk.node = child
            walk.pos = pos + m
            if barrier:
                out = walk.pending
                walk.pending = []
                return InsertStepResult(actions=out)

    def _commit_insert(self, walk: _InsertWalk) -> InsertStepResult:
        node, pos, n = walk.node, walk.pos, walk.n
        result = walk.result
        result.prefix_len = pos
        target = node
        if pos < n:
            leaf = self.tree.add_leaf(node, walk.tb[pos * _TB: n * _TB])
            self._nodes[leaf.id] = leaf
            leaf.last_access = self._tick()
            part = walk.value[pos:n].clone()
            self._publish_device(leaf, id_list(part), part)
            if result.adopted_ranges is not None:
                result.record_adopted_range(_FULL, pos, n)
            target = leaf
            if not self.is_write_back and n > walk.params.inserted_len and self._hit(leaf):
                walk.pending.append(self._backup_action(leaf, write_back=False))
        result.last_device_node = target.id
        self._insert = None
        return InsertStepResult(actions=walk.pending, result=result)

    def _backup_action(self, node: Node, write_back: bool) -> BackupKV:
        """SGLang's backup action: the node, and under write-through its unbacked ancestors first."""
        chain = [node]
        if not write_back:
            host = self.store.host_col
            x = node.parent
            while x is not None and x is not self.root and host[x.slot] is None:
                chain.append(x)
                x = x.parent
            chain.reverse()
        return BackupKV([x.id for x in chain])

    # ==== device eviction ====

    def evict_device_start(self, component_type: ComponentType, request_cnt: int) -> None:
        if component_type != _FULL:
            raise ValueError(f"component is not enabled: {component_type}")
        self._walk_quota = request_cnt
        self._walk_returned = []
        self.record.evicting()

    def evict_device_next_node(
        self, component_type: ComponentType, tracker: dict[ComponentType, int]
    ) -> EvictDeviceNextNodeResult:
        result = EvictDeviceNextNodeResult()
        quota = self._walk_quota
        if component_type != _FULL or quota is None:
            raise NodeStateError("evict_device_next_node", self.root.id, "no device eviction walk started")
        if tracker.get(_FULL, 0) >= quota:
            return result
        lru = self.store.lru_device
        while True:
            x = lru.pop()
            if x is None:
                return result
            if self.is_evictable_device_leaf(x):
                self._walk_returned.append(x)
                result.node_id = x.id
                result.made_progress = True
                return result

    def evict_device_end(self, component_type: ComponentType) -> None:
        for x in self._walk_returned:
            self._maybe_file(x)
        self._walk_returned = []
        self._walk_quota = None

    def finish_mamba_state_eviction(self, node_id: NodeId) -> EvictDeviceNextNodeResult:
        raise NodeStateError("finish_mamba_state_eviction", node_id, "MAMBA is not a component of this core")

    def finish_swa_state_eviction(self, node_id: NodeId) -> EvictDeviceNextNodeResult:
        raise NodeStateError("finish_swa_state_eviction", node_id, "SWA is not a component of this core")

    def _device_leaf(self, op: str, node_id: NodeId) -> Node:
        node = self.node(node_id)
        if not self.is_evictable_device_leaf(node):
            raise NodeStateError(op, node_id, "not an evictable device leaf (pinned, or a device child, or not on device)")
        return node

    def evict_device_leaf(self, node_id: NodeId, is_write_back: bool) -> EvictDeviceLeafResult:
        node = self._device_leaf("evict_device_leaf", node_id)
        result = EvictDeviceLeafResult()
        if self.store.host_col[node.slot] is None:
            if is_write_back:
                result.backup_kv = self._backup_action(node, write_back=True)
                return result
            n = self._delete_unbacked(node, result.device_frees[_FULL])
            result.tracker[_FULL] += n
            result.unbacked_tokens = n
            return result
        result.tracker[_FULL] += self._demote(node, result.device_frees[_FULL])
        return result

    def _demote(self, node: Node, frees: list[torch.Tensor]) -> int:
        n = self._drop_device(node, frees)
        self._maybe_file(node)
        return n

    def _delete_unbacked(self, node: Node, frees: list[torch.Tensor]) -> int:
        """Free an unbacked device leaf, remove it, then its childless tombstone ancestors."""
        n = self._drop_device(node, frees)
        parent = node.parent
        assert parent is not None
        self._remove(node)
        self._remove_tombstones(parent)
        return n

    def _remove_tombstones(self, cur: Node) -> None:
        """SGLang's tombstone cleanup: remove childless ancestors holding nothing, up to a live or pinned one."""
        store = self.store
        while cur is not self.root and not cur.children:
            if self._dev_pinned(cur) or self._host_pinned(cur):
                break
            if store.dev[cur.slot] is not None or store.host_col[cur.slot] is not None:
                self._maybe_file(cur)
                break
            parent = cur.parent
            assert parent is not None
            self._remove(cur)
            self._maybe_file(parent)
            cur = parent

    def demote(self, node_id: NodeId) -> DemoteResult:
        node = self.node(node_id)
        slot = node.slot
        if node.parent is None or self.store.dev[slot] is None or self.store.host_col[slot] is None:
            raise NodeStateError("demote", node_id, "not on both tiers")
        result = DemoteResult()
        result.tracker[_FULL] += self._demote(node, result.device_frees[_FULL])
        return result

    def drop_subtree_no_host(self, node_id: NodeId) -> DropSubtreeNoHostResult:
        node = self._device_leaf("drop_subtree_no_host", node_id)
        result = DropSubtreeNoHostResult(is_dropped=False)
        if self.store.host_col[node.slot] is not None:
            raise NodeStateError("drop_subtree_no_host", node_id, "the node is backed up")
        if self._host_pinned(node):
            return result
        order: list[Node] = []
        stack = list(node.children.values())
        while stack:
            x = stack.pop()
            if self._dev_pinned(x) or self._host_pinned(x):
                return result
            order.append(x)
            stack.extend(x.children.values())
        hvals: list[array[int]] = []
        for x in reversed(order):
            if self.store.host_col[x.slot] is not None:
                self._drop_host(x, hvals)
            self._remove(x)
        if hvals:
            result.host_frees[_FULL].extend(host_tensor(h) for h in hvals)
        result.tracker[_FULL] += self._delete_unbacked(node, result.device_frees[_FULL])
        result.is_dropped = True
        return result

    # ==== host eviction ====

    def drive_host_eviction(self, component_type: ComponentType, num_tokens: int) -> DriveHostEvictionResult:
        result = DriveHostEvictionResult()
        if component_type != _FULL:
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
            parent = x.parent
            assert parent is not None
            self._remove(x)
            self._remove_tombstones(parent)
        if freed:
            result.tracker[_FULL] = freed
        if hvals:
            result.host_frees[_FULL].extend(host_tensor(h) for h in hvals)
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

    def evict_excess_path_states(
        self,
        tail_node_id: NodeId,
        device_frees: dict[ComponentType, list[torch.Tensor]],
        host_frees: dict[ComponentType, list[torch.Tensor]],
        cache_actions: Actions,
    ) -> None:
        raise NodeStateError("evict_excess_path_states", tail_node_id, "MAMBA is not a component of this core")

    # ==== HiCache: backup ====

    def build_backup_spec(self, node_id: NodeId) -> tuple[torch.Tensor, dict[ComponentType, list[PoolTransfer]]]:
        node = self.node(node_id)
        vals = self.store.dev[node.slot]
        if vals is None:
            raise NodeStateError("build_backup_spec", node_id, "its Full KV is not on device")
        if self.store.host_col[node.slot] is not None:
            return self._empty, {}
        return self._tensors[node.id], {}

    def build_backup_kv_action(self, node_id: NodeId) -> BackupKV:
        return self._backup_action(self.node(node_id), write_back=False)

    def commit_backup(self, node_id: NodeId, host_indices: torch.Tensor,
                      comp_xfers: dict[ComponentType, list[PoolTransfer]]) -> None:
        node = self.node(node_id)
        if comp_xfers:
            raise NodeStateError("commit_backup", node_id, f"transfers of {sorted(c.name for c in comp_xfers)}")
        if host_indices.numel() == 0:
            return
        if self.store.host_col[node.slot] is not None:
            raise NodeStateError("commit_backup", node_id, "its Full KV is already on host")
        vals = self.store.dev[node.slot]
        if vals is None or len(vals) != host_indices.numel():
            raise NodeStateError("commit_backup", node_id,
                                 f"{host_indices.numel()} host indices for {0 if vals is None else len(vals)} device values")
        self.store.set_host(node, host_array(host_indices))

    def mark_write_through_pending(self, node_ids: list[NodeId], ack_id: NodeId) -> list[NodeId]:
        nodes = [self.node(nid) for nid in node_ids]
        for x in nodes:
            held = self.write_through_ack(x)
            if held is not None and held != ack_id:
                raise PendingMarkError(x.id, ack_id, held)
        sets = [self.handed.host_pin_set(x) for x in nodes]
        lease = self.write_marks.get(ack_id)
        if lease is None:
            self.write_marks[ack_id] = self.ledger.acquire(FullHost, owner=WriteThroughMark(ack_id),
                                                           pins=tuple(dict.fromkeys(sets)))
        else:
            for p in sets:
                self.ledger.pin(lease, p)
        if len(nodes) == 1:
            return [nodes[0].id]
        depth: dict[int, int] = {}
        for x in nodes:
            d = 0
            up = x.parent
            while up is not None:
                d += 1
                up = up.parent
            depth[x.id] = d
        return sorted(node_ids, key=lambda nid: (depth[nid], nid))

    def finish_write_through(self, node_ids: list[NodeId], ack_id: int) -> None:
        nodes = [self.node(nid) for nid in node_ids]
        lease = self.write_marks.get(ack_id)
        if lease is None:
            self.record.stale_ack(ack_id, node_ids)
            return
        marked = _holders(lease)
        self.record.write_through_ack(ack_id, lease.id, lease.owner, lease.generation, node_ids, len(marked))
        if all(x in nodes for x in marked):
            self._unpin_host(self.write_marks.pop(ack_id))
            for x in nodes:
                self._track_dup(x)
            return
        for x in nodes:
            p = self.handed.host_pins(x)
            if p is not None and lease in p:
                self.ledger.unpin(lease, p)
                self._track_dup(x)
                self._maybe_file(x)

    # ==== HiCache: load-back ====

    def _load_back_chain(self, node: Node) -> list[Node]:
        """The host-only nodes from `node` up to the first on device, root first."""
        chain, _top = self.store.evicted_chain(node)
        host = self.store.host_col
        for x in chain:
            if host[x.slot] is None:
                raise NodeStateError("load-back", x.id, "its Full KV is on neither tier")
        return chain

    def build_load_back_spec(
        self, node_id: NodeId, req: Optional[Req] = None
    ) -> tuple[PoolTransfer, dict[ComponentType, list[PoolTransfer]]]:
        chain = self._load_back_chain(self.node(node_id))
        host = self.store.host_col
        gathered = array("i")
        for x in chain:
            h = host[x.slot]
            assert h is not None
            gathered += h
        ids = [x.id for x in chain]
        xfer = PoolTransfer(name=PoolName.KV, host_indices=host_tensor(gathered) if chain else self._empty_host,
                            device_indices=None, nodes_to_load=ids)
        self.record.spec_built(node_id, len(gathered), ids)
        return xfer, {}

    def commit_load_back(
        self, node_id: NodeId, device_indices: torch.Tensor, kv_xfer: PoolTransfer,
        comp_xfers: dict[ComponentType, list[PoolTransfer]],
    ) -> Actions:
        anchor = self.node(node_id)
        if comp_xfers:
            raise NodeStateError("commit_load_back", node_id, f"transfers of {sorted(c.name for c in comp_xfers)}")
        chain = [self.node(nid) for nid in kv_xfer.nodes_to_load or ()]
        store = self.store
        want = 0
        for x in chain:
            h = store.host_col[x.slot]
            if store.dev[x.slot] is not None or h is None:
                raise NodeStateError("commit_load_back", x.id, "not host-only")
            want += len(h)
        if device_indices.numel() != want:
            raise NodeStateError("commit_load_back", node_id,
                                 f"{device_indices.numel()} device indices for {want} host values")
        pin = LoadBackPin(anchor.id, next(self._load_back_seq))
        lease = self.ledger.acquire(FullHost, owner=pin, pins=tuple(self.handed.host_pin_set(x) for x in chain))
        self.load_backs.setdefault(anchor.id, deque()).append(lease)
        kv_xfer.device_indices = device_indices
        vals = id_list(device_indices)
        off = 0
        for x in chain:
            h = store.host_col[x.slot]
            assert h is not None
            k = len(h)
            self._publish_device(x, vals[off: off + k], device_indices[off: off + k].clone())
            off += k
        for x in chain:
            self._maybe_file(x)
        self.record.committed()
        return []

    def finish_load_back(self, anchor_node_id: NodeId) -> None:
        anchor = self.node(anchor_node_id)
        fifo = self.load_backs.get(anchor.id)
        if not fifo:
            raise UnknownLoadBackError(anchor_node_id, self.ledger.epoch)
        lease = fifo.popleft()
        if not fifo:
            del self.load_backs[anchor.id]
        lease_id, owner, generation = lease.id, lease.owner, lease.generation
        holders = self._unpin_host(lease)
        self.record.load_back_ack(lease_id, owner, generation, [x.id for x in holders])
        pinned = set(holders)
        x: Optional[Node] = anchor
        while x is not None and x is not self.root:
            if not self.is_write_back or x in pinned:
                self._track_dup(x)
            x = x.parent

    def build_hicache_transfers(
        self, component_type: ComponentType, node_id: NodeId, phase: CacheTransferPhase, *,
        host_indices: Optional[torch.Tensor] = None, token_ids: Optional[Sequence[int]] = None,
        prefetch_tokens: int = 0, staging_tokens: int = 0, last_hash: Optional[str] = None,
    ) -> Optional[list[PoolTransfer]]:
        if component_type != _FULL:
            return None
        if phase == CacheTransferPhase.LOAD_BACK:
            return [self.build_load_back_spec(node_id)[0]]
        if phase == CacheTransferPhase.BACKUP_HOST:
            return None
        raise RefusedFeatureError(f"HiCache transfers of phase {phase.name} (storage prefetch)")

    def commit_hicache_transfers(
        self, node_id: NodeId, phase: CacheTransferPhase, comp_xfers: dict[ComponentType, list[PoolTransfer]], *,
        cache_actions: Actions, insert_result: Optional[InsertResult] = None,
        pool_storage_result: Optional[PoolTransferResult] = None,
    ) -> None:
        raise RefusedFeatureError(f"committing HiCache transfers of phase {phase.name} (storage prefetch)")

    def prefetch_anchor_info(self, node_id: NodeId) -> tuple[Optional[str], Optional[str]]:
        self.node(node_id)
        return None, None

    def is_write_through_compatible(self) -> bool:
        host = self.store.host_col
        for x in self.tree:
            parent = x.parent
            if (parent is not None and parent is not self.root and host[x.slot] is not None
                    and host[parent.slot] is None):
                return False
        return True

    def insert_host(self, node_id: NodeId, key: RadixKey, host_value: torch.Tensor,
                    hash_value: list[str]) -> InsertResult:
        raise RefusedFeatureError("host inserts from a storage backend")

    def build_storage_backup_spec(self, node_id: NodeId, pass_prefix_keys: bool) -> Optional[StorageBackupSpec]:
        raise RefusedFeatureError("a HiCache storage backend")

    def snapshot_buffer_backup(self, node_id: NodeId, pass_prefix_keys: bool) -> Optional[BufferBackupSnapshot]:
        raise RefusedFeatureError("buffer-only host memory")

    def validate_buffer_backup(self, node_id: NodeId, expected_key_length: int) -> Optional[BufferBackupState]:
        raise RefusedFeatureError("buffer-only host memory")

    def backfill_missing_hash_values(self) -> int:
        raise RefusedFeatureError("a HiCache storage backend (page hashes)")

    def build_external_linker_offload_transfers(self, node_id: NodeId) -> Optional[list[PoolTransfer]]:
        raise RefusedFeatureError("the external cache linker")

    def mark_external_cache_stored_path(self, from_node_id: NodeId, until_node_id: NodeId) -> None:
        raise RefusedFeatureError("the external cache linker")

    def mark_external_linker_offload_pending(self, node_id: NodeId) -> None:
        raise RefusedFeatureError("the external cache linker")

    def finish_external_linker_offload(self, node_ids: Sequence[NodeId], ack_id: NodeId, success: bool) -> None:
        raise RefusedFeatureError("the external cache linker")

    def swa_tombstone_ranges(self, key: RadixKey, start: int, end: int,
                             component_type: ComponentType = ComponentType.SWA) -> list[tuple[int, int]]:
        raise ValueError(f"component is not enabled: {component_type}")

    def attach_swa_window(self, key: RadixKey, window_start: int, window_end: int, swa_values: torch.Tensor,
                          component_type: ComponentType = ComponentType.SWA) -> Actions:
        raise ValueError(f"component is not enabled: {component_type}")

    def set_component_device_value(self, node_id: NodeId, component_type: ComponentType,
                                   value: torch.Tensor) -> None:
        raise ValueError(f"component is not enabled: {component_type} (FULL values are set by insert and load-back)")

    def get_component_device_value(self, node_id: NodeId, component_type: ComponentType) -> Optional[torch.Tensor]:
        node = self.node(node_id)
        if component_type != _FULL:
            return None
        return self._tensors.get(node.id)

    def component_has_host_value_only(self, node_id: NodeId, component_type: ComponentType) -> bool:
        node = self.node(node_id)
        return (component_type == _FULL and self.store.dev[node.slot] is None
                and self.store.host_col[node.slot] is not None)

    # ==== tree API ====

    def reset(self) -> None:
        """Revoke every lease (epoch advance; late releases settle stale), drop the tree, start a new one."""
        self.ledger.advance_epoch()
        for locks in (self.device_locks, self.host_locks, self.write_marks):
            while locks:
                _, lease = locks.popitem()
                lease.release()
        for stack in self.full_pins.values():
            while stack:
                stack.pop().release()
        self.full_pins.clear()
        for fifo in self.load_backs.values():
            while fifo:
                fifo.popleft().release()
        self.load_backs.clear()
        self.record.reset()
        self.tree.kill()
        self._build_tree()

    def node_by_id(self, node_id: NodeId) -> UnifiedTreeNode:
        raise RefusedFeatureError(
            f"node_by_id({node_id}): SGLang node objects (sessions, C128); its nodes are unicache's")

    @property
    def root_node(self) -> UnifiedTreeNode:
        raise RefusedFeatureError("root_node: SGLang node objects (sessions, C128); its nodes are unicache's")

    def is_backuped(self, node_id: NodeId) -> bool:
        node = self.node(node_id)
        return self.store.host_col[node.slot] is not None and node.parent is not None

    def is_root(self, node_id: NodeId) -> bool:
        return self.node(node_id) is self.root

    def get_last_hash_value(self, node_id: NodeId) -> Optional[str]:
        """No page hashes: they exist only with storage or KV events, both refused."""
        self.node(node_id)
        return None

    def get_prefix_hash_values(self, node_id: NodeId) -> list[str]:
        self.node(node_id)
        return []

    def get_hash_values(self, node_id: NodeId) -> list[str]:
        self.node(node_id)
        return []

    def root_node_handle(self, extra_key: Optional[str] = None) -> NodeId:
        return self.root.id

    def dfs_weight_order(self, node_ids: Sequence[NodeId]) -> list[int]:
        """SGLang's order: depth first, heavier subtrees (more requests ending in them) first."""
        by_node: dict[int, list[int]] = {}
        for i, nid in enumerate(node_ids):
            by_node.setdefault(self.node(nid).id, []).append(i)
        weight: dict[int, int] = {k: len(v) for k, v in by_node.items()}
        post: list[Node] = []
        stack: list[tuple[Node, bool]] = [(self.root, False)]
        while stack:
            x, seen = stack.pop()
            if seen:
                post.append(x)
                continue
            stack.append((x, True))
            stack.extend((c, False) for c in reversed(list(x.children.values())))
        for x in post:
            weight[x.id] = weight.get(x.id, 0) + sum(weight.get(c.id, 0) for c in x.children.values())
        order: list[int] = []
        stack = [(self.root, False)]
        while stack:
            x, seen = stack.pop()
            if seen:
                order.extend(by_node.get(x.id, ()))
                continue
            kids = sorted(x.children.values(), key=lambda c: -weight.get(c.id, 0))
            stack.append((x, True))
            stack.extend((c, False) for c in reversed(kids))
        return order

    def collect_path_info(self, end_node_ids: Sequence[NodeId]) -> tuple[tuple[TreePathNodeInfo, ...], ...]:
        dev = self.store.dev
        out: list[tuple[TreePathNodeInfo, ...]] = []
        for nid in end_node_ids:
            path = self._path(self.node(nid))
            infos: list[TreePathNodeInfo] = []
            for x in reversed(path):
                parent = x.parent
                assert parent is not None
                vals = dev[x.slot]
                infos.append(TreePathNodeInfo(x.id, parent.id, x.start, x.end,
                                              None if vals is None else len(vals), len(x.children)))
            out.append(tuple(infos))
        return tuple(out)

    def walk_for_kv_canary(self, unlocked_only: bool, swa_resident_only: bool) -> RadixCacheWalkResult:
        slots: list[int] = []
        positions: list[int] = []
        prev: list[int] = []
        dev = self.store.dev
        stack: list[tuple[Node, int]] = [(self.root, -1)]
        while stack:
            x, parent_last = stack.pop()
            vals = dev[x.slot] or []
            emit = x is not self.root and not (unlocked_only and self._dev_pinned(x))
            last = parent_last
            for j, s in enumerate(vals):
                if emit:
                    slots.append(s)
                    positions.append(x.start + j)
                    prev.append(parent_last if j == 0 else vals[j - 1])
                last = s
            stack.extend((c, last) for c in reversed(list(x.children.values())))
        return RadixCacheWalkResult(
            slot_indices=torch.tensor(slots, dtype=torch.int64),
            positions=torch.tensor(positions, dtype=torch.int64),
            prev_slot_indices=torch.tensor(prev, dtype=torch.int64),
        )

    def all_values_flatten(self) -> torch.Tensor:
        tensors = self._tensors
        chunks = [tensors[x.id] for x in self.tree if x.id in tensors]
        return torch.cat(chunks) if chunks else self._empty

    def all_mamba_values_flatten(self) -> torch.Tensor:
        return torch.tensor([], dtype=torch.int64, device=self.device)

    def pretty_print(self) -> None:
        dev, host = self.store.dev, self.store.host_col
        for x in self.tree:
            depth = len(self._path(x))
            print(f"{'  ' * depth}node {x.id} [{x.start},{x.end}) device={dev[x.slot] is not None} "
                  f"host={host[x.slot] is not None} device_pins={self.device_lock_count(x)} "
                  f"host_pins={len(self.host_leases(x))}")

    # ==== sanity ====

    def sanity_check(self, ongoing_write_through: list[tuple[int, NodeId]],
                     ongoing_load_back: list[tuple[int, NodeId]]) -> None:
        """Recompute the tree's invariants, the sizes and every pin from the live leases; raise on any difference."""
        problems: list[str] = []
        store = self.store
        dev, host = store.dev, store.host_col
        w = self.page_size * _TB
        seen: set[int] = set()
        total = protected = 0
        expected_dev: dict[int, int] = defaultdict(int)
        for x in self.tree:
            seen.add(x.id)
            if self._nodes.get(x.id) is not x:
                problems.append(f"node {x.id} is in the tree but not in the handle map")
            parent = x.parent
            if parent is None:
                continue
            if parent.children.get(x.kb[:w]) is not x:
                problems.append(f"node {x.id} is not its parent {parent.id}'s child")
            d = dev[x.slot]
            t = self._tensors.get(x.id)
            if (None if t is None else t.tolist()) != d:
                problems.append(f"node {x.id}: the device tensor kept for it differs from its values")
            if d is not None:
                total += len(d)
                if len(d) != x.end - x.start:
                    problems.append(f"node {x.id}: {len(d)} device values for {x.end - x.start} tokens")
                if parent is not self.root and dev[parent.slot] is None:
                    problems.append(f"node {x.id} is on device below host-only node {parent.id}")
                if self._dev_pinned(x):
                    protected += len(d)
            elif host[x.slot] is None:
                problems.append(f"node {x.id} holds Full KV on neither tier")
            kids = sum(1 for c in x.children.values() if dev[c.slot] is not None)
            if kids != x.dev_children:
                problems.append(f"node {x.id}: dev_children {x.dev_children}, {kids} children on device")
            if self.is_evictable_device_leaf(x) and not x.lru & store.lru_device.bit:
                problems.append(f"node {x.id} is an evictable device leaf missing from the device queue")
            if self.is_evictable_host_leaf(x) and not x.lru & store.lru_host.bit:
                problems.append(f"node {x.id} is an evictable host leaf missing from the host queue")
        if set(self._nodes) != seen:
            problems.append(f"handles of removed nodes still mapped: {sorted(set(self._nodes) - seen)}")
        if (total, protected) != (self._total, self._protected):
            problems.append(f"sizes: total {self._total} protected {self._protected}, recomputed {total} {protected}")
        for lease in list(self.device_locks.values()) + [p for s in self.full_pins.values() for p in s]:
            owner = lease.owner
            assert isinstance(owner, TreeReceipt)
            anchor = self._nodes.get(owner.node_id or -1)
            if anchor is None:
                problems.append(f"{owner} (anchor {owner.node_id}): anchor is not a live node")
                continue
            want = {x.id for x in ([] if _FULL in owner.skipped_lock_components else self._path(anchor))}
            got = {x.id for x in _holders(lease)}
            if want != got:
                problems.append(f"{owner} on node {anchor.id}: pins {sorted(got)}, its path is {sorted(want)}")
            for nid in want:
                expected_dev[nid] += 1
        for x in self.tree:
            if x is not self.root and self.device_lock_count(x) != expected_dev.get(x.id, 0):
                problems.append(f"node {x.id}: {self.device_lock_count(x)} device pins, "
                                f"{expected_dev.get(x.id, 0)} leases cover it")
        held = (len(self.device_locks) + len(self.host_locks) + len(self.write_marks)
                + sum(len(s) for s in self.full_pins.values()) + sum(len(f) for f in self.load_backs.values()))
        if held != self.ledger.live_count:
            problems.append(f"{self.ledger.live_count} live leases, the core holds {held}")
        for ack, nid in ongoing_write_through:
            if ack not in self.write_marks:
                problems.append(f"write-through ack {ack} (node {nid}) has no mark lease")
        for anchor_id, _nid in ongoing_load_back:
            anchor = self._nodes.get(anchor_id)
            if anchor is None or not self.load_backs.get(anchor_id):
                problems.append(f"load-back anchor {anchor_id} is not live or has no load-back pin lease")
            elif not self._dev_pinned(anchor):
                problems.append(f"load-back anchor {anchor_id} is not device-locked")
        if problems:
            raise TreeCoreSanityError(problems)

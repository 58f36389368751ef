"""`TreeState`: the state every part of tree core "unicache" shares, and the helpers they all use.

Handles (NodeId -> node), the clock, the Full store's columns and pin sets,
the sizes, and the moves every part makes: filing a node in an eviction
queue, publishing and dropping values, removing nodes, the duplicate index,
the split callback, pinning and releasing leases. The design is in `core`.
"""

from __future__ import annotations

import os
import time
from array import array
from collections import deque
from itertools import count
from typing import TYPE_CHECKING, Final, Optional, TypeVar, cast

import torch
from sglang.srt.mem_cache.base_prefix_cache import MatchResult
from sglang.srt.mem_cache.events import KVCacheEventRecorder
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.cache_action import BackupKV, UpdatePendingBackupOnNodeSplit
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.components import TreeComponent
from sglang.srt.mem_cache.unified_cache.components.mamba import MambaComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import BaseEvictionResult, NodeId
from mypy_extensions import mypyc_attr, trait

from leases import Borrowed, Held, Lease, LeaseLedger, PinSet
from unicache.components.full import FullStore
from unicache.components.handed import HandedValues
from unicache.integrations.sglang.mamba import LeaseMambaComponent
from unicache.integrations.sglang.treecore.errors import NamespacedKeyError, NodeStateError, UnknownNodeError
from unicache.integrations.sglang.treecore.mamba import MambaPart
from unicache.integrations.sglang.treecore.part import ComponentPart
from unicache.integrations.sglang.treecore.record import CoreRecord
from unicache.integrations.sglang.treecore.receipts import FullHost, LoadBackPin, TreeReceipt, WriteThroughMark
from unicache.integrations.sglang.treecore.refusals import refuse_unsupported
from unicache.integrations.sglang.treecore.swa import SWAPart
from unicache.integrations.sglang.treecore.values import host_tensor, id_list
from unicache.integrations.sglang.treecore.walk import Actions, InsertWalk
from unicache.markers import Full
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree, common_pages

if TYPE_CHECKING:
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams

    from unicache.dump.signal import DumpRequest
    from unicache.integrations.sglang.treecore.livedump import LiveDump

FULL: Final = ComponentType.FULL
TOKEN_BYTES: Final = 8
"""Bytes a token id takes in the keys (SGLang's token ids are int64)."""
TICK: Final = 1 << 20
"""Clock units per SGLang time-counter step: a match stamps a path of up to `TICK` nodes below one step."""

LEASE_HISTORY_ENV: Final = "UNICACHE_SGLANG_LEASE_HISTORY"
"""Lease events the ledger keeps (its flight recorder, which dumps carry); 0, the default, keeps none (the ring
costs a record per acquire and release: `benchmarks/bench_treecore_tools.py`). Dumps carry the core's own record
of its last acks and refused load-backs either way (`record`)."""

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


def lease_holders(lease: Borrowed[Lease[C, Held]]) -> list[Node]:
    """The nodes a lease pins (every pin set of this core is made by a store for a node: `pin_set`, `host_pin_set`)."""
    return cast("list[Node]", [p.holder for p in lease.pin_sets()])


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class TreeState:
    """The shared state of tree core "unicache" (see the module docstring); the parts subclass it."""

    live_dump: LiveDump
    """The core's SIGUSR1 dump (`livedump`; made by `UnicacheTreeCore` once the parts are built)."""
    _live_request: DumpRequest
    """`live_dump`'s request flag, read at the safe points (`match_prefix`, `evictable_size`)."""

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
        comps = tuple(params.tree_components or components)
        self.mamba = MambaPart(self, params.page_size) if ComponentType.MAMBA in comps else None
        window = params.swa_retain_window
        self.swa = (SWAPart(self, params.page_size, window)
                    if ComponentType.SWA in comps and window is not None else None)
        parts: dict[ComponentType, ComponentPart] = {}
        if self.swa is not None:
            parts[ComponentType.SWA] = self.swa
        if self.mamba is not None:
            parts[ComponentType.MAMBA] = self.mamba
        self.aux: tuple[ComponentPart, ...] = tuple(parts[c] for c in comps if c in parts)
        """The configured components beyond Full, in SGLang's order; the core calls each at every step."""
        mamba = components.get(ComponentType.MAMBA)
        if mamba is not None and type(mamba) is MambaComponent:
            mamba.__class__ = LeaseMambaComponent
        self._build_tree()

    def _build_tree(self) -> None:
        """A fresh tree, store and bookkeeping (construction and `reset`)."""
        self.store = FullStore.engine_owned(self.page_size, FullHost)
        handed = self.store.handed
        assert handed is not None
        self.handed: HandedValues = handed
        self.tree = RadixTree(self.page_size, ids=self._ids, owner=self, on_split=self._on_split, token_bytes=TOKEN_BYTES)
        self.tree.register(Full, self.store)
        for part in self.aux:
            part.new_tree(self.tree)
        self.root = self.tree.root
        self.root.last_access = self._tick()
        self._nodes: dict[int, Node] = {self.root.id: self.root}
        self._tensors: dict[int, torch.Tensor] = {}
        self._total = 0
        self._protected = 0
        self._insert: Optional[InsertWalk] = None
        self._walk_quota: Optional[int] = None
        self._walk_returned: list[Node] = []
        self._split_action: Optional[UpdatePendingBackupOnNodeSplit] = None
        self._empty_match = MatchResult(device_prefix_len=0, last_device_node=self.root.id,
                                        last_host_node=self.root.id, best_match_node=self.root.id,
                                        cache_actions=[])

    def _tick(self) -> int:
        self._clock += TICK
        return self._clock

    def tick(self) -> int:
        """One step of SGLang's time counter (the access time of a node the step touched)."""
        return self._tick()

    def between_walks(self) -> bool:
        """No device eviction walk and no suspended insert in progress: a safe point for a live dump."""
        return self._walk_quota is None and self._insert is None

    def live_node(self, node_id: int) -> Optional[Node]:
        """The live node named `node_id`, or None."""
        return self._nodes.get(node_id)

    def full_on_device(self, node: Node) -> bool:
        return node.parent is None or self.store.dev[node.slot] is not None

    def full_on_host(self, node: Node) -> bool:
        return node.parent is not None and self.store.host_col[node.slot] is not None

    def full_device_tensor(self, node: Node) -> Optional[torch.Tensor]:
        """The node's Full device indices as SGLang handed them in (`_tensors`), or None."""
        return self._tensors.get(node.id)

    def full_pinned(self, node: Node) -> bool:
        return self._dev_pinned(node)

    def replace_full_device(self, node: Node, tensor: torch.Tensor) -> None:
        """Give `node` (Full on device) the fresh Full indices `tensor` (SGLang's SWA recovery on insert: the
        old indices are freed by its `FreeDeviceKVFullOnly` action, not handed back here)."""
        old = self.store.dev[node.slot]
        if old is None or len(old) != tensor.numel():
            raise NodeStateError("insert", node.id, "replacing Full KV that is not on device, or of another length")
        self.store.set_device(node, id_list(tensor))
        self._tensors[node.id] = tensor

    def split_node(self, node: Node, k: int, actions: Actions) -> Node:
        """Split `node` after its first `k` tokens (a pending-backup split action into `actions`); the upper."""
        upper = self.tree.split(node, k)
        self._take_split_action(actions)
        return upper

    def load_back_pending(self, node: Node) -> bool:
        """Whether a load-back's Full lease holds the node's host copy (SGLang's `load_back_pending_id`)."""
        return self._load_back_pinned(node)

    def _aux_pinned(self, node: Node) -> bool:
        """Whether a lease pins any tier of an auxiliary component on the node (SGLang's lock refs of each)."""
        for part in self.aux:
            if part.device_pinned(node) or part.host_pinned(node):
                return True
        return False

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

    def _host_pinned(self, node: Node) -> bool:
        p = self.handed.host_pin_sets.get(node.slot)
        return p is not None and bool(p)

    def device_lock_count(self, node: Node) -> int:
        """Leases pinning the node's device tier (device locks and Full pins); the root counts 1, as SGLang's."""
        if node is self.root:
            return 1
        p = self.store.pins(node)
        return len(p) if p is not None else 0

    def host_leases(self, node: Node) -> list[Borrowed[Lease[FullHost, Held]]]:
        """The leases pinning the node's host tier (host locks, write-through marks, load-back pins):
        views, which their owners (receipts, marks, load-back pins) release."""
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
        if p is not None and p:
            return False
        if self.aux:
            for part in self.aux:
                if part.device_pinned(node):
                    return False
        return True

    def is_evictable_host_leaf(self, node: Node) -> bool:
        """SGLang's H-leaf: not the root, Full on host only, no children, no pin on either tier."""
        slot = node.slot
        return (node.parent is not None and slot != 0 and not node.children
                and self.store.dev[slot] is None and self.store.host_col[slot] is not None
                and not self._dev_pinned(node) and not self._host_pinned(node)
                and not (self.aux and self._aux_pinned(node)))

    def _maybe_file(self, node: Node) -> None:
        """File `node` in the eviction queue of the tier it just became an evictable leaf of."""
        store = self.store
        slot = node.slot
        if node.parent is None or slot == 0:
            return
        p = store.pin_sets.get(slot)
        if p is not None and p:
            return
        aux = self.aux
        if aux:
            for part in aux:
                if part.device_pinned(node):
                    return
        if store.dev[slot] is not None:
            if not node.dev_children:
                store.lru_device.push(node)
        elif (not node.children and store.host_col[slot] is not None and not self._host_pinned(node)
              and not (aux and self._aux_pinned(node))):
            store.lru_host.push(node)

    def _part(self, component_type: ComponentType) -> ComponentPart:
        """The configured auxiliary component `component_type` (ValueError, SGLang's, when it is not one)."""
        for part in self.aux:
            if part.component_type == component_type:
                return part
        raise ValueError(f"component is not enabled: {component_type}")

    def refile(self, node: Node) -> None:
        """File `node` in the eviction queue of the tier it became an evictable leaf of (a pin drained)."""
        self._maybe_file(node)

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
        for part in self.aux:
            part.forget(node)
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
        for part in self.aux:
            part.split(upper, lower)
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
        child = node.children[tb[pos * TOKEN_BYTES: (pos + self.page_size) * TOKEN_BYTES]]
        kb = child.kb
        if tb.startswith(kb, pos * TOKEN_BYTES, n * TOKEN_BYTES):
            return child, child.end - child.start, False
        m = common_pages(tb[pos * TOKEN_BYTES: n * TOKEN_BYTES], kb, self.page_size * TOKEN_BYTES) // TOKEN_BYTES
        return child, m, True

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
        holders = lease_holders(lease)
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
        holders = lease_holders(lease)
        lease.release()
        sets = self.handed.host_pin_sets
        for x in holders:
            p = sets.get(x.slot)
            if p is not None and not p:
                self._maybe_file(x)
        return holders

    def _remove_tombstones(self, cur: Node, result: BaseEvictionResult) -> None:
        """SGLang's tombstone cleanup: remove childless ancestors without Full KV, up to a live or pinned one.

        An auxiliary state on a node without Full on device goes (into
        `result`), then one on a node without Full on either tier.
        """
        store = self.store
        aux = self.aux
        while cur is not self.root and not cur.children:
            if self._dev_pinned(cur) or self._host_pinned(cur) or (aux and self._aux_pinned(cur)):
                break
            if store.dev[cur.slot] is not None:
                self._maybe_file(cur)
                break
            for part in aux:
                part.drop_orphans(cur, result, host=False)
            if store.host_col[cur.slot] is not None:
                self._maybe_file(cur)
                break
            for part in aux:
                part.drop_orphans(cur, result, host=True)
            parent = cur.parent
            assert parent is not None
            self._remove(cur)
            self._maybe_file(parent)
            cur = parent

    def evict_host_leaf(self, node: Node, result: BaseEvictionResult) -> int:
        """SGLang's atomic host-leaf eviction: every component's host data (counted), the node, its tombstones."""
        hvals: list[array[int]] = []
        n = self._drop_host(node, hvals)
        result.host_frees[FULL].extend(host_tensor(h) for h in hvals)
        result.tracker[FULL] += n
        for part in self.aux:
            part.drop_all(node, result, count_host=True)
        parent = node.parent
        assert parent is not None
        self._remove(node)
        self._remove_tombstones(parent, result)
        return n

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

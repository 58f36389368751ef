"""`MambaPart`: the Mamba component of tree core "unicache" — its states, LRU lists, leases and walks.

A Mamba state is one slot index of SGLang's Mamba pool, on a node's device
tier and/or its host tier: the recurrent state after the node's last token.
The values are engine-owned as Full's are: the engine's Mamba allocator
hands each index in (insert, load-back, backup) and gets it back in
eviction results (`device_frees[MAMBA]`, `host_frees[MAMBA]`); the
`MambaStore` in its engine-owned mode records the index per node and
hands it back through its outbox, and the part keeps the tensor it came in
as (`_dev`, `_host`) so it crosses the boundary once.

Pins are leases in the store's per-node pin sets: `Mamba` (a device lock
pins its anchor's state, tombstone or not, as SGLang's Mamba lock counts
its anchor alone) and `MambaHost` (a host lock; a load-back reading the
anchor's host state, owned by the same `LoadBackPin` as its Full lease).
Sizes (states on device; protected: those whose pin set is non-empty) are
kept incrementally and recomputed by `sanity`.

Recency is SGLang's, not the tree clock: its Mamba component keeps LRU
lists of its own (`StateLRU` mirrors them: a new state enters at the MRU
end, a match moves only its best node's state there, the walks start at
the LRU end and skip pinned nodes). The device walk returns a node that is
a Full device leaf (the cache evicts it whole), tombstones the state of an
internal node, and under write-back HiCache first pauses for its backup
(`mamba_backup_node_id`, resumed by `finish_eviction`). A split leaves the
state and its pins with the lower fragment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Optional

import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, InsertResult, MatchResult
from sglang.srt.mem_cache.hicache_storage import PoolName, PoolTransfer
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    BaseEvictionResult,
    EvictDeviceNextNodeResult,
)
from sglang.srt.runtime_context import mamba_checkpoint_grid

from leases import Held, Lease
from unicache.components.mamba import MambaStore
from unicache.integrations.sglang.treecore.errors import NodeStateError
from unicache.integrations.sglang.treecore.part import ComponentPart, PartHost
from unicache.integrations.sglang.treecore.receipts import LoadBackPin, MambaHost, TreeReceipt
from unicache.integrations.sglang.treecore.walk import Actions
from unicache.markers import Mamba
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req

MAMBA: Final = ComponentType.MAMBA
_LRU_END: Final = 0
_MRU_END: Final = -1


class StateLRU:
    """SGLang's per-component LRU list: entries by node id, newest at one end, walked from the oldest.

    A doubly linked list over node ids (`newer`, `older`), with two
    sentinels (`_LRU_END`, `_MRU_END`; node ids start at 1).
    """

    __slots__ = ("nodes", "newer", "older")

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.newer: dict[int, int] = {_LRU_END: _MRU_END}
        self.older: dict[int, int] = {_MRU_END: _LRU_END}

    def __contains__(self, node: Node) -> bool:
        return node.id in self.nodes

    def __len__(self) -> int:
        return len(self.nodes)

    def insert_mru(self, node: Node) -> None:
        nid = node.id
        assert nid not in self.nodes, nid
        self.nodes[nid] = node
        prev = self.older[_MRU_END]
        self.newer[prev] = nid
        self.older[nid] = prev
        self.newer[nid] = _MRU_END
        self.older[_MRU_END] = nid

    def remove(self, node: Node) -> None:
        nid = node.id
        del self.nodes[nid]
        prev = self.older.pop(nid)
        nxt = self.newer.pop(nid)
        self.newer[prev] = nxt
        self.older[nxt] = prev

    def insert_older(self, ref: Node, node: Node) -> None:
        """File `node` just older than `ref` (a split's upper fragment beside its lower one)."""
        nid = node.id
        assert nid not in self.nodes and ref.id in self.nodes, (nid, ref.id)
        self.nodes[nid] = node
        prev = self.older[ref.id]
        self.newer[prev] = nid
        self.older[nid] = prev
        self.newer[nid] = ref.id
        self.older[ref.id] = nid

    def move_to_mru(self, node: Node) -> None:
        self.remove(node)
        self.insert_mru(node)

    def next_unpinned(self, after: Optional[Node], pinned: Mapping[int, object]) -> Optional[Node]:
        """The oldest entry newer than `after` (the LRU end when None) whose node slot has no live pin."""
        nid = self.newer[_LRU_END if after is None else after.id]
        while nid != _MRU_END:
            node = self.nodes[nid]
            p = pinned.get(node.slot)
            if not p:
                return node
            nid = self.newer[nid]
        return None

    def oldest_first(self) -> list[Node]:
        out: list[Node] = []
        nid = self.newer[_LRU_END]
        while nid != _MRU_END:
            out.append(self.nodes[nid])
            nid = self.newer[nid]
        return out


class MambaPart(ComponentPart):
    """The Mamba component of one core (see the module docstring); the core calls it at each step."""

    component_type = MAMBA

    def __init__(self, core: PartHost, page_size: int) -> None:
        self.core = core
        self.grid = mamba_checkpoint_grid(page_size)
        self.locks: dict[int, Lease[Mamba, Held]] = {}
        """Device locks' Mamba leases, by their receipt's `lease_id`."""
        self.host_locks: dict[int, Lease[MambaHost, Held]] = {}
        self.load_backs: dict[int, Lease[MambaHost, Held]] = {}
        """Load-backs' Mamba leases, by their `LoadBackPin.seq`."""

    def new_tree(self, tree: RadixTree) -> None:
        """A fresh store, lists and sizes for `tree` (construction and reset)."""
        self.store = MambaStore.engine_owned(MambaHost)
        handed = self.store.handed
        assert handed is not None
        self.handed = handed
        tree.register(Mamba, self.store)
        self._dev: dict[int, torch.Tensor] = {}
        self._host: dict[int, torch.Tensor] = {}
        self.lru = StateLRU()
        self.host_lru = StateLRU()
        self.total = 0
        self.protected = 0
        self._quota: Optional[int] = None
        self._cursor: Optional[Node] = None
        self._paused: Optional[int] = None

    # ==== residency and pins ====

    def device_state(self, node: Node) -> Optional[torch.Tensor]:
        return self._dev.get(node.id)

    def host_state(self, node: Node) -> Optional[torch.Tensor]:
        return self._host.get(node.id)

    def on_device(self, node: Node) -> bool:
        return node.id in self._dev

    def host_only(self, node: Node) -> bool:
        return node.id not in self._dev and node.id in self._host

    def device_pinned(self, node: Node) -> bool:
        p = self.store.pin_sets.get(node.slot)
        return p is not None and bool(p)

    def host_pinned(self, node: Node) -> bool:
        p = self.handed.host_pin_sets.get(node.slot)
        return p is not None and bool(p)

    def device_lock_count(self, node: Node) -> int:
        p = self.store.pins(node)
        return len(p) if p is not None else 0

    def host_lock_count(self, node: Node) -> int:
        p = self.handed.host_pins(node)
        return sum(1 for lease in p if isinstance(lease.owner, TreeReceipt)) if p is not None else 0

    # ==== values ====

    def set_device(self, node: Node, value: torch.Tensor) -> None:
        """Give `node` (no device state) the state `value` (SGLang's `set_component_device_value`)."""
        if node.id in self._dev:
            raise NodeStateError("set_component_device_value", node.id, "its Mamba state is already on device")
        if value.numel() != 1:
            raise NodeStateError("set_component_device_value", node.id, f"{value.numel()} Mamba indices for one state")
        self.store.set_device_state(node, int(value.item()))
        self._dev[node.id] = value
        if node in self.host_lru:
            self.host_lru.remove(node)
        self.lru.insert_mru(node)
        self.total += 1
        if self.device_pinned(node):
            self.protected += 1

    def drop_device(self, node: Node, result: BaseEvictionResult, count: bool = True) -> None:
        """Hand back `node`'s device state into `result` (it must be unpinned); a host copy joins the host list."""
        self.store.drop_device(node)
        self.handed.take_device()
        result.device_frees[MAMBA].append(self._dev.pop(node.id))
        self.total -= 1
        if node in self.lru:
            self.lru.remove(node)
        if count:
            result.tracker[MAMBA] += 1
        if node.id in self._host and node not in self.host_lru:
            self.host_lru.insert_mru(node)

    def drop_host(self, node: Node, result: BaseEvictionResult, count: bool = True) -> None:
        self.store.drop_host(node)
        self.handed.take_host()
        result.host_frees[MAMBA].append(self._host.pop(node.id))
        if node in self.host_lru:
            self.host_lru.remove(node)
        if count:
            result.tracker[MAMBA] += 1

    def drop_all(self, node: Node, result: BaseEvictionResult, count_host: bool) -> None:
        """Free both tiers of a node leaving the tree; the tracker counts the device state (or, with
        `count_host`, the host one), as SGLang's whole-node release does."""
        if node.id in self._dev:
            self.drop_device(node, result, count=not count_host)
        if node.id in self._host:
            self.drop_host(node, result, count=count_host)

    def drop_orphans(self, node: Node, result: BaseEvictionResult, host: bool) -> None:
        """SGLang's tombstone cleanup of a node without Full on device (then on either tier): its states go."""
        if not host:
            if node.id in self._dev:
                self.drop_device(node, result)
        elif node.id in self._host:
            self.drop_host(node, result)

    def forget(self, node: Node) -> None:
        """A node leaves the tree: it must hold no state."""
        assert node.id not in self._dev and node.id not in self._host, node.id

    # ==== locks ====

    def lock(self, node: Node, receipt: TreeReceipt, key: int) -> None:
        """A device lock's Mamba lease: its anchor's state (none at the root), filed under `key`."""
        pins = () if node.parent is None else (self.store.pin_set(node),)
        if pins and not pins[0] and node.id in self._dev:
            self.protected += 1
        self.locks[key] = self.core.ledger.acquire(Mamba, owner=receipt, pins=pins)

    def holds_lock(self, key: int) -> bool:
        return key in self.locks

    def holds_host_lock(self, key: int) -> bool:
        return key in self.host_locks

    def unlock(self, key: int) -> None:
        lease = self.locks.pop(key)
        holders = [p.holder for p in lease.pin_sets()]
        lease.release()
        for x in holders:
            assert isinstance(x, Node)
            if not self.device_pinned(x):
                if x.id in self._dev:
                    self.protected -= 1
                self.core.refile(x)

    def host_lock(self, node: Node, receipt: TreeReceipt, key: int) -> None:
        """A host lock's Mamba lease on its anchor; a host state leaves the host list while pinned (SGLang's)."""
        pins = () if node.parent is None else (self.handed.host_pin_set(node),)
        if pins and not pins[0] and node in self.host_lru:
            self.host_lru.remove(node)
        self.host_locks[key] = self.core.ledger.acquire(MambaHost, owner=receipt, pins=pins)

    def _release_host(self, lease: Lease[MambaHost, Held]) -> None:
        holders = [p.holder for p in lease.pin_sets()]
        lease.release()
        for x in holders:
            assert isinstance(x, Node)
            if not self.host_pinned(x):
                if x.id not in self._dev and x.id in self._host and x not in self.host_lru:
                    self.host_lru.insert_mru(x)
                self.core.refile(x)

    def host_unlock(self, key: int) -> None:  # lease: takes-from host_locks
        self._release_host(self.host_locks.pop(key))

    # ==== match and insert ====

    def usable(self, node: Node, hicache: bool) -> bool:
        """SGLang's Mamba match validator: a node ends a match only with its state (on host too, with HiCache)."""
        nid = node.id
        return nid in self._dev or (hicache and nid in self._host)

    def match_end(self, best: Node) -> None:
        """A match uses only its best node's state: that one moves to the MRU end."""
        if best.id in self._dev:
            self.lru.move_to_mru(best)

    def finalize_match(self, result: MatchResult, best: Node) -> MatchResult:
        """SGLang's branching point (the last grid-aligned Full hit past the Mamba boundary) and host hit."""
        boundary = result.device_prefix_len + result.host_hit_length
        aligned = (result.full_kv_hit_length // self.grid) * self.grid
        host_hit = result.mamba_host_hit_length
        if self.host_only(best):
            host_hit = max(host_hit, 1)
        return result._replace(mamba_branching_seqlen=aligned if aligned > boundary else None,
                               mamba_host_hit_length=host_hit)

    def commit_insert(self, node: Node, is_new_leaf: bool, params: InsertParams, result: InsertResult,
                      actions: Actions) -> None:
        """The insert's state lands on its target (new leaf, or a node without one); else it already exists."""
        value = params.mamba_value
        if value is None:
            raise NodeStateError("insert", node.id, "no mamba_value for a FULL+MAMBA insert")
        if is_new_leaf:
            self.set_device(node, value)
            return
        if node.id not in self._dev:
            self.set_device(node, value)
            node.last_access = self.core.tick()
            return
        self.lru.move_to_mru(node)
        node.last_access = self.core.tick()
        result.mamba_exist = True

    def needs_backup(self, node: Node) -> bool:
        """A state on device without a host copy (an incremental backup of a backed-up node)."""
        return node.id in self._dev and node.id not in self._host

    # ==== HiCache ====

    def backup_transfers(self, node: Node, missing_only: bool) -> Optional[list[PoolTransfer]]:
        """The device state to copy to host (with `missing_only`, only when it has no host copy yet)."""
        value = self._dev.get(node.id)
        if value is None or (missing_only and node.id in self._host):
            return None
        return [PoolTransfer(name=PoolName.MAMBA, device_indices=value)]

    def commit_backup(self, node: Node, xfers: list[PoolTransfer]) -> None:
        host = xfers[0].host_indices if xfers else None
        if host is None or node.id in self._host:
            return
        if host.numel() != 1:
            raise NodeStateError("commit_backup", node.id, f"{host.numel()} Mamba host indices for one state")
        tensor = host.clone()
        self.store.set_host_state(node, int(tensor.item()))
        self._host[node.id] = tensor

    def load_back_transfers(self, anchor: Node, req: Optional[Req]) -> Optional[list[PoolTransfer]]:
        """The anchor's host state back to device, and into the request's own slot when it has one."""
        if anchor.id in self._dev:
            return None
        host = self._host.get(anchor.id)
        if host is None:
            return None
        out = [PoolTransfer(name=PoolName.MAMBA, host_indices=host, nodes_to_load=[anchor.id])]
        idx = req.kv.mamba_pool_idx if req is not None else None
        if idx is not None:
            out.append(PoolTransfer(name=PoolName.MAMBA, host_indices=host, device_indices=idx.unsqueeze(0)))
        return out

    def commit_load_back(self, anchor: Node, xfers: list[PoolTransfer], pin: LoadBackPin,
                         actions: Actions) -> None:
        """Publish the loaded state; a lease of `pin` holds the host state it was read from until the ack."""
        if not xfers:
            return
        dst = xfers[0].device_indices
        if anchor.id in self._host:
            self.load_backs[pin.seq] = self.core.ledger.acquire(
                MambaHost, owner=pin, pins=(self.handed.host_pin_set(anchor),))
        if dst is not None:
            self.set_device(anchor, dst.clone())

    def finish_load_back(self, pin: LoadBackPin) -> None:
        lease = self.load_backs.pop(pin.seq, None)
        if lease is not None:
            self._release_host(lease)

    # ==== device eviction walk ====

    def evict_start(self, request_cnt: int) -> None:
        self._quota = request_cnt
        self._cursor = self.lru.next_unpinned(None, self.store.pin_sets)
        self._paused = None

    def evict_next(self, tracker: dict[ComponentType, int], result: EvictDeviceNextNodeResult) -> None:
        """One step of SGLang's Mamba walk into `result`: a Full leaf to evict, a tombstone, or a backup pause."""
        quota = self._quota
        if quota is None:
            raise NodeStateError("evict_device_next_node", self.core.root.id, "no Mamba device eviction walk started")
        if self._paused is not None:
            raise NodeStateError("evict_device_next_node", self._paused,
                                 "finish the pending Mamba state eviction before advancing")
        lru = self.lru
        pins = self.store.pin_sets
        cursor = self._cursor
        if cursor is not None and cursor not in lru:
            cursor = self._cursor = lru.next_unpinned(None, pins)
        if tracker.get(MAMBA, 0) >= quota or cursor is None:
            return
        x = cursor
        core = self.core
        self._cursor = lru.next_unpinned(x, pins)
        if core.is_evictable_device_leaf(x):
            result.node_id = x.id
            result.made_progress = True
            return
        if (core.enable_hicache and core.is_write_back and x.id not in self._host
                and not core.full_on_host(x) and core.full_on_device(x)):
            self._paused = x.id
            result.mamba_backup_node_id = x.id
            result.made_progress = True
            return
        self.drop_device(x, result)
        result.made_progress = True

    def finish_eviction(self, node_id: int) -> EvictDeviceNextNodeResult:
        """Resume the walk after the controller's backup attempt of the paused node (SGLang's checks)."""
        if self._quota is None:
            raise NodeStateError("finish_mamba_state_eviction", node_id, "no Mamba device eviction walk started")
        if self._paused != node_id:
            raise NodeStateError("finish_mamba_state_eviction", node_id,
                                 f"the pending Mamba state eviction is {self._paused}")
        self._paused = None
        result = EvictDeviceNextNodeResult(made_progress=True)
        core = self.core
        node = core.live_node(node_id)
        if (node is None or node.id not in self._dev or self.device_pinned(node)
                or (core.is_write_back and core.load_back_pending(node)) or node not in self.lru):
            return result
        if core.is_evictable_device_leaf(node) or not core.full_on_device(node):
            self._cursor = node
            return result
        self.drop_device(node, result)
        return result

    def evict_end(self) -> None:
        self._quota = None
        self._cursor = None
        self._paused = None

    # ==== host eviction ====

    def drive_host_eviction(self, num: int, result: BaseEvictionResult) -> None:
        """SGLang's Mamba host walk: a host leaf goes whole, an internal node loses its host state."""
        lru = self.host_lru
        pins = self.handed.host_pin_sets
        core = self.core
        x = lru.next_unpinned(None, pins)
        while result.tracker.get(MAMBA, 0) < num and x is not None and x in lru:
            x_next = lru.next_unpinned(x, pins)
            if core.is_evictable_host_leaf(x):
                core.evict_host_leaf(x, result)
            else:
                self.drop_host(x, result)
            x = x_next

    # ==== sizes, reset, checks ====

    def release_all(self) -> None:
        """Release every lease (a reset: the ledger's epoch has advanced)."""
        for locks in (self.locks, self.host_locks, self.load_backs):
            while locks:
                _, lease = locks.popitem()
                lease.release()

    def held(self) -> int:
        return len(self.locks) + len(self.host_locks) + len(self.load_backs)

    def sanity(self, nodes: list[Node], problems: list[str]) -> None:
        """States, lists, sizes and pins recomputed from the tree and the live leases."""
        store = self.store
        total = protected = 0
        seen: set[int] = set()
        for x in nodes:
            seen.add(x.id)
            d = self._dev.get(x.id)
            h = self._host.get(x.id)
            if store.device_state(x) != (None if d is None else int(d.item())):
                problems.append(f"node {x.id}: Mamba device state differs from the tensor kept for it")
            if store.host_state(x) != (None if h is None else int(h.item())):
                problems.append(f"node {x.id}: Mamba host state differs from the tensor kept for it")
            if x.parent is None:
                if d is not None or h is not None:
                    problems.append("the root holds a Mamba state")
                continue
            if d is not None:
                total += 1
                if self.device_pinned(x):
                    protected += 1
                if x not in self.lru:
                    problems.append(f"node {x.id}: Mamba state on device, not in the Mamba LRU list")
            elif x in self.lru:
                problems.append(f"node {x.id}: in the Mamba LRU list without a device state")
            if x in self.host_lru and (h is None or d is not None or self.host_pinned(x)):
                problems.append(f"node {x.id}: in the Mamba host list but not an unpinned host-only state")
        for lst, name in ((self.lru, "device"), (self.host_lru, "host")):
            stale = [nid for nid in lst.nodes if nid not in seen]
            if stale:
                problems.append(f"Mamba {name} list holds removed nodes {stale}")
        if (total, protected) != (self.total, self.protected):
            problems.append(f"Mamba sizes: total {self.total} protected {self.protected}, "
                            f"recomputed {total} {protected}")
        for key, lease in self.locks.items():
            owner = lease.owner
            assert isinstance(owner, TreeReceipt)
            got = [p.holder for p in lease.pin_sets()]
            anchor = self.core.live_node(owner.node_id or -1)
            want = [] if anchor is None or anchor.parent is None else [anchor]
            if got != want:
                problems.append(f"{owner} (key {key}): Mamba lease pins {got}, its anchor is {owner.node_id}")
        if any(self.device_lock_count(x) != sum(1 for lease in self.locks.values()
                                                 if any(p.holder is x for p in lease.pin_sets()))
               for x in nodes if x.parent is not None):
            problems.append("Mamba device pin sets differ from the live Mamba locks")

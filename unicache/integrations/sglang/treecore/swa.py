"""`SWAPart`: the sliding-window (SWA) component of tree core "unicache" — its values, LRU lists, leases and walks.

An SWA value is the engine's SWA pool indices of a node's tokens, on its
device tier and/or its host tier; a path needs them only for its last
`window` tokens (SGLang's ``swa_retain_window``). The values are
engine-owned as Full's are: SGLang hands them in (`set_component_device_value`
after the core's `SWARebuild` / `RecoverSWAWithLockedFull` actions, a
load-back's device indices, a backup's host indices) and gets them back in
eviction results. As SGLang's allocator frees SWA through the Full-to-SWA
mapping, a device free of SWA (`device_frees[SWA]`) carries the node's
*Full* indices. The `SWAStore` in its engine-owned mode records the values
per node and hands them back through its outbox; the part keeps the tensors
they came in as (`_dev`, `_host`, split with their nodes).

A node whose SWA device value was evicted while its Full KV stays is a
tombstone (its SWA may still be on host). Pins are leases in the store's
per-node pin sets: `SWA` (a device lock pins the window segment: its
anchor and ancestors up to the first node that completes `window` tokens,
tombstones included, as SGLang's SWA lock counts them; the receipt names
the lock's SWA uuid when the segment completes a window, as SGLang's does;
`dec_swa_lock_only` releases it early) and `SWAHost` (a host lock pins the same segment on the
host tier; a load-back pins the nodes whose host SWA it reads, owned by the
same `LoadBackPin` as its Full lease). A split pins the upper fragment with
every lease of the lower one. Sizes (tokens on device; protected: those
whose pin set is non-empty) are kept incrementally and recomputed by
`sanity`.

Recency is SGLang's per-component LRU (`StateLRU`): a match or an insert
moves the last window (+ one page) of its path to the MRU end, bottom
first; a split files the upper fragment just older than the lower. The
device walk returns a Full device leaf (the cache evicts it whole),
tombstones an internal node's SWA, and under write-back with an SWA host
pool first pauses for the backup of its unbacked window
(`swa_backup_node_id`, resumed by `finish_eviction`).

Match validation is SGLang's: walking down, a node ends a match only when
the path below the last SWA tombstone (on that tier) holds at least
`window` tokens, or when there is no tombstone above it at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Optional

import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, InsertResult, MatchResult
from sglang.srt.mem_cache.hicache_storage import PoolName, PoolTransfer
from sglang.srt.mem_cache.unified_cache.cache_action import (
    FreeDeviceKVFullOnly,
    RebuildFullToSWAMapping,
    RecoverSWAWithLockedFull,
    SWARebuild,
)
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    BaseEvictionResult,
    EvictDeviceNextNodeResult,
)

from leases import Held, Lease, PinSet
from unicache.components.swa import SWAStore
from unicache.integrations.sglang.treecore.errors import NodeStateError
from unicache.integrations.sglang.treecore.mamba import StateLRU
from unicache.integrations.sglang.treecore.part import ComponentPart, PartHost
from unicache.integrations.sglang.treecore.receipts import LoadBackPin, SWAHost, TreeReceipt
from unicache.integrations.sglang.treecore.values import host_array, id_list
from unicache.integrations.sglang.treecore.walk import Actions
from unicache.markers import SWA as SWAMarker
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req

SWA: Final = ComponentType.SWA
_NO_TOMBSTONE: Final = 1 << 62
"""The run length of a path with no SWA tombstone above (SGLang starts its validator at infinity)."""


class SWAPart(ComponentPart):
    """The SWA component of one core (see the module docstring); the core calls it at each step."""

    component_type = SWA

    def __init__(self, core: PartHost, page_size: int, window: int) -> None:
        if window < 1:
            raise ValueError(f"tree core 'unicache': the SWA window must be >= 1 token, got {window}")
        self.core = core
        self.page_size = page_size
        self.window = window
        self.locks: dict[int, Lease[SWAMarker, Held]] = {}
        """Device locks' SWA leases (their window segment), by their receipt's `lease_id`."""
        self.host_locks: dict[int, Lease[SWAHost, Held]] = {}
        self.load_backs: dict[int, Lease[SWAHost, Held]] = {}
        """Load-backs' SWA leases (the host values they read), by their `LoadBackPin.seq`."""

    def new_tree(self, tree: RadixTree) -> None:
        """A fresh store, lists and sizes for `tree` (construction and reset)."""
        self.store = SWAStore.engine_owned_window(self.page_size, self.window, SWAHost)
        handed = self.store.handed
        assert handed is not None
        self.handed = handed
        tree.register(SWAMarker, self.store)
        self._dev: dict[int, torch.Tensor] = {}
        self._host: dict[int, torch.Tensor] = {}
        self.lru = StateLRU()
        self.host_lru = StateLRU()
        self.total = 0
        self.protected = 0
        self._run_any = _NO_TOMBSTONE
        self._run_dev = _NO_TOMBSTONE
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

    def _segment(self, node: Node) -> list[Node]:
        """SGLang's SWA lock segment: `node` and its ancestors until `window` tokens are covered (not the root)."""
        out: list[Node] = []
        covered = 0
        x: Optional[Node] = node
        while x is not None and x.parent is not None and covered < self.window:
            out.append(x)
            covered += x.end - x.start
            x = x.parent
        return out

    # ==== values ====

    def set_device(self, node: Node, value: torch.Tensor) -> None:
        """Give `node` (no SWA on device) the SWA indices `value` (SGLang's `set_component_device_value`)."""
        if node.parent is None:
            raise NodeStateError("set_component_device_value", node.id, "the root holds no SWA values")
        if node.id in self._dev:
            raise NodeStateError("set_component_device_value", node.id, "its SWA values are already on device")
        n = node.end - node.start
        if value.numel() != n:
            raise NodeStateError("set_component_device_value", node.id, f"{value.numel()} SWA indices for {n} tokens")
        self.store.set_device(node, id_list(value))
        self._dev[node.id] = value
        if node in self.host_lru:
            self.host_lru.remove(node)
        self.lru.insert_mru(node)
        self.total += n
        if self.device_pinned(node):
            self.protected += n

    def drop_device(self, node: Node, result: BaseEvictionResult, count: bool = True) -> None:
        """Tombstone `node`'s SWA (it must be unpinned): its Full indices go to `device_frees[SWA]` (SGLang frees
        SWA through the Full-to-SWA mapping); a host copy joins the host list."""
        full = self.core.full_device_tensor(node)
        if full is None:
            raise NodeStateError("SWA eviction", node.id, "its SWA is on device but its Full KV is not")
        n = self.store.drop_device(node)
        self.handed.take_device()
        self._dev.pop(node.id)
        result.device_frees[SWA].append(full)
        self.total -= n
        if node in self.lru:
            self.lru.remove(node)
        if count:
            result.tracker[SWA] += n
        if node.id in self._host and node not in self.host_lru and not self.host_pinned(node):
            self.host_lru.insert_mru(node)

    def drop_host(self, node: Node, result: BaseEvictionResult, count: bool = True) -> None:
        n = self.store.drop_host(node)
        self.handed.take_host()
        result.host_frees[SWA].append(self._host.pop(node.id))
        if node in self.host_lru:
            self.host_lru.remove(node)
        if count:
            result.tracker[SWA] += n

    def drop_all(self, node: Node, result: BaseEvictionResult, count_host: bool) -> None:
        """Free both tiers of a node leaving the tree; the tracker counts the device values (or, with
        `count_host`, the host ones), as SGLang's whole-node release does."""
        if node.id in self._dev:
            self.drop_device(node, result, count=not count_host)
        if node.id in self._host:
            self.drop_host(node, result, count=count_host)

    def drop_orphans(self, node: Node, result: BaseEvictionResult, host: bool) -> None:
        if not host:
            if node.id in self._dev:
                self.drop_device(node, result)
        elif node.id in self._host:
            self.drop_host(node, result)

    def forget(self, node: Node) -> None:
        assert node.id not in self._dev and node.id not in self._host, node.id

    def split(self, upper: Node, lower: Node) -> None:
        """The tree split `lower` (the store's columns with it): slice the tensors, pin `upper` with every lease
        of `lower`, file `upper` just older than `lower` in the lists it belongs to."""
        cut = upper.end - upper.start
        ledger = self.core.ledger
        d = self._dev.pop(lower.id, None)
        if d is not None:
            self._dev[upper.id] = d[:cut]
            self._dev[lower.id] = d[cut:]
        h = self._host.pop(lower.id, None)
        if h is not None:
            self._host[upper.id] = h[:cut]
            self._host[lower.id] = h[cut:]
        pins = self.store.pins(lower)
        if pins is not None and pins:
            target: PinSet[SWAMarker, Node] = self.store.pin_set(upper)
            for lease in pins:
                ledger.pin(lease, target)
        host = self.handed.host_pins(lower)
        if host is not None and host:
            host_target = self.handed.host_pin_set(upper)
            for host_lease in host:
                ledger.pin(host_lease, host_target)
        if d is not None:
            self.lru.insert_older(lower, upper)
        elif h is not None and not self.host_pinned(upper):
            if lower in self.host_lru:
                self.host_lru.insert_older(lower, upper)
            else:
                self.host_lru.insert_mru(upper)

    # ==== locks ====

    def _pin(self, segment: list[Node]) -> tuple[PinSet[SWAMarker, Node], ...]:
        """The device pin sets of `segment`; each node the lease will be first to pin turns protected."""
        sets = tuple(self.store.pin_set(x) for x in segment)
        for x, p in zip(segment, sets):
            if not p and x.id in self._dev:
                self.protected += x.end - x.start
        return sets

    def lock(self, node: Node, receipt: TreeReceipt, key: int) -> None:
        """A device lock's SWA lease over the window segment ending at `node`, filed under `key`."""
        segment = self._segment(node)
        sets = self._pin(segment)
        self.locks[key] = self.core.ledger.acquire(SWAMarker, owner=receipt, pins=sets)
        receipt.set_lock_uuid(SWA, key if sum(x.end - x.start for x in segment) >= self.window else None)

    def holds_lock(self, key: int) -> bool:
        return key in self.locks

    def holds_host_lock(self, key: int) -> bool:
        return key in self.host_locks

    def _release_device(self, lease: Lease[SWAMarker, Held]) -> list[Node]:
        """Release a device lease; returns the nodes it drained."""
        holders = [p.holder for p in lease.pin_sets()]
        lease.release()
        drained: list[Node] = []
        for x in holders:
            assert isinstance(x, Node)
            if not self.device_pinned(x):
                if x.id in self._dev:
                    self.protected -= x.end - x.start
                drained.append(x)
        return drained

    def unlock(self, key: int) -> None:
        for x in self._release_device(self.locks.pop(key)):
            self.core.refile(x)

    def unlock_window(self, key: int, result: BaseEvictionResult) -> None:
        """SGLang's early SWA release (`dec_swa_lock_only`): the window lease goes; a drained node that is now an
        evictable device leaf loses its SWA at once (into `result`)."""
        for x in self._release_device(self.locks.pop(key)):
            if x.id in self._dev and self.core.is_evictable_device_leaf(x):
                self.drop_device(x, result, count=False)
            self.core.refile(x)

    def host_lock(self, node: Node, receipt: TreeReceipt, key: int) -> None:
        """A host lock's SWA lease over the window segment; a host value leaves the host list while pinned."""
        segment = self._segment(node)
        sets = tuple(self.handed.host_pin_set(x) for x in segment)
        for x, p in zip(segment, sets):
            if not p and x in self.host_lru:
                self.host_lru.remove(x)
        self.host_locks[key] = self.core.ledger.acquire(SWAHost, owner=receipt, pins=sets)
        receipt.set_lock_uuid(SWA, key if sum(x.end - x.start for x in segment) >= self.window else None,
                              lock_host=True)

    def _release_host(self, lease: Lease[SWAHost, Held]) -> None:
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

    def match_begin(self) -> None:
        self._run_any = self._run_dev = _NO_TOMBSTONE

    def usable(self, node: Node, hicache: bool) -> bool:
        """SGLang's SWA validator (either tier with HiCache): `window` tokens below the last tombstone."""
        nid = node.id
        if nid not in self._dev and (not hicache or nid not in self._host):
            self._run_any = 0
            return False
        self._run_any += node.end - node.start
        return self._run_any >= self.window

    def device_usable(self, node: Node) -> bool:
        """SGLang's SWA device validator: `window` tokens on device below the last device tombstone."""
        if node.id not in self._dev:
            self._run_dev = 0
            return False
        self._run_dev += node.end - node.start
        return self._run_dev >= self.window

    def _refresh(self, node: Node) -> None:
        """SGLang's window refresh: the path's last `window` + one page tokens with SWA on device go to the MRU
        end, `node` newest."""
        span = self.window + self.page_size
        seen: list[Node] = []
        covered = 0
        x: Optional[Node] = node
        while x is not None and x.parent is not None and covered < span:
            if x.id in self._dev:
                seen.append(x)
            covered += x.end - x.start
            x = x.parent
        lru = self.lru
        for y in reversed(seen):
            lru.move_to_mru(y)

    def match_end(self, best: Node) -> None:
        self._refresh(best)

    def finish_insert(self, target: Node) -> None:
        if target.parent is not None:
            self._refresh(target)

    def finalize_match(self, result: MatchResult, best: Node) -> MatchResult:
        """SGLang's SWA branching point and host hit (window values to load from host)."""
        boundary = result.device_prefix_len + result.host_hit_length
        aligned = (result.full_kv_hit_length // self.page_size) * self.page_size
        n_swa = host_hit = 0
        x: Optional[Node] = best
        while x is not None and x.parent is not None and n_swa < self.window:
            n = x.end - x.start
            if x.id in self._dev:
                n_swa += n
            elif x.id in self._host:
                host_hit += n
                n_swa += n
            else:
                break
            x = x.parent
        return result._replace(swa_host_hit_length=max(result.swa_host_hit_length, host_hit),
                               swa_branching_seqlen=aligned if aligned > boundary else None)

    def _clip(self, node: Node, start: int, end: int, window_start: int, actions: Actions) -> Optional[Node]:
        """SGLang's clip of an SWA tombstone span [start, end) to the request's live window; the node holding
        the live part (split off when the window starts inside), or None."""
        if node.id in self._dev:
            return None
        if window_start % self.page_size:
            raise NodeStateError("insert", node.id, f"SWA evicted seqlen {window_start} is not page-aligned")
        live = max(start, window_start)
        if live >= end:
            return None
        if live > start:
            self.core.split_node(node, live - start, actions)
        return node

    def insert_overlap(self, node: Node, pos: int, m: int, value: torch.Tensor, params: InsertParams,
                       result: InsertResult, actions: Actions) -> int:
        """SGLang's SWA recovery on an overlapped node whose SWA is a tombstone: the request's fresh KV rebuilds
        its window values; returns where the request's duplicate KV starts (relative to `pos`)."""
        if params.prev_prefix_len >= pos + m:
            return m
        live_node = self._clip(node, pos, pos + m, params.get_evicted_seqlen(SWA), actions)
        if live_node is None:
            return m
        live = live_node.start
        result.record_adopted_range(SWA, live, pos + m)
        incoming = value[live: pos + m]
        core = self.core
        old = core.full_device_tensor(live_node)
        if old is None:
            raise NodeStateError("insert", live_node.id, "an overlapped node without Full KV on device")
        if core.full_pinned(live_node):
            actions.append(RecoverSWAWithLockedFull(live_node.id, old, incoming))
        else:
            result.record_adopted_range(ComponentType.FULL, live, pos + m)
            fresh = incoming.clone()
            core.replace_full_device(live_node, fresh)
            actions.append(FreeDeviceKVFullOnly([old]))
            actions.append(SWARebuild(live_node.id, fresh))
        return live - pos

    def recover_after_unevict(self, node: Node, params: InsertParams, result: InsertResult,
                              actions: Actions) -> None:
        """SGLang's rebuild of a tombstoned SWA window after the insert restored the node's Full KV."""
        live_node = self._clip(node, node.start, node.end, params.get_evicted_seqlen(SWA), actions)
        if live_node is None:
            return
        tensor = self.core.full_device_tensor(live_node)
        assert tensor is not None, live_node.id
        actions.append(SWARebuild(live_node.id, tensor))
        result.record_adopted_range(SWA, live_node.start, live_node.end)

    def commit_insert(self, node: Node, is_new_leaf: bool, params: InsertParams, result: InsertResult,
                      actions: Actions) -> None:
        """A new leaf's window values are rebuilt from its Full KV (`SWARebuild`); a leaf longer than one
        window is first capped (split) at one page-aligned window, as SGLang's."""
        branching = params.swa_branching_seqlen
        if branching is not None and params.key is not None:
            result.swa_branch_inserted = len(params.key) >= branching
        if not is_new_leaf:
            return
        live_node = self._clip(node, node.start, node.end, params.get_evicted_seqlen(SWA), actions)
        if live_node is None:
            return
        core = self.core
        parent: Optional[Node] = None
        tail = -(-self.window // self.page_size) * self.page_size
        n = live_node.end - live_node.start
        if not self.device_pinned(live_node) and n > tail:
            parent = core.split_node(live_node, n - tail, actions)
        for x in (parent, live_node):
            if x is not None:
                tensor = core.full_device_tensor(x)
                assert tensor is not None, x.id
                actions.append(SWARebuild(x.id, tensor))
        result.record_adopted_range(SWA, live_node.start if parent is None else parent.start, live_node.end)

    def _unbacked_window(self, node: Node) -> list[Node]:
        """SGLang's unbacked SWA of a backup: window nodes with SWA on device only, deepest first (none without
        an SWA host pool)."""
        core = self.core
        if not core.has_swa_host_pool:
            return []
        out: list[Node] = []
        covered = 0
        x: Optional[Node] = node
        while x is not None and x.parent is not None and covered < self.window:
            if core.write_through_ack(x) is not None:
                break
            nid = x.id
            on_dev = nid in self._dev
            if not on_dev and nid not in self._host:
                break
            covered += x.end - x.start
            if on_dev and nid not in self._host:
                out.append(x)
            x = x.parent
        return out

    def needs_backup(self, node: Node) -> bool:
        return bool(self._unbacked_window(node))

    # ==== HiCache ====

    def backup_transfers(self, node: Node, missing_only: bool) -> Optional[list[PoolTransfer]]:
        """The window's device-only SWA values to copy to host, root first (one transfer naming the nodes)."""
        if missing_only and node.id in self._host and not self.needs_backup(node):
            return None
        nodes = self._unbacked_window(node)
        if not nodes:
            return None
        nodes.reverse()
        return [PoolTransfer(name=PoolName.SWA, device_indices=torch.cat([self._dev[x.id] for x in nodes]),
                             nodes_to_load=[x.id for x in nodes])]

    def commit_backup(self, node: Node, xfers: list[PoolTransfer]) -> None:
        """The host indices of a committed backup, sliced over the nodes its transfer names."""
        if not xfers or xfers[0].host_indices is None:
            return
        xfer = xfers[0]
        host = xfer.host_indices
        assert host is not None
        core = self.core
        targets: list[Node] = []
        for nid in xfer.nodes_to_load or [node.id]:
            x = core.live_node(nid)
            if x is None or x.id not in self._dev or x.id in self._host:
                raise NodeStateError("commit_backup", nid, "not a node with SWA on device only")
            targets.append(x)
        want = sum(x.end - x.start for x in targets)
        if host.numel() != want:
            raise NodeStateError("commit_backup", node.id, f"{host.numel()} SWA host indices for {want} values")
        off = 0
        for x in targets:
            n = x.end - x.start
            part = host[off: off + n].clone()
            self.store.set_host(x, host_array(part))
            self._host[x.id] = part
            off += n

    def load_back_transfers(self, anchor: Node, req: Optional[Req]) -> Optional[list[PoolTransfer]]:
        """The window's host-only SWA values back to device, root first."""
        nodes: list[Node] = []
        n_swa = 0
        x: Optional[Node] = anchor
        while x is not None and x.parent is not None and n_swa < self.window:
            nid = x.id
            if nid not in self._dev:
                if nid not in self._host:
                    raise NodeStateError("load-back", nid, "its SWA window value is on neither tier")
                nodes.append(x)
            n_swa += x.end - x.start
            x = x.parent
        if not nodes:
            return None
        nodes.reverse()
        return [PoolTransfer(name=PoolName.SWA, host_indices=torch.cat([self._host[y.id] for y in nodes]),
                             device_indices=None, nodes_to_load=[y.id for y in nodes])]

    def commit_load_back(self, anchor: Node, xfers: list[PoolTransfer], pin: LoadBackPin,
                         actions: Actions) -> None:
        """Publish the loaded SWA values; a lease of `pin` holds their host copies until the ack. SGLang's
        Full-to-SWA mapping of the loaded tokens is rebuilt by the cache (`RebuildFullToSWAMapping`)."""
        if not xfers:
            return
        xfer = xfers[0]
        dst = xfer.device_indices
        if dst is None:
            raise NodeStateError("commit_load_back", anchor.id, "the SWA transfer has no device indices")
        core = self.core
        nodes: list[Node] = []
        for nid in xfer.nodes_to_load or ():
            x = core.live_node(nid)
            if x is None or x.id in self._dev or x.id not in self._host:
                raise NodeStateError("commit_load_back", nid, "its SWA is not host-only")
            nodes.append(x)
        want = sum(x.end - x.start for x in nodes)
        if dst.numel() != want:
            raise NodeStateError("commit_load_back", anchor.id, f"{dst.numel()} SWA device indices for {want} values")
        self.load_backs[pin.seq] = core.ledger.acquire(
            SWAHost, owner=pin, pins=tuple(self.handed.host_pin_set(x) for x in nodes))
        full_chunks: list[torch.Tensor] = []
        swa_chunks: list[torch.Tensor] = []
        off = 0
        for x in nodes:
            n = x.end - x.start
            chunk = dst[off: off + n].clone()
            full = core.full_device_tensor(x)
            if full is None:
                raise NodeStateError("commit_load_back", x.id, "its Full KV is not on device")
            self.set_device(x, chunk)
            full_chunks.append(full)
            swa_chunks.append(chunk)
            off += n
        if full_chunks:
            actions.append(RebuildFullToSWAMapping(full_chunks, swa_chunks))

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
        """One step of SGLang's SWA walk into `result`: a Full leaf to evict, a tombstone, or a backup pause."""
        quota = self._quota
        if quota is None:
            raise NodeStateError("evict_device_next_node", self.core.root.id, "no SWA device eviction walk started")
        if self._paused is not None:
            raise NodeStateError("evict_device_next_node", self._paused,
                                 "finish the pending SWA state eviction before advancing")
        lru = self.lru
        pins = self.store.pin_sets
        cursor = self._cursor
        if cursor is not None and cursor not in lru:
            cursor = self._cursor = lru.next_unpinned(None, pins)
        if tracker.get(SWA, 0) >= quota or cursor is None:
            return
        x = cursor
        core = self.core
        self._cursor = lru.next_unpinned(x, pins)
        if core.is_evictable_device_leaf(x):
            result.node_id = x.id
            result.made_progress = True
            return
        if (core.enable_hicache and core.is_write_back and core.has_swa_host_pool and x.id not in self._host
                and not core.full_on_host(x) and core.full_on_device(x)):
            needed = sum(y.end - y.start for y in self._unbacked_window(x))
            if needed:
                self._paused = x.id
                result.swa_backup_node_id = x.id
                result.swa_backup_num_tokens = needed
                result.made_progress = True
                return
        self.drop_device(x, result)
        result.made_progress = True

    def finish_eviction(self, node_id: int) -> EvictDeviceNextNodeResult:
        """Resume the walk after the controller's backup attempt of the paused node (SGLang's checks)."""
        if self._quota is None:
            raise NodeStateError("finish_swa_state_eviction", node_id, "no SWA device eviction walk started")
        if self._paused != node_id:
            raise NodeStateError("finish_swa_state_eviction", node_id,
                                 f"the pending SWA state eviction is {self._paused}")
        self._paused = None
        result = EvictDeviceNextNodeResult(made_progress=True)
        core = self.core
        node = core.live_node(node_id)
        if node is None or node.id not in self._dev or self.device_pinned(node) or node not in self.lru:
            return result
        if core.is_evictable_device_leaf(node):
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
        """SGLang's SWA host walk: a host leaf goes whole, an internal node loses its host SWA."""
        lru = self.host_lru
        pins = self.handed.host_pin_sets
        core = self.core
        x = lru.next_unpinned(None, pins)
        while result.tracker.get(SWA, 0) < num and x is not None and x in lru:
            x_next = lru.next_unpinned(x, pins)
            if core.is_evictable_host_leaf(x):
                core.evict_host_leaf(x, result)
            else:
                self.drop_host(x, result)
            x = x_next

    # ==== sizes, reset, checks ====

    def release_all(self) -> None:
        for locks in (self.locks, self.host_locks, self.load_backs):
            while locks:
                _, lease = locks.popitem()
                lease.release()

    def held(self) -> int:
        return len(self.locks) + len(self.host_locks) + len(self.load_backs)

    def sanity(self, nodes: list[Node], problems: list[str]) -> None:
        """Values, lists, sizes and pins recomputed from the tree and the live leases."""
        store = self.store
        core = self.core
        total = protected = 0
        seen: set[int] = set()
        want_dev: dict[int, int] = {}
        for key, lease in self.locks.items():
            owner = lease.owner
            assert isinstance(owner, TreeReceipt)
            anchor = core.live_node(owner.node_id or -1)
            got = sorted(p.holder.id for p in lease.pin_sets() if isinstance(p.holder, Node))
            want = [] if anchor is None else sorted(x.id for x in self._segment_now(anchor, got))
            if got != want:
                problems.append(f"{owner} (key {key}): SWA lease pins {got}, its window segment is {want}")
            for nid in got:
                want_dev[nid] = want_dev.get(nid, 0) + 1
        for x in nodes:
            seen.add(x.id)
            d = self._dev.get(x.id)
            h = self._host.get(x.id)
            if store.dev[x.slot] != (None if d is None else d.tolist()):
                problems.append(f"node {x.id}: SWA device values differ from the tensor kept for them")
            hv = store.host_col[x.slot]
            if (None if hv is None else hv.tolist()) != (None if h is None else h.tolist()):
                problems.append(f"node {x.id}: SWA host values differ from the tensor kept for them")
            if x.parent is None:
                if d is not None or h is not None:
                    problems.append("the root holds SWA values")
                continue
            n = x.end - x.start
            if d is not None:
                total += n
                if d.numel() != n:
                    problems.append(f"node {x.id}: {d.numel()} SWA device values for {n} tokens")
                if not core.full_on_device(x):
                    problems.append(f"node {x.id}: SWA on device without Full KV on device")
                if self.device_pinned(x):
                    protected += n
                if x not in self.lru:
                    problems.append(f"node {x.id}: SWA on device, not in the SWA LRU list")
            elif x in self.lru:
                problems.append(f"node {x.id}: in the SWA LRU list without SWA on device")
            if x in self.host_lru and (h is None or d is not None or self.host_pinned(x)):
                problems.append(f"node {x.id}: in the SWA host list but not an unpinned host-only value")
            if self.device_lock_count(x) != want_dev.get(x.id, 0):
                problems.append(f"node {x.id}: {self.device_lock_count(x)} SWA device pins, "
                                f"{want_dev.get(x.id, 0)} SWA locks cover it")
        for lst, name in ((self.lru, "device"), (self.host_lru, "host")):
            stale = [nid for nid in lst.nodes if nid not in seen]
            if stale:
                problems.append(f"SWA {name} list holds removed nodes {stale}")
        if (total, protected) != (self.total, self.protected):
            problems.append(f"SWA sizes: total {self.total} protected {self.protected}, "
                            f"recomputed {total} {protected}")

    def _segment_now(self, anchor: Node, pinned: list[int]) -> list[Node]:
        """The nodes a lock acquired at `anchor` pins now: its segment then, each node split since on it too.

        A split after the lock pins both fragments (as SGLang copies the
        lock count), so the segment is walked from the anchor up while the
        pinned ids continue it.
        """
        ids = set(pinned)
        out: list[Node] = []
        x: Optional[Node] = anchor
        while x is not None and x.parent is not None and x.id in ids:
            out.append(x)
            x = x.parent
        return out


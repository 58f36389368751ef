"""`ComponentPart`: what the core asks of an auxiliary component (Mamba now) at each step, where SGLang's core
loops over its components.

Full is the core itself (`state.TreeState` and its parts); every other
configured component is one `ComponentPart` in `TreeState.aux`, in SGLang's
order, and the core calls each at the same points SGLang's Python core calls
its component drivers: lock and release, match validation and finalizing,
insert commit, the cascades of a Full eviction (demote, delete, host leaf,
tombstones), backup and load-back specs and commits, its own device and host
walks, sizes, reset and the sanity recomputation. A part keeps its values,
lists and leases to itself; the core reads them through these methods.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Optional, Protocol

import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, InsertResult, MatchResult
from sglang.srt.mem_cache.hicache_storage import PoolTransfer
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    BaseEvictionResult,
    EvictDeviceNextNodeResult,
)

from leases import LeaseLedger
from unicache.integrations.sglang.treecore.receipts import LoadBackPin, TreeReceipt
from unicache.integrations.sglang.treecore.walk import Actions
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req


class PartHost(Protocol):
    """What a part reads of the core it belongs to (`state.TreeState` is one): Full's view of a node, the
    clock, the ledger, and the whole-node moves only the core makes."""

    ledger: LeaseLedger
    enable_hicache: bool
    is_write_back: bool

    @property
    def root(self) -> Node: ...

    def tick(self) -> int: ...

    def live_node(self, node_id: int) -> Optional[Node]: ...

    def full_on_device(self, node: Node) -> bool: ...

    def full_on_host(self, node: Node) -> bool: ...

    def load_back_pending(self, node: Node) -> bool: ...

    def is_evictable_device_leaf(self, node: Node) -> bool: ...

    def is_evictable_host_leaf(self, node: Node) -> bool: ...

    def evict_host_leaf(self, node: Node, result: BaseEvictionResult) -> int: ...

    def refile(self, node: Node) -> None: ...

    @property
    def has_swa_host_pool(self) -> bool: ...

    def write_through_ack(self, node: Node) -> Optional[int]: ...

    def full_device_tensor(self, node: Node) -> Optional[torch.Tensor]:
        """The node's Full device indices as SGLang handed them in, or None."""

    def full_pinned(self, node: Node) -> bool:
        """Whether a live lease pins the node's Full device tier (SGLang's Full `lock_ref`)."""

    def replace_full_device(self, node: Node, tensor: torch.Tensor) -> None:
        """Give `node` (Full on device) the request's fresh Full indices `tensor` instead (the old ones are
        freed by the caller's action)."""

    def split_node(self, node: Node, k: int, actions: Actions) -> Node:
        """Split `node` after its first `k` tokens (any split action into `actions`); returns the upper part."""


class ComponentPart(abc.ABC):
    """An auxiliary component of tree core "unicache" (see the module docstring)."""

    component_type: ComponentType
    total: int
    """Device values held (in the allocator's units)."""
    protected: int
    """Device values a live lease pins."""

    @abc.abstractmethod
    def new_tree(self, tree: RadixTree) -> None:
        """Fresh values, lists and sizes for `tree` (construction and reset)."""

    # ---- residency and pins ----

    @abc.abstractmethod
    def device_state(self, node: Node) -> Optional[torch.Tensor]:
        """The node's device value, as SGLang handed it in, or None."""

    @abc.abstractmethod
    def on_device(self, node: Node) -> bool: ...

    @abc.abstractmethod
    def host_only(self, node: Node) -> bool: ...

    @abc.abstractmethod
    def device_pinned(self, node: Node) -> bool:
        """Whether a live lease pins the node's device tier of this component (SGLang's `lock_ref`)."""

    @abc.abstractmethod
    def host_pinned(self, node: Node) -> bool:
        """Whether a live lease pins the node's host tier of this component (SGLang's `host_lock_ref`)."""

    @abc.abstractmethod
    def set_device(self, node: Node, value: torch.Tensor) -> None:
        """SGLang's `set_component_device_value`."""

    @abc.abstractmethod
    def drop_device(self, node: Node, result: BaseEvictionResult, count: bool = True) -> None:
        """Hand the node's device value back into `result` (a cascade of a Full eviction)."""

    @abc.abstractmethod
    def drop_all(self, node: Node, result: BaseEvictionResult, count_host: bool) -> None:
        """Hand back both tiers of a node leaving the tree."""

    @abc.abstractmethod
    def drop_orphans(self, node: Node, result: BaseEvictionResult, host: bool) -> None:
        """SGLang's tombstone cleanup of a node without Full on device (`host`: on either tier)."""

    @abc.abstractmethod
    def forget(self, node: Node) -> None:
        """A node leaves the tree (it holds nothing of this component by then)."""

    def split(self, upper: Node, lower: Node) -> None:
        """The tree split `lower` into `upper` + `lower` (the store's columns with it); by default the
        component's data and pins stay with `lower`."""

    # ---- locks ----

    @abc.abstractmethod
    def lock(self, node: Node, receipt: TreeReceipt, key: int) -> None:
        """A device lock's lease of this component, filed under `key` (the receipt's `lease_id`)."""

    @abc.abstractmethod
    def holds_lock(self, key: int) -> bool: ...

    @abc.abstractmethod
    def unlock(self, key: int) -> None: ...

    @abc.abstractmethod
    def host_lock(self, node: Node, receipt: TreeReceipt, key: int) -> None: ...

    @abc.abstractmethod
    def holds_host_lock(self, key: int) -> bool: ...

    @abc.abstractmethod
    def host_unlock(self, key: int) -> None: ...

    # ---- match and insert ----

    def match_begin(self) -> None:
        """A match walk starts at the root (validators that read the path so far reset)."""

    @abc.abstractmethod
    def usable(self, node: Node, hicache: bool) -> bool:
        """SGLang's match validator of this component (device only unless `hicache`), called on every node
        of the walk in order."""

    def device_usable(self, node: Node) -> bool:
        """SGLang's device match validator of this component, called on every node of the walk in order."""
        return self.on_device(node)

    @abc.abstractmethod
    def match_end(self, best: Node) -> None:
        """Recency of a match ending at `best` (before the Full path is stamped)."""

    @abc.abstractmethod
    def finalize_match(self, result: MatchResult, best: Node) -> MatchResult: ...

    @abc.abstractmethod
    def commit_insert(self, node: Node, is_new_leaf: bool, params: InsertParams, result: InsertResult,
                      actions: Actions) -> None: ...

    def insert_overlap(self, node: Node, pos: int, m: int, value: torch.Tensor, params: InsertParams,
                       result: InsertResult, actions: Actions) -> int:
        """An insert walked over `node` (tokens [pos, pos + m), on device); returns where the request's
        duplicate KV starts relative to `pos` (all of it, `m`, by default)."""
        return m

    def recover_after_unevict(self, node: Node, params: InsertParams, result: InsertResult,
                              actions: Actions) -> None:
        """An insert restored `node`'s Full KV from the request's fresh KV."""

    def finish_insert(self, target: Node) -> None:
        """An insert ended at `target` (SGLang's insert-end recency refresh)."""

    @abc.abstractmethod
    def needs_backup(self, node: Node) -> bool:
        """Device data of this component missing on host (an incremental backup)."""

    # ---- HiCache ----

    @abc.abstractmethod
    def backup_transfers(self, node: Node, missing_only: bool) -> Optional[list[PoolTransfer]]: ...

    @abc.abstractmethod
    def commit_backup(self, node: Node, xfers: list[PoolTransfer]) -> None: ...

    @abc.abstractmethod
    def load_back_transfers(self, anchor: Node, req: Optional[Req]) -> Optional[list[PoolTransfer]]: ...

    @abc.abstractmethod
    def commit_load_back(self, anchor: Node, xfers: list[PoolTransfer], pin: LoadBackPin,
                         actions: Actions) -> None: ...

    @abc.abstractmethod
    def finish_load_back(self, pin: LoadBackPin) -> None: ...

    # ---- its own walks ----

    @abc.abstractmethod
    def evict_start(self, request_cnt: int) -> None: ...

    @abc.abstractmethod
    def evict_next(self, tracker: dict[ComponentType, int], result: EvictDeviceNextNodeResult) -> None: ...

    @abc.abstractmethod
    def evict_end(self) -> None: ...

    @abc.abstractmethod
    def drive_host_eviction(self, num: int, result: BaseEvictionResult) -> None: ...

    # ---- reset and checks ----

    @abc.abstractmethod
    def release_all(self) -> None:
        """Release every lease of this component (a reset: the ledger's epoch has advanced)."""

    @abc.abstractmethod
    def held(self) -> int:
        """Live leases this component holds."""

    @abc.abstractmethod
    def sanity(self, nodes: list[Node], problems: list[str]) -> None:
        """Recompute this component's values, lists, sizes and pins; append every difference."""

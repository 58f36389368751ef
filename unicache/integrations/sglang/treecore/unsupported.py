"""The interface methods of features this core refuses (storage, buffer mode, external linker)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertResult
from sglang.srt.mem_cache.hicache_storage import PoolTransfer
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core import StorageBackupSpec
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    BufferBackupSnapshot,
    BufferBackupState,
    NodeId,
)
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import RefusedFeatureError
from unicache.integrations.sglang.treecore.state import FULL, TreeState


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class UnsupportedFeatures(TreeState):
    """The unsupported part of `UnicacheTreeCore` (see the module docstring)."""

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

    def set_component_device_value(self, node_id: NodeId, component_type: ComponentType,
                                   value: torch.Tensor) -> None:
        if component_type == FULL:
            raise ValueError("FULL values are set by insert and load-back")
        self._part(component_type).set_device(self.node(node_id), value)

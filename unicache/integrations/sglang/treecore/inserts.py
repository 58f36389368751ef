"""Inserts in SGLang's steps: the walk suspends after each write-through backup action."""

from __future__ import annotations

import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, InsertResult
from sglang.srt.mem_cache.unified_cache.cache_action import (
    FreeDeviceKV,
    FreeDeviceKVFullOnly,
    UpdatePendingBackupOnNodeSplit,
)
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import InsertStepResult
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import RefusedFeatureError
from unicache.integrations.sglang.treecore.state import FULL, TOKEN_BYTES, TreeState
from unicache.integrations.sglang.treecore.values import id_list
from unicache.integrations.sglang.treecore.walk import Actions, InsertWalk
from unicache.tree.node import Node


_DEFERRABLE = (FreeDeviceKV, FreeDeviceKVFullOnly, UpdatePendingBackupOnNodeSplit)
"""Actions SGLang batches to the next barrier; any other (a backup, an SWA rebuild) suspends the insert."""


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class Inserts(TreeState):
    """The inserts part of `UnicacheTreeCore` (see the module docstring)."""

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
            value = torch.frombuffer(bytearray(tb[: n * TOKEN_BYTES]), dtype=torch.int64).clone()
        value = value[:n]
        self.root.last_access = self._tick()
        if n == 0:
            return InsertStepResult(actions=[], result=InsertResult(
                prefix_len=0, mamba_exist=True, last_device_node=self.root.id))
        self._insert = InsertWalk(params, tb, n, value, self.root)
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

    def _free_duplicate(self, walk: InsertWalk, start: int, end: int) -> None:
        """The request's KV [start, end) duplicates the tree's: freed (below its SWA eviction floor, Full only)."""
        floor = walk.params.get_evicted_seqlen(ComponentType.SWA)
        full_only = min(max(floor - start, 0), end - start)
        if full_only > 0:
            walk.pending.append(FreeDeviceKVFullOnly([walk.value[start: start + full_only]]))
        if start + full_only < end:
            walk.pending.append(FreeDeviceKV([walk.value[start + full_only: end]]))

    def _advance_insert(self) -> InsertStepResult:
        walk = self._insert
        assert walk is not None
        if walk.target is not None:
            return self._finish_insert(walk, walk.target)
        store = self.store
        tb, n, params = walk.tb, walk.n, walk.params
        while True:
            node, pos = walk.node, walk.pos
            if pos >= n or tb[pos * TOKEN_BYTES: (pos + self.page_size) * TOKEN_BYTES] not in node.children:
                return self._commit_insert(walk)
            barrier = False
            child, m, partial = self._follow(node, tb, pos, n)
            child.last_access = self._tick()
            if partial:
                child = self.tree.split(child, m)
                self._take_split_action(walk.pending)
            emitted = len(walk.pending)
            if store.dev[child.slot] is None:
                part = walk.value[pos: pos + m].clone()
                self._publish_device(child, id_list(part), part)
                self._track_dup(child)
                self._maybe_file(child)
                if walk.result.adopted_ranges is not None:
                    walk.result.record_adopted_range(FULL, pos, pos + m)
                for comp in self.aux:
                    comp.recover_after_unevict(child, params, walk.result, walk.pending)
            else:
                consumed = m
                for comp in self.aux:
                    consumed = min(consumed, comp.insert_overlap(child, pos, m, walk.value, params, walk.result,
                                                                 walk.pending))
                dup_start = max(0, params.prev_prefix_len - pos)
                if dup_start < consumed:
                    self._free_duplicate(walk, pos + dup_start, pos + consumed)
            if any(not isinstance(a, _DEFERRABLE) for a in walk.pending[emitted:]):
                barrier = True
            if pos + m > params.inserted_len and self._hit(child):
                walk.pending.append(self._backup_action(child, write_back=False))
                barrier = True
            walk.node = child
            walk.pos = pos + m
            if barrier:
                out = walk.pending
                walk.pending = []
                return InsertStepResult(actions=out)

    def _commit_insert(self, walk: InsertWalk) -> InsertStepResult:
        node, pos, n = walk.node, walk.pos, walk.n
        result = walk.result
        result.prefix_len = pos
        target = node
        emitted = len(walk.pending)
        if pos < n:
            leaf = self.tree.add_leaf(node, walk.tb[pos * TOKEN_BYTES: n * TOKEN_BYTES])
            self._nodes[leaf.id] = leaf
            leaf.last_access = self._tick()
            part = walk.value[pos:n].clone()
            self._publish_device(leaf, id_list(part), part)
            if result.adopted_ranges is not None:
                result.record_adopted_range(FULL, pos, n)
            target = leaf
            walk.new_leaf = True
            for comp in self.aux:
                comp.commit_insert(leaf, True, walk.params, result, walk.pending)
        else:
            for comp in self.aux:
                comp.commit_insert(target, False, walk.params, result, walk.pending)
        result.last_device_node = target.id
        if any(not isinstance(a, _DEFERRABLE) for a in walk.pending[emitted:]):
            walk.target = target
            out = walk.pending
            walk.pending = []
            return InsertStepResult(actions=out)
        return self._finish_insert(walk, target)

    def _finish_insert(self, walk: InsertWalk, target: Node) -> InsertStepResult:
        """SGLang's insert tail: the components' recency refresh, then a new leaf's write-through (its end past
        what this request inserted before) or an existing backed-up node's incremental backup."""
        for comp in self.aux:
            comp.finish_insert(target)
        if walk.new_leaf:
            if (not self.is_write_back and walk.pos + (target.end - target.start) > walk.params.inserted_len
                    and self._hit(target)):
                walk.pending.append(self._backup_action(target, write_back=False))
        elif (self.aux and self.enable_hicache and not self.is_write_back
              and self.store.host_col[target.slot] is not None and self.write_through_ack(target) is None
              and any(comp.needs_backup(target) for comp in self.aux)):
            walk.pending.append(self._backup_action(target, write_back=False))
        self._insert = None
        return InsertStepResult(actions=walk.pending, result=walk.result)

"""Prefix matching: the device and host hit of a key, splitting at a partial match."""

from __future__ import annotations

from typing import Optional

import torch
from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams, MatchResult
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import NodeId
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import NodeStateError
from unicache.integrations.sglang.treecore.state import TOKEN_BYTES, TreeState
from unicache.integrations.sglang.treecore.walk import Actions
from unicache.tree.node import Node


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class Matching(TreeState):
    """The match part of `UnicacheTreeCore` (see the module docstring)."""

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
        aux = self.aux
        root = node = best = best_dev = self.root
        pos = 0
        full_hit = 0
        actions: Actions = []
        children = node.children
        for part in aux:
            part.match_begin()
        while pos < n and children:
            if tb[pos * TOKEN_BYTES: (pos + self.page_size) * TOKEN_BYTES] not in children:
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
            if aux:
                ok = True
                ok_dev = on_dev
                for part in aux:
                    if not part.usable(child, hicache):
                        ok = False
                    if not part.device_usable(child):
                        ok_dev = False
                if ok:
                    best = child
                if ok_dev:
                    best_dev = child
            elif on_dev:
                best = best_dev = child
            elif hicache:
                best = child
            if partial:
                break
            pos += m
            children = child.children
        for part in aux:
            part.match_end(best)
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
        result = MatchResult(
            device_prefix_len=best_dev.end,
            last_device_node=best_dev.id,
            last_host_node=(best if hicache else best_dev).id,
            best_match_node=best.id,
            host_hit_length=host_hit,
            full_kv_hit_length=full_hit,
            last_visited_node_id=node.id if node is not root else None,
            cache_actions=actions,
        )
        for part in aux:
            result = part.finalize_match(result, best)
        return result

    def match_full_device_prefix(self, key: RadixKey) -> tuple[int, NodeId, int]:
        tb, n = self._key_bytes(key)
        dev = self.store.dev
        node = self.root
        pos = matched = pinned = 0
        while pos < n:
            if tb[pos * TOKEN_BYTES: (pos + self.page_size) * TOKEN_BYTES] not in node.children:
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

"""SWA windows on a key's path: its tombstoned ranges, and attaching loaded SWA values to them (SGLang's
`swa_tombstone_ranges`, `attach_swa_window`)."""

from __future__ import annotations

import torch
from mypy_extensions import mypyc_attr, trait
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

from unicache.integrations.sglang.treecore.errors import NodeStateError
from unicache.integrations.sglang.treecore.state import TOKEN_BYTES, TreeState
from unicache.integrations.sglang.treecore.swa import SWAPart
from unicache.integrations.sglang.treecore.walk import Actions
from unicache.tree.node import Node


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class SWAWindows(TreeState):
    """The SWA-window part of `UnicacheTreeCore` (see the module docstring)."""

    def _swa_part(self, component_type: ComponentType) -> SWAPart:
        if component_type != ComponentType.SWA or self.swa is None:
            raise ValueError(f"component is not enabled: {component_type}")
        return self.swa

    def _span(self, key: RadixKey, end: int) -> list[tuple[Node, int, int]]:
        """SGLang's walk of `key` through token `end`: (node, its start on the path, tokens matched), stopping
        at a node on neither tier or a partial match (included)."""
        tb, n = self._key_bytes(key)
        out: list[tuple[Node, int, int]] = []
        node = self.root
        pos = 0
        ps = self.page_size
        while pos < end and pos < n:
            if tb[pos * TOKEN_BYTES: (pos + ps) * TOKEN_BYTES] not in node.children:
                break
            child, m, partial = self._follow(node, tb, pos, n)
            if self.store.dev[child.slot] is None and self.store.host_col[child.slot] is None:
                break
            out.append((child, pos, m))
            if partial:
                break
            node = child
            pos += m
        return out

    def swa_tombstone_ranges(self, key: RadixKey, start: int, end: int,
                             component_type: ComponentType = ComponentType.SWA) -> list[tuple[int, int]]:
        """The maximal ranges of [start, end) on `key`'s path whose nodes hold no SWA on device."""
        swa = self._swa_part(component_type)
        ranges: list[tuple[int, int]] = []
        for node, pos, m in self._span(key, end):
            seg_end = pos + m
            if seg_end <= start or swa.on_device(node):
                continue
            lo, hi = max(start, pos), min(end, seg_end)
            if ranges and ranges[-1][1] == lo:
                ranges[-1] = (ranges[-1][0], hi)
            else:
                ranges.append((lo, hi))
            if hi >= end:
                break
        return ranges

    def attach_swa_window(self, key: RadixKey, window_start: int, window_end: int, swa_values: torch.Tensor,
                          component_type: ComponentType = ComponentType.SWA) -> Actions:
        """Give the tombstoned span [window_start, window_end) of `key`'s path the loaded SWA `swa_values`,
        splitting the nodes it starts or ends inside; live SWA in the span, or a span the path does not
        cover, raises before anything changes."""
        swa = self._swa_part(component_type)
        if swa_values.numel() != window_end - window_start:
            raise ValueError(f"attach_swa_window: {swa_values.numel()} values for [{window_start}, {window_end})")
        segments: list[tuple[Node, int, int, int]] = []
        covered = window_start
        for node, pos, m in self._span(key, window_end):
            seg_end = pos + m
            if seg_end <= window_start:
                continue
            seg_start, assign_end = max(pos, window_start), min(seg_end, window_end)
            if swa.on_device(node):
                raise NodeStateError("attach_swa_window", node.id,
                                     f"live SWA at [{seg_start}, {assign_end}) of [{window_start}, {window_end})")
            segments.append((node, pos, seg_start, assign_end))
            covered = assign_end
            if covered >= window_end:
                break
        if covered != window_end:
            raise NodeStateError("attach_swa_window", self.root.id,
                                 f"the path covers {covered} of [{window_start}, {window_end})")
        actions: Actions = []
        for node, pos, seg_start, seg_end in segments:
            if seg_start > pos:
                self.split_node(node, seg_start - pos, actions)
            target = node
            if target.end - target.start > seg_end - seg_start:
                target = self.split_node(node, seg_end - seg_start, actions)
            swa.set_device(target, swa_values[seg_start - window_start: seg_end - window_start].clone())
        return actions

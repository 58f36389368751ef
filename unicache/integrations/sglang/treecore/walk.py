"""`InsertWalk`: the state of the one suspended insert walk."""

from __future__ import annotations

from typing import Optional

import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, InsertResult
from sglang.srt.mem_cache.unified_cache.cache_action import CacheAction, ComponentAction

from unicache.tree.node import Node

Actions = list[CacheAction | ComponentAction]


class InsertWalk:
    """The state of the one suspended insert: where the walk stands and what it still has to emit."""

    __slots__ = ("params", "tb", "n", "value", "node", "pos", "result", "pending", "target", "new_leaf")

    def __init__(self, params: InsertParams, tb: bytes, n: int, value: torch.Tensor, node: Node) -> None:
        self.params = params
        self.tb = tb
        self.n = n
        self.value = value
        self.node = node
        self.pos = 0
        self.result = InsertResult(prefix_len=0, adopted_ranges={} if params.track_adopted_ranges else None)
        self.pending: Actions = []
        self.target: Optional[Node] = None
        """The insert's target once committed, while the walk waits for the cache to apply the commit's actions
        (SGLang's barrier before its insert tail)."""
        self.new_leaf = False

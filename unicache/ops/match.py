"""`Matcher`: the longest cached prefix of a request, on device and after a load-back."""

from __future__ import annotations

from collections.abc import Sequence

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.results import MatchResult, match_result
from unicache.tree.keys import encode_tokens
from unicache.tree.radix import RadixTree


class Matcher:
    """Walks the tree for a request's tokens and says what is on device and what a load-back adds."""

    __slots__ = ("_tree", "_components", "_counters", "_ps", "_tw", "_lb_threshold")

    def __init__(
        self,
        tree: RadixTree,
        components: ComponentSet,
        counters: CacheCounters,
        page_size: int,
        load_back_threshold: int,
    ) -> None:
        self._tree = tree
        self._components = components
        self._counters = counters
        self._ps = page_size
        self._tw = tree.token_bytes
        self._lb_threshold = load_back_threshold

    def match_prefix(self, tokens: Sequence[int]) -> MatchResult:
        """Longest cached prefix of `tokens` (whole pages), on device and after a load-back.

        The base decides how far the path is on device; every other store
        marks the path nodes that cannot end a match for it (`match_marks`)
        and says what a load-back would move of it (`host_need`).
        """
        tw = self._tw
        key = encode_tokens(tokens, tw)
        n = len(key) // tw
        n -= n % self._ps
        _, matched, path = self._tree.walk(key, n)
        clk = self._tree.tick()
        root = self._tree.root
        dev_node = anchor = root
        frontier = 0
        comps = self._components
        others = comps.aux
        base_dev = comps.base.dev
        if not others:
            for node in path:
                node.last_access = clk
                node.hits += 1
                if base_dev[node.slot] is not None:
                    dev_node = node
            if path:
                anchor = path[-1]
            frontier = dev_node.end
        else:
            usable = bytearray(b"\x01") * len(path)
            on_device = bytearray(usable)
            for store in others:
                store.match_marks(path, usable, on_device)
            base_on_device = True
            for k, node in enumerate(path):
                node.last_access = clk
                node.hits += 1
                if base_dev[node.slot] is None:
                    base_on_device = False
                else:
                    frontier = node.end
                if usable[k]:
                    anchor = node
                    if on_device[k] and base_on_device:
                        dev_node = node
        a_end = anchor.end
        need = [0] * len(comps.by_index)
        base_host = need[comps.base.component_index] = a_end - frontier if a_end > frontier else 0
        worth = False
        if anchor is not dev_node:
            worth = base_host >= self._lb_threshold
            for store in others:
                k = need[store.component_index] = store.host_need(anchor)
                if k:
                    worth = True
        c = self._counters
        c.matches += 1
        c.match_tokens += n
        c.device_hit_tokens += dev_node.end
        c.host_hit_tokens += a_end - dev_node.end
        return match_result(matched, dev_node, anchor, need, worth)

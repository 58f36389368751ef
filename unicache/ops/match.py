"""`Matcher`: the longest cached prefix of a request, on device and after a load-back."""

from __future__ import annotations

from collections.abc import Sequence

from unicache.components.catalog import ComponentSet
from unicache.components.swa import window_nodes
from unicache.counters import CacheCounters
from unicache.results import MatchResult
from unicache.tree.keys import encode_tokens
from unicache.tree.radix import RadixTree


class Matcher:
    """Walks the tree for a request's tokens and says what is on device and what a load-back adds."""

    __slots__ = ("_tree", "_components", "_counters", "_ps", "_tw", "_swa", "_window", "_mamba", "_lb_threshold")

    def __init__(
        self,
        tree: RadixTree,
        components: ComponentSet,
        counters: CacheCounters,
        page_size: int,
        window: int,
        load_back_threshold: int,
    ) -> None:
        self._tree = tree
        self._components = components
        self._counters = counters
        self._ps = page_size
        self._tw = tree.token_bytes
        self._swa = components.has_swa
        self._window = window
        self._mamba = components.has_mamba
        self._lb_threshold = load_back_threshold

    def match_prefix(self, tokens: Sequence[int]) -> MatchResult:
        """Longest cached prefix of `tokens` (whole pages), on device and after a load-back."""
        tw = self._tw
        tb = encode_tokens(tokens, tw)
        n = len(tb) // tw
        n -= n % self._ps
        _, matched, path = self._tree.walk(tb, n)
        clk = self._tree.tick()
        root = self._tree.root
        dev_node = anchor = root
        frontier = 0
        swa = self._swa
        mamba = self._mamba
        comps = self._components
        fdev = comps.full.dev
        if not swa and not mamba:
            for node in path:
                node.last_access = clk
                node.hits += 1
                if fdev[node.slot] is not None:
                    dev_node = node
            if path:
                anchor = path[-1]
            frontier = dev_node.end
        else:
            w = self._window
            run_any = run_dev = 0
            full_dev = True
            sdev = comps.swa.dev
            shost = comps.swa.host_col
            mdev = comps.mamba.dev
            mhost = comps.mamba.host_col
            for node in path:
                node.last_access = clk
                node.hits += 1
                slot = node.slot
                if fdev[slot] is None:
                    full_dev = False
                else:
                    frontier = node.end
                lower = node.end - w
                if swa:
                    if sdev[slot] is None:
                        run_dev = node.end
                        if shost[slot] is None:
                            run_any = node.end
                    ok_any = run_any <= lower or run_any == 0
                    ok_dev = run_dev <= lower or run_dev == 0
                else:
                    ok_any = ok_dev = True
                if mamba:
                    if mdev[slot] < 0:
                        ok_dev = False
                        if mhost[slot] < 0:
                            ok_any = False
                if ok_any:
                    anchor = node
                    if ok_dev and full_dev:
                        dev_node = node
        a_end = anchor.end
        full_host = a_end - frontier if a_end > frontier else 0
        swa_host = 0
        if swa and anchor is not dev_node:
            sdev = comps.swa.dev
            for node in window_nodes(anchor, self._window):
                if sdev[node.slot] is None:
                    swa_host += node.end - node.start
        mamba_host = mamba and anchor.parent is not None and comps.mamba.device_state(anchor) is None
        worth = anchor is not dev_node and (
            full_host >= self._lb_threshold or swa_host > 0 or mamba_host
        )
        c = self._counters
        c.matches += 1
        c.match_tokens += n
        c.device_hit_tokens += dev_node.end
        c.host_hit_tokens += a_end - dev_node.end
        return MatchResult(
            matched, dev_node, dev_node.end, anchor, a_end, full_host, swa_host, mamba_host, worth
        )

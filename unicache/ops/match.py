"""Match: the longest cached prefix of a request, on device and after a load-back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from unicache.components.swa import window_nodes
from unicache import guards
from unicache.results import MatchResult
from unicache.tree.node import TOKEN_BYTES, encode_tokens

if TYPE_CHECKING:
    from unicache.cache import UniCache


def match_prefix(cache: UniCache, tokens: Sequence[int]) -> MatchResult:
    """Longest cached prefix of `tokens` (whole pages), on device and after a load-back."""
    guards.owner_thread(cache, "match_prefix")
    tb = encode_tokens(tokens)
    n = len(tb) // TOKEN_BYTES
    n -= n % cache._ps
    _, matched, path = cache._tree.walk(tb, n)
    clk = cache._tick()
    root = cache.root
    dev_node = anchor = root
    frontier = 0
    swa = cache._swa
    mamba = cache._mamba
    if not swa and not mamba:
        for node in path:
            node.last_access = clk
            node.hits += 1
            if node.dev_full is not None:
                dev_node = node
        if path:
            anchor = path[-1]
        frontier = dev_node.end
    else:
        w = cache._window
        run_any = run_dev = 0
        full_dev = True
        for node in path:
            node.last_access = clk
            node.hits += 1
            if node.dev_full is None:
                full_dev = False
            else:
                frontier = node.end
            lower = node.end - w
            if swa:
                if node.dev_swa is None:
                    run_dev = node.end
                    if node.host_swa_pages is None:
                        run_any = node.end
                ok_any = run_any <= lower or run_any == 0
                ok_dev = run_dev <= lower or run_dev == 0
            else:
                ok_any = ok_dev = True
            if mamba:
                if node.dev_mamba is None:
                    ok_dev = False
                    if node.host_mamba is None:
                        ok_any = False
            if ok_any:
                anchor = node
                if ok_dev and full_dev:
                    dev_node = node
    a_end = anchor.end
    full_host = a_end - frontier if a_end > frontier else 0
    swa_host = 0
    if swa and anchor is not dev_node:
        for node in window_nodes(anchor, cache._window):
            if node.dev_swa is None:
                swa_host += node.end - node.start
    mamba_host = mamba and anchor.parent is not None and anchor.dev_mamba is None
    worth = anchor is not dev_node and (
        full_host >= cache._lb_threshold or swa_host > 0 or mamba_host
    )
    c = cache.counters
    c.matches += 1
    c.match_tokens += n
    c.device_hit_tokens += dev_node.end
    c.host_hit_tokens += a_end - dev_node.end
    return MatchResult(
        matched, dev_node, dev_node.end, anchor, a_end, full_host, swa_host, mamba_host, worth
    )

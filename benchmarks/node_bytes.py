"""Where a cached node's bytes go on the peer workload, at each key width, and what page arrays would save.

Run: `.venv/bin/python benchmarks/node_bytes.py [--harness PATH] [--configs full/1,full/16,full+mamba/1]
[--token-bytes 8,4]`.

For each configuration and key width (`CacheConfig.token_bytes`; both by
default, 8 first as the baseline) it replays `make peer`'s workload
(benchmarks/peer_sglang.py's `run_ours`, write_back) with tracemalloc started
once the cache is built, then prints the traced bytes per node at the end of
the run grouped by the source line that allocated them (the largest first),
and a census of the live tree: key bytes, device and host page lists, node
objects and child dicts. The census prices two representations on that same
tree, each measured with `sys.getsizeof` of the alternative object built from
the live one:

- keys at the other width (4 bytes a token holds ids below 2**31; 8 below 2**63);
- page lists as `array("i")` (4 bytes a slot) instead of `list[int]` (an 8-byte
  pointer a slot; the int objects are the allocator's, shared).

The last table puts the widths side by side: traced and key bytes per node,
and each width's traced bytes over the first width's.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from array import array
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks import peer_sglang as peer
from unicache import UniCache


def measure(harness: Path, spec: str, token_bytes: int, console: Console, top: int) -> tuple[float, float]:
    """Print the tables of one configuration at one key width; returns (traced, key) bytes per node."""
    comp, ps = spec.split("/")
    cfg = peer.PeerConfig(comp, int(ps), "write_back", token_bytes)
    tokens, _, device = peer.workload(peer.load_harness(harness), 0, cfg.page_size)
    held: dict[str, object] = {}
    build = peer.build_ours

    def traced_build(cfg: peer.PeerConfig, device_tokens: int) -> UniCache:
        cache = build(cfg, device_tokens)
        held["cache"] = cache
        gc.collect()
        tracemalloc.start()
        held["start"] = tracemalloc.take_snapshot()
        return cache

    peer.build_ours = traced_build
    try:
        peer.run_ours(cfg, tokens, device)
    finally:
        peer.build_ours = build
    end = tracemalloc.take_snapshot()
    tracemalloc.stop()
    cache = held["cache"]
    start = held["start"]
    assert isinstance(cache, UniCache) and isinstance(start, tracemalloc.Snapshot)
    nodes = list(cache.nodes())
    n = len(nodes)
    stats = end.compare_to(start, "lineno")
    total = sum(s.size_diff for s in stats)
    lines = Table(title=f"{cfg.label}: traced bytes per node by allocating line ({n:,} nodes, {total / n:,.0f} B/node)")
    for col in ("B/node", "share", "blocks", "line"):
        lines.add_column(col, justify="right" if col != "line" else "left")
    for s in stats[:top]:
        frame = s.traceback[0]
        name = frame.filename.split("/unicache/")[-1] if "/unicache/" in frame.filename else frame.filename
        lines.add_row(f"{s.size_diff / n:,.0f}", f"{s.size_diff / total:.0%}", f"{s.count_diff:,}", f"{name}:{frame.lineno}")
    console.print(lines)
    keys = sum(sys.getsizeof(x.kb) for x in nodes)
    other = 12 - token_bytes
    keys_alt = sum(sys.getsizeof(bytes(len(x.kb) // token_bytes * other)) for x in nodes)
    full = cache.components.full
    page_lists = [p for x in nodes for p in (full.device_slots(x), full.host_slots(x)) if p is not None]
    lists = sum(sys.getsizeof(p) for p in page_lists)
    arrays = sum(sys.getsizeof(array("i", p)) for p in page_lists)
    objs = sum(sys.getsizeof(x) for x in nodes)
    dicts = sum(sys.getsizeof(x.children) for x in nodes)
    census = Table(title=f"{cfg.label}: the live tree, B/node (now -> alternative)")
    for col in ("part", "now", "alternative", "saves", "share of traced"):
        census.add_column(col, justify="right")
    census.add_row(f"keys ({token_bytes} -> {other} B a token)", f"{keys / n:,.0f}", f"{keys_alt / n:,.0f}",
                   f"{(keys - keys_alt) / n:,.0f}", f"{(keys - keys_alt) / total:.0%}")
    census.add_row("page lists (list -> array('i'))", f"{lists / n:,.0f}", f"{arrays / n:,.0f}",
                   f"{(lists - arrays) / n:,.0f}", f"{(lists - arrays) / total:.0%}")
    census.add_row("node objects", f"{objs / n:,.0f}", "", "", "")
    census.add_row("children dicts", f"{dicts / n:,.0f}", "", "", "")
    console.print(census)
    return total / n, keys / n


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--harness", type=Path, default=peer.DEFAULT_HARNESS)
    ap.add_argument("--configs", default="full/1,full/16,full+mamba/1")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--token-bytes", default="8,4", help="key widths to measure, the first one the baseline")
    args = ap.parse_args()
    if not args.harness.exists():
        raise SystemExit(f"no harness at {args.harness}; pass --harness PATH")
    widths = [int(w) for w in args.token_bytes.split(",")]
    if any(w not in (4, 8) for w in widths):
        raise SystemExit(f"--token-bytes: widths are 4 or 8, got {args.token_bytes}")
    console = Console(width=160)
    summary = Table(title=f"bytes per node by key width (ratio: over {widths[0]}-byte keys)")
    for col in ("config", "token_bytes", "traced B/node", "key B/node", "traced ratio"):
        summary.add_column(col, justify="right")
    for spec in args.configs.split(","):
        base = 0.0
        for tw in widths:
            traced, keys = measure(args.harness.resolve(), spec, tw, console, args.top)
            base = base or traced
            summary.add_row(spec, str(tw), f"{traced:,.0f}", f"{keys:,.0f}", f"{traced / base:.2f}x")
    console.print(summary)


if __name__ == "__main__":
    main()

"""Where a cached node's bytes go on the peer workload, and what two representation changes would save.

Run: `.venv/bin/python benchmarks/node_bytes.py [--harness PATH] [--configs full/1,full/16,full+mamba/1]`.

For each configuration it replays `make peer`'s workload (benchmarks/peer_sglang.py's
`run_ours`, write_back) with tracemalloc started once the cache is built, then
prints the traced bytes per node at the end of the run grouped by the source
line that allocated them (the largest first), and a census of the live tree:
key bytes, device and host page lists, node objects and child dicts. The last
table prices two representation changes on that same tree, each measured with
`sys.getsizeof` of the alternative object built from the live one:

- keys at 4 bytes a token (`array("i")`-width; token ids below 2**31) instead of 8;
- page lists as `array("i")` (4 bytes a slot) instead of `list[int]` (an 8-byte
  pointer a slot; the int objects are the allocator's, shared).
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


def measure(harness: Path, spec: str, console: Console, top: int) -> None:
    comp, ps = spec.split("/")
    cfg = peer.PeerConfig(comp, int(ps), "write_back")
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
    keys4 = sum(sys.getsizeof(x.kb[: len(x.kb) // 2]) for x in nodes)
    full = cache.components.full
    page_lists = [p for x in nodes for p in (full.device_slots(x), full.host_slots(x)) if p is not None]
    lists = sum(sys.getsizeof(p) for p in page_lists)
    arrays = sum(sys.getsizeof(array("i", p)) for p in page_lists)
    objs = sum(sys.getsizeof(x) for x in nodes)
    dicts = sum(sys.getsizeof(x.children) for x in nodes)
    census = Table(title=f"{cfg.label}: the live tree, B/node (now -> alternative)")
    for col in ("part", "now", "alternative", "saves", "share of traced"):
        census.add_column(col, justify="right")
    census.add_row("keys (8 -> 4 B a token)", f"{keys / n:,.0f}", f"{keys4 / n:,.0f}", f"{(keys - keys4) / n:,.0f}",
                   f"{(keys - keys4) / total:.0%}")
    census.add_row("page lists (list -> array('i'))", f"{lists / n:,.0f}", f"{arrays / n:,.0f}",
                   f"{(lists - arrays) / n:,.0f}", f"{(lists - arrays) / total:.0%}")
    census.add_row("node objects", f"{objs / n:,.0f}", "", "", "")
    census.add_row("children dicts", f"{dicts / n:,.0f}", "", "", "")
    console.print(census)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--harness", type=Path, default=peer.DEFAULT_HARNESS)
    ap.add_argument("--configs", default="full/1,full/16,full+mamba/1")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    if not args.harness.exists():
        raise SystemExit(f"no harness at {args.harness}; pass --harness PATH")
    console = Console(width=160)
    for spec in args.configs.split(","):
        measure(args.harness.resolve(), spec, console, args.top)


if __name__ == "__main__":
    main()

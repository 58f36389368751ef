"""Bytes per node of the candidate per-component node layouts (issue 10, "one typed place per node").

Run: `.venv/bin/python benchmarks/bench_node_layout.py [--nodes N]`.

Compares, with tracemalloc over N objects (list slot included), today's flat
layout (`Node`'s 21 slots: six of them SWA/Mamba residency and pin sets)
against lazily created slotted per-component records (17 slots on the node,
one 3-slot record per optional component a node holds data of). Dense
per-store arrays indexed by a node index are estimated from slot sizes
(8 bytes a reference), printed as ratios against the flat layout.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
from collections.abc import Callable

from unicache.tree.node import Node

AUX_SLOTS = 6
"""dev_swa, host_swa_pages, pins_swa, dev_mamba, host_mamba, pins_mamba."""


class _Record:
    """A lazily created per-component record: device slots, host slots, pin set."""

    __slots__ = ("dev", "host", "pins")

    def __init__(self) -> None:
        self.dev: object = None
        self.host: object = None
        self.pins: object = None


class _Lean:
    """A node without the six SWA/Mamba slots, holding two optional records instead (and, like
    `Node`, an empty children dict)."""

    __slots__ = tuple(f"s{i}" for i in range(len(Node.__slots__) - AUX_SLOTS + 2))

    def __init__(self, records: int) -> None:
        for i, name in enumerate(self.__slots__):
            setattr(self, name, _Record() if i < records else None)
        setattr(self, self.__slots__[-1], {})


def _bytes_per(make: Callable[[], object], n: int) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    objs = [make() for _ in range(n)]
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del objs
    return (after - before) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=20_000)
    n = ap.parse_args().nodes
    flat = _bytes_per(lambda: Node(1, None, b"", 0, None), n)
    rows = [
        ("flat slots (today)", flat),
        ("records, Full-only node", _bytes_per(lambda: _Lean(0), n)),
        ("records, node with SWA or Mamba data", _bytes_per(lambda: _Lean(1), n)),
        ("records, node with SWA and Mamba data", _bytes_per(lambda: _Lean(2), n)),
        ("dense arrays, Full only (est.)", flat + 8 - 8 * AUX_SLOTS),
        ("dense arrays, Full+SWA (est.)", flat + 8 - 8 * AUX_SLOTS + 24),
        ("dense arrays, Full+SWA+Mamba (est.)", flat + 8),
    ]
    print(f"{'layout':42} {'bytes/node':>10} {'vs flat':>8}")
    for name, b in rows:
        print(f"{name:42} {b:10.0f} {b / flat:7.2f}x")


if __name__ == "__main__":
    main()

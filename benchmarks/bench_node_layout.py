"""Bytes per node of the per-node layout: component columns in the stores vs the flat node fields they replaced.

Run: `.venv/bin/python benchmarks/bench_node_layout.py [--nodes N]`.

Issue 10 moved each component's per-node state (device slots, host slots,
pin set) out of `Node` into its store's dense columns, indexed by
`Node.slot`. This measures, with tracemalloc over N leaves of a real
`RadixTree` with the real stores registered, what the layout costs per node
in each configuration, beside the flat layout it replaced: the same tree
with the 21-slot node of before (the nine `dev_full`/`host_pages`/
`dev_swa`/`host_swa_pages`/`dev_mamba`/`host_mamba`/`pins_*` fields and
`alive`, no `slot` and so no slot int object; Mamba slots held as int
objects). Residency values (page lists) are shared objects, so only the
layout is counted; every node holds a device Mamba state where Mamba is
configured. Pin sets are created on first pin in both layouts (an unpinned
node holds none), so they are not counted.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
from collections.abc import Callable

from unicache.components.full import FullStore
from unicache.components.mamba import MambaStore
from unicache.components.store import ComponentStore
from unicache.components.swa import SWAStore
from unicache.markers import SWA, Full, Mamba
from unicache.pools.allocator import SlotAllocator
from unicache.tree.keys import encode_tokens
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree

FLAT_SLOTS = 21
"""The flat node's slots: `Node`'s structure and recency fields, `alive`, and nine residency fields
(three per component: device, host, pin set); no `slot`."""

CONFIGS: dict[str, tuple[type, ...]] = {
    "Full": (Full,),
    "Full+SWA": (Full, SWA),
    "Full+Mamba": (Full, Mamba),
    "Full+SWA+Mamba": (Full, SWA, Mamba),
}


class _Flat:
    """A stand-in with as many slots as the flat node had."""

    __slots__ = tuple(f"s{i}" for i in range(FLAT_SLOTS))


class _Lean:
    """A stand-in with `Node`'s slot count."""

    __slots__ = tuple(f"s{i}" for i in range(len(Node.__slots__)))


def _store(marker: type) -> ComponentStore:
    dev, host = SlotAllocator("device", 0), SlotAllocator("host", 0)
    if marker is Full:
        return FullStore(dev, host)
    if marker is SWA:
        return SWAStore(dev, host)
    return MambaStore(dev, host)


def _measure(make: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = make()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def _tree(n: int, components: tuple[type, ...]) -> object:
    """A tree of `n` leaves with `components`' stores registered (none: the bare structure)."""
    tree = RadixTree(1)
    stores = [_store(c) for c in components]
    for st in stores:
        tree.register(st.marker, st)
    pages = [0]
    for i in range(n):
        leaf = tree.add_leaf(tree.root, encode_tokens((i + 1,), tree.token_bytes))
        for st in stores:
            if isinstance(st, MambaStore):
                st.set_device_state(leaf, 1_000 + i)
            elif isinstance(st, (FullStore, SWAStore)):
                st.set_device(leaf, pages)
    return tree, stores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=20_000)
    n = ap.parse_args().nodes
    bare = _measure(lambda: _tree(n, ()))
    grown = _measure(lambda: [_Flat() for _ in range(n)]) - _measure(lambda: [_Lean() for _ in range(n)])
    slot_ints = _measure(lambda: [i + 1_000_000 for i in range(n)]) - _measure(lambda: [0] * n)
    print(f"{'config':16} {'columns':>10} {'flat':>10} {'change':>8}   (bytes/node; {n} nodes)")
    for name, comps in CONFIGS.items():
        ours = _measure(lambda: _tree(n, comps)) / n
        flat = bare + grown - slot_ints
        if Mamba in comps:
            flat += slot_ints  # the flat node held each Mamba slot as an int object
        flat_per = flat / n
        print(f"{name:16} {ours:10.1f} {flat_per:10.1f} {ours - flat_per:+8.1f}")


if __name__ == "__main__":
    main()

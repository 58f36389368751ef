"""Test support: the byte oracle and a request driver (the hand-driven engine is `unicache.repl.manual_engine`)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from leases import PinSet

from unicache import (
    SWA,
    CacheConfig,
    Full,
    InsertResult,
    LockReceipt,
    Mamba,
    Node,
    UniCache,
)
from unicache.repl.data import DataOracle
from unicache.repl.manual_engine import ManualEngine as ManualEngine

SEQ = list(range(200, 232))
"""A token sequence the operation tests share."""


class Oracle:
    """Expected bytes from the library's reference model (:class:`unicache.repl.data.DataOracle`).

    KV rows and Mamba states are pure functions of the token prefix.
    """

    def __init__(self, config: CacheConfig) -> None:
        self.data = DataOracle(config)

    @classmethod
    def of(cls, config: CacheConfig) -> Oracle:
        return cls(config)

    def full(self, tokens: Sequence[int], start: int, end: int) -> torch.Tensor:
        return self.data.full_pages(self.data.hashes(tokens[:end]), start, end)

    def swa(self, tokens: Sequence[int], start: int, end: int) -> torch.Tensor:
        return self.data.swa_pages(self.data.hashes(tokens[:end]), start, end)

    def state(self, tokens: Sequence[int]) -> torch.Tensor:
        return self.data.mamba_rows(self.data.hashes(tokens), len(tokens))

    def check(self, cache: UniCache) -> list[str]:
        """Every slot the tree holds, on both tiers, against recomputation."""
        _, bad = self.data.verify(cache)
        return [f"{m.component} {m.tier} node {m.node}: {m.detail}" for m in bad]


@dataclass
class Driver:
    """Plays requests the way a serving engine does, with the byte oracle."""

    cache: UniCache
    oracle: Oracle = field(init=False)

    def __post_init__(self) -> None:
        self.oracle = Oracle.of(self.cache.config)

    @property
    def engine(self) -> ManualEngine:
        engine = self.cache.engine
        assert isinstance(engine, ManualEngine)
        return engine

    def compute(
        self, tokens: Sequence[int], start: int = 0, *, mamba: bool = True, donate: bool = True
    ) -> InsertResult | None:
        """Allocate, "compute" (write oracle bytes) and insert tokens[start:]; None if no room."""
        cache = self.cache
        cfg = cache.config
        n = len(tokens)
        pages = (n - start) // cfg.page_size
        fs = cache.alloc_device(Full, pages)
        if fs is None:
            return None
        ss: list[int] | None = None
        if cfg.swa_window is not None:
            ss = cache.alloc_device(SWA, pages)
            if ss is None:
                cache.free_device(Full, fs)
                return None
        ms: list[int] | None = None
        if cfg.mamba and mamba:
            ms = cache.alloc_device(Mamba, 1)
            if ms is None:
                cache.free_device(Full, fs)
                if ss is not None:
                    cache.free_device(SWA, ss)
                return None
        if pages:
            cache.write_slots(Full, fs, self.oracle.full(tokens, start, n))
            if ss is not None:
                cache.write_slots(SWA, ss, self.oracle.swa(tokens, start, n))
        if ms is not None:
            cache.write_slots(Mamba, ms, self.oracle.state(tokens))
        res = cache.insert(
            tokens, fs, start=start, swa_slots=ss,
            mamba_slot=ms[0] if ms is not None else None, mamba_donate=donate,
        )
        if ms is not None and not donate:
            cache.free_device(Mamba, ms)
        return res

    def serve(self, tokens: Sequence[int]) -> InsertResult | None:
        """match -> lock -> compute the rest -> insert -> unlock (no load-back)."""
        cache = self.cache
        m = cache.match_prefix(tokens)
        receipt: LockReceipt = cache.lock(m.device_node)
        try:
            return self.compute(tokens, receipt.length)
        finally:
            cache.unlock(receipt)

    def settle(self) -> None:
        """Complete every held copy and poll the acks."""
        if isinstance(self.cache.engine, ManualEngine):
            self.engine.complete_all()
        self.cache.poll()

    def assert_ok(self) -> None:
        report = self.cache.sanity_check()
        assert report.ok, report.describe()
        errors = self.oracle.check(self.cache)
        assert not errors, "\n".join(errors)


def chain(cache: UniCache, driver: Driver, tokens: Sequence[int], cuts: Sequence[int]) -> list[Node]:
    """Insert `tokens` in steps ending at each cut, so the path has one node per step."""
    for cut in cuts:
        assert driver.serve(tokens[:cut]) is not None
    m = cache.match_prefix(tokens[: cuts[-1]])
    node = m.anchor
    path = node.path()
    assert [x.end for x in path] == list(cuts), [x.end for x in path]
    return path


def host_only_node(cache: UniCache, driver: Driver, n: int) -> Node:
    """One node holding the first `n` tokens of `SEQ`, backed up and then evicted from device: ready to
    load back."""
    (a,) = chain(cache, driver, SEQ[:n], [n])
    cache.backup(a)
    driver.settle()
    cache.evict_device(Full, n)
    return a


class Residency:
    """One node's per-component state, read through its cache's component stores.

    A test-side view, one property per component and tier (`full_device`,
    `full_host`, `swa_pins`, ...): what the flat `Node` fields held before
    the stores owned it. An unconfigured component reads None. The setters
    write the stores' columns directly: they exist only to inject faults a
    sanity check must catch.
    """

    __slots__ = ("node", "comps")

    def __init__(self, node: Node) -> None:
        owner = node.tree.owner
        assert isinstance(owner, UniCache), owner
        self.node = node
        self.comps = owner.components

    @property
    def full_device(self) -> list[int] | None:
        return self.comps.full.device_slots(self.node)

    @full_device.setter
    def full_device(self, pages: list[int] | None) -> None:
        self.comps.full.dev[self.node.slot] = pages

    @property
    def full_host_pages(self) -> array[int] | None:
        return self.comps.full.host_slots(self.node)

    @full_host_pages.setter
    def full_host_pages(self, pages: array[int] | None) -> None:
        self.comps.full.host_col[self.node.slot] = pages

    @property
    def full_host(self) -> list[int] | None:
        return self.comps.full.host_list(self.node)

    @property
    def swa_device(self) -> list[int] | None:
        return self.comps.swa.device_slots(self.node) if self.comps.has_swa else None

    @property
    def swa_host(self) -> list[int] | None:
        return self.comps.swa.host_list(self.node) if self.comps.has_swa else None

    @property
    def mamba_device(self) -> int | None:
        return self.comps.mamba.device_state(self.node) if self.comps.has_mamba else None

    @property
    def mamba_host(self) -> int | None:
        return self.comps.mamba.host_state(self.node) if self.comps.has_mamba else None

    @property
    def full_pins(self) -> PinSet[Full, Node] | None:
        return self.comps.full.pins(self.node)

    @full_pins.setter
    def full_pins(self, pins: PinSet[Full, Node] | None) -> None:
        if pins is None:
            self.comps.full.pin_sets.pop(self.node.slot, None)
        else:
            self.comps.full.pin_sets[self.node.slot] = pins

    @property
    def swa_pins(self) -> PinSet[SWA, Node] | None:
        return self.comps.swa.pins(self.node) if self.comps.has_swa else None

    @property
    def mamba_pins(self) -> PinSet[Mamba, Node] | None:
        return self.comps.mamba.pins(self.node) if self.comps.has_mamba else None

    @mamba_pins.setter
    def mamba_pins(self, pins: PinSet[Mamba, Node] | None) -> None:
        if pins is None:
            self.comps.mamba.pin_sets.pop(self.node.slot, None)
        else:
            self.comps.mamba.pin_sets[self.node.slot] = pins

    def pinned(self) -> bool:
        """Whether any lease of any component pins the node."""
        return self.comps.pinned(self.node)


def residency(node: Node) -> Residency:
    """`node`'s per-component state (see `Residency`)."""
    return Residency(node)


def dev_full_of(node: Node) -> list[int] | None:
    """Read through a call, so mypy does not keep a narrowing across cache operations."""
    return residency(node).full_device


def host_full_of(node: Node) -> list[int] | None:
    return residency(node).full_host


def dev_aux_of(node: Node) -> tuple[list[int] | None, int | None]:
    r = residency(node)
    return r.swa_device, r.mamba_device


def states_of(node: Node) -> tuple[int | None, int | None]:
    r = residency(node)
    return r.mamba_device, r.mamba_host


def is_alive(node: Node) -> bool:
    return node.alive

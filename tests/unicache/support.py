"""Test support: the byte oracle and a request driver (the hand-driven engine is `unicache.repl.manual_engine`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

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


def dev_full_of(node: Node) -> list[int] | None:
    """Read through a call, so mypy does not keep a narrowing across cache operations."""
    return node.dev_full


def host_full_of(node: Node) -> list[int] | None:
    return node.host_full


def dev_aux_of(node: Node) -> tuple[list[int] | None, int | None]:
    return node.dev_swa, node.dev_mamba


def states_of(node: Node) -> tuple[int | None, int | None]:
    return node.dev_mamba, node.host_mamba


def is_alive(node: Node) -> bool:
    return node.alive

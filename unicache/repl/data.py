"""The REPL's data oracle: reference-model KV and Mamba state written by `insert`, checked by `check`.

Every value the REPL writes is a pure function of the token prefix (the
engine's `ReferenceModel`), so `check` can compare every published device and
host slot of every node with recomputation: a slot freed under a copy, or a
copy that read the wrong rows, shows up as a mismatch naming node, component
and tier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from unicache.markers import SWA, Full, Mamba
from unicache.config import CacheConfig
from unicache.engine.reference import PrefixHashes, ReferenceModel
from unicache.transfer.base import Tier

if TYPE_CHECKING:
    from unicache.cache import UniCache
    from unicache.tree.node import Node


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A published slot whose bytes differ from the reference model."""

    node: int
    component: str
    tier: str
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"kind": "data", "node": self.node, "component": self.component, "tier": self.tier,
                "detail": self.detail}


class DataOracle:
    """Reference rows for one cache configuration."""

    __slots__ = ("page_size", "model", "width")

    def __init__(self, config: CacheConfig) -> None:
        dtype = getattr(torch, config.dtype)
        assert isinstance(dtype, torch.dtype)
        self.page_size = config.page_size
        self.width = config.kv_width
        self.model = ReferenceModel(
            kv_width=config.kv_width, swa_width=config.kv_width, mamba_width=config.mamba_width, dtype=dtype
        )

    def hashes(self, tokens: Sequence[int]) -> PrefixHashes:
        return self.model.hashes(torch.tensor(list(tokens), dtype=torch.int64))

    def full_pages(self, h: PrefixHashes, begin: int, end: int) -> torch.Tensor:
        """Full KV of tokens [begin, end) as pages: shape (pages, page_size, kv_width)."""
        return self.model.kv(h, begin, end).reshape(-1, self.page_size, self.width)

    def swa_pages(self, h: PrefixHashes, begin: int, end: int) -> torch.Tensor:
        return self.model.swa_kv(h, begin, end).reshape(-1, self.page_size, self.width)

    def mamba_rows(self, h: PrefixHashes, length: int) -> torch.Tensor:
        """The state after `length` tokens: shape (1, mamba_width)."""
        return self.model.mamba_state(h, length).unsqueeze(0)

    def verify(self, cache: UniCache) -> tuple[int, list[Mismatch]]:
        """(slots checked, mismatches) over every published slot of every node."""
        checked = 0
        bad: list[Mismatch] = []
        enabled = cache.config.components
        comps = cache.components
        for node in cache.nodes():
            if node.parent is None:
                continue
            h = self.hashes(node.tokens())
            for tier in (Tier.DEVICE, Tier.HOST):
                device = tier is Tier.DEVICE
                full = comps.full.device_slots(node) if device else comps.full.host_list(node)
                if full is not None:
                    checked += len(full)
                    self._compare(cache, node, Full, tier, full, self.full_pages(h, node.start, node.end), bad)
                if SWA in enabled:
                    swa = comps.swa.device_slots(node) if device else comps.swa.host_list(node)
                    if swa is not None:
                        checked += len(swa)
                        self._compare(cache, node, SWA, tier, swa, self.swa_pages(h, node.start, node.end), bad)
                if Mamba in enabled:
                    state = comps.mamba.device_state(node) if device else comps.mamba.host_state(node)
                    if state is not None:
                        checked += 1
                        self._compare(cache, node, Mamba, tier, [state], self.mamba_rows(h, node.end), bad)
        return checked, bad

    @staticmethod
    def _compare(
        cache: UniCache, node: Node, component: type, tier: Tier, slots: list[int],
        expected: torch.Tensor, out: list[Mismatch],
    ) -> None:
        got = cache.read_slots(component, slots, tier)
        if got.shape != expected.shape:
            out.append(Mismatch(node.id, component.__name__.lower(), tier.value,
                                f"{len(slots)} slots for a {tuple(expected.shape)} reference"))
            return
        if torch.equal(got, expected.to(got.dtype)):
            return
        rows = [i for i in range(len(slots)) if not torch.equal(got[i], expected[i].to(got.dtype))]
        shown = ", ".join(f"slot {slots[i]}" for i in rows[:8])
        out.append(Mismatch(node.id, component.__name__.lower(), tier.value,
                            f"{len(rows)} of {len(slots)} rows differ from the reference ({shown})"))

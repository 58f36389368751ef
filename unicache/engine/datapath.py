"""The scheduler's data path: reference KV and Mamba state written into a request's slots, and checked.

With ``EngineConfig.data`` off a request has no prefix hashes and every
method here is a no-op (bookkeeping-only runs); with ``verify`` on, every
reused prefix and a request's own pages are compared with the reference model
before they are used.
"""

from __future__ import annotations

import torch

from unicache.cache import UniCache
from unicache.markers import SWA, Full, Mamba
from unicache.engine.config import EngineConfig
from unicache.engine.oracle import DataOracle
from unicache.engine.reference import PrefixHashes, ReferenceModel
from unicache.engine.request import EngineStats, Request
from unicache.tree.node import Node


class DataPath:
    """Computes, stores and verifies one cache's request data (see the module docstring)."""

    __slots__ = ("cache", "model", "oracle", "config", "stats", "_ps", "_swa", "_mamba", "_verify")

    def __init__(self, cache: UniCache, model: ReferenceModel, oracle: DataOracle, config: EngineConfig,
                 stats: EngineStats) -> None:
        self.cache = cache
        self.model = model
        self.oracle = oracle
        self.config = config
        self.stats = stats
        self._ps = cache.config.page_size
        self._swa = cache.config.swa_window is not None
        self._mamba = cache.config.mamba
        self._verify = config.data and config.verify

    def verify_prefix(self, req: Request, node: Node, prefix: int) -> None:
        """The locked device prefix ``tokens[:prefix]`` ending at ``node`` holds the reference bytes."""
        if not self._verify:
            return
        assert req.h is not None
        self.oracle.verify_prefix(req.rid, req.h, node, prefix)
        self.stats.verified_tokens += prefix
        self.stats.verified_states += int(self._mamba and prefix > 0)

    def _rows(self, rows: torch.Tensor, pages: int) -> torch.Tensor:
        """Pad token rows to whole pages: ``[pages, page_size, width]``."""
        ps = self._ps
        n = rows.shape[0]
        if n < pages * ps:
            rows = torch.cat([rows, rows.new_zeros((pages * ps - n, rows.shape[1]))])
        return rows.reshape(pages, ps, rows.shape[1])

    def _write(self, req: Request, h: PrefixHashes, begin: int, end: int) -> None:
        """Compute and store KV of tokens ``begin..end`` into the request's own pages."""
        if end <= begin:
            return
        ps = self._ps
        first = (begin - req.cached_end) // ps
        last = -(-(end - req.cached_end) // ps)
        lo = req.cached_end + first * ps
        cache = self.cache
        model = self.model
        cache.write_slots(Full, req.full_pages[first:last],
                          self._rows(model.kv(h, lo, end), last - first))
        if self._swa:
            cache.write_slots(SWA, req.swa_pages[first:last],
                              self._rows(model.swa_kv(h, lo, end), last - first))

    def prefill(self, req: Request) -> None:
        """Write the KV of the prompt past the reused prefix, and the state after the prompt."""
        h = req.h
        if h is None:
            return
        self._write(req, h, req.prefix, req.prompt_len)
        if req.mamba_slot is not None:
            self.write_state(h, [req.mamba_slot], req.prompt_len)

    def write_state(self, h: PrefixHashes | None, slots: list[int], length: int) -> None:
        """Write the Mamba state after ``length`` tokens into ``slots`` (nothing without data)."""
        if h is not None:
            self.cache.write_slots(Mamba, slots, self.model.mamba_state(h, length).unsqueeze(0))

    def decode(self, req: Request) -> tuple[tuple[int, ...], PrefixHashes | None]:
        """The request's final tokens (prompt + output) and their hashes; writes the output's KV.

        Without data the output tokens are a deterministic function of the request id.
        """
        out = req.src.output_tokens
        h = req.h
        if h is None:
            vocab = self.config.vocab
            return req.tokens + tuple(1 + (req.rid * 7919 + i) % (vocab - 1) for i in range(out)), None
        if self._verify:
            self.verify_own(req)
        tokens = req.tokens
        if out:
            h = self.model.decode(h, out, self.config.vocab)
            tokens = tuple(h.tokens.tolist())
        self._write(req, h, req.prompt_len, len(tokens))
        return tokens, h

    def verify_own(self, req: Request) -> None:
        """The request's own pages still hold the prompt KV it wrote at prefill."""
        h = req.h
        assert h is not None
        begin, end = req.cached_end, req.prompt_len
        if end > begin:
            self.oracle.verify_rows(req.rid, Full, req.full_pages, self.model.kv(h, begin, end), begin,
                                    "request-owned Full pages")
            if self._swa:
                self.oracle.verify_rows(req.rid, SWA, req.swa_pages, self.model.swa_kv(h, begin, end),
                                        begin, "request-owned SWA pages")
        if req.mamba_slot is not None:
            self.oracle.verify_state(req.rid, req.mamba_slot, self.model.mamba_state(h, req.prompt_len),
                                     req.prompt_len, "request-owned Mamba slot")

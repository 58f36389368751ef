"""One replayable request and a trace: an ordered list of them with its provenance."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np
import torch

from unicache.traces.mix import mix32


class TraceFormatError(ValueError):
    """A trace file or record is malformed; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """A prompt to serve: its tokens, how many tokens to decode, and where it came from.

    ``tokens`` is an ``array('q')`` (8 bytes a token); ``arrival_ms`` is relative to
    the trace start and only orders requests (replay keeps file order).
    """

    rid: int
    tokens: array[int]
    output_tokens: int = 0
    arrival_ms: float = 0.0
    session: int | None = None
    turn: int | None = None

    def __post_init__(self) -> None:
        if len(self.tokens) == 0:
            raise TraceFormatError(f"request {self.rid} has no tokens")
        if self.output_tokens < 0:
            raise TraceFormatError(f"request {self.rid} has negative output_tokens {self.output_tokens}")

    def token_tensor(self) -> torch.Tensor:
        """The prompt as an int64 tensor (a copy; the request stays immutable)."""
        return torch.frombuffer(bytearray(self.tokens.tobytes()), dtype=torch.int64)


@dataclass(slots=True)
class Trace:
    """Requests in arrival order, plus a description of where they came from."""

    name: str
    requests: list[TraceRequest]
    source: str = ""
    _unique: int | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def input_tokens(self) -> int:
        return sum(len(r.tokens) for r in self.requests)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.requests)

    @property
    def max_request_tokens(self) -> int:
        return max((len(r.tokens) + r.output_tokens for r in self.requests), default=0)

    @property
    def max_token_id(self) -> int:
        """The largest prompt token id (0 for an empty trace): what a cache's key width must hold."""
        return max((int(np.frombuffer(r.tokens, np.int64).max()) for r in self.requests), default=0)

    def check_unique_ids(self) -> None:
        """Refuse (TraceFormatError) two requests with one id: the engine keys what a request holds by it."""
        first: dict[int, int] = {}
        for i, req in enumerate(self.requests):
            j = first.setdefault(req.rid, i)
            if j != i:
                raise TraceFormatError(f"trace {self.name}: requests {j} and {i} (0-based) both have id {req.rid}; "
                                       f"give every request its own id")

    def unique_tokens(self) -> int:
        """Distinct prompt prefixes counted in tokens (what a tree holding every prompt stores)."""
        if self._unique is None:
            self._unique = count_unique_prefix_tokens(self.requests)
        return self._unique


def count_unique_prefix_tokens(requests: list[TraceRequest]) -> int:
    """Number of distinct (position, prefix) pairs over all prompts.

    Two independent position-aware additive hashes, packed into one 63-bit key,
    identify each prefix; a collision needs 31 + 32 hash bits to agree.
    """
    if not requests:
        return 0
    keys: list[torch.Tensor] = []
    for req in requests:
        toks = req.token_tensor()
        pos = torch.arange(toks.shape[0], dtype=torch.int64)
        a = torch.cumsum(mix32(mix32(toks) ^ mix32(pos)), 0)
        b = torch.cumsum(mix32(mix32(toks ^ 0x5BD1E995) ^ mix32(pos ^ 0x27D4EB2F)), 0)
        keys.append(((a & 0x7FFFFFFF) << 32) | (b & 0xFFFFFFFF))
    return int(torch.unique(torch.cat(keys)).shape[0])

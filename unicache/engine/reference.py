"""The reference model: KV and Mamba state as pure, integer-exact functions of tokens.

Every value is derived from a prefix hash ``H[i] = sum(g(token[j], j) for j <= i)``
where ``g`` mixes a token with its position through a 32-bit integer hash. ``H[i]``
identifies the prefix ``tokens[:i + 1]``, so the KV of token ``i`` (and the Mamba
state after a prefix) differs whenever the prefix differs, even if the token is
the same. All arithmetic is on int64 with every product kept below 2**63, so the
torch (vectorised) and the plain-int paths give bit-identical results on any
machine. Values are masked to the bits the storage dtype holds exactly, which
makes a stored value compare equal to the reference only if it is the right one.

The simulator asks for the same request's rows many times (the reused prefix
is checked, the rest written, its own pages checked again, the output
appended), so a :class:`PrefixHashes` keeps the rows each model computed for
it (:meth:`ReferenceModel.kv` and friends return read-only slices of them) and
:meth:`ReferenceModel.extend` / :meth:`ReferenceModel.decode` compute rows only
for the new tokens. Single Mamba states are computed on Python ints (the same
arithmetic, bit for bit), vectors through numpy (:func:`mix32_array`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import torch

from unicache.traces.mix import MASK32, I64Array, mix32, mix32_array, mix32_int

_POS = 0x2C1B3C6D
_KV_SALT = 0x1B873593
_SWA_SALT = 0x3C6EF372
_MAMBA_SALT = 0x5BD1E995
_DECODE_SALT = 0x27D4EB2F

_EXACT_BITS: dict[torch.dtype, int] = {
    torch.int64: 31,
    torch.int32: 31,
    torch.int16: 15,
    torch.uint8: 8,
    torch.int8: 7,
    torch.float64: 31,
    torch.float32: 24,
    torch.float16: 11,
    torch.bfloat16: 8,
}


class ReferenceDtypeError(ValueError):
    """The storage dtype cannot hold reference values exactly."""


_UIDS = itertools.count(1)


def _as_array(x: torch.Tensor) -> I64Array:
    """An int64 numpy view of a CPU int64 tensor (a copy otherwise)."""
    if x.dtype is not torch.int64 or not x.is_cpu:
        x = x.to(device="cpu", dtype=torch.int64)
    return x.numpy()


def _np(x: torch.Tensor | I64Array) -> I64Array:
    return x if isinstance(x, np.ndarray) else _as_array(x)


def _salts(base: int, width: int) -> torch.Tensor:
    return mix32(torch.arange(width, dtype=torch.int64) + base)


@dataclass(frozen=True, slots=True)
class PrefixHashes:
    """Prefix hashes of one token sequence; ``values[i]`` identifies ``tokens[:i + 1]``."""

    tokens: torch.Tensor
    values: torch.Tensor
    rows: dict[int, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)
    """KV and SWA KV lanes side by side for every prefix, per model (its ``uid``) that computed them (read-only)."""
    _array: I64Array | None = field(default=None, compare=False, repr=False)

    @property
    def array(self) -> I64Array:
        """``values`` as an int64 numpy array (the same memory for CPU values; made once)."""
        a = self._array
        if a is None:
            a = _as_array(self.values)
            object.__setattr__(self, "_array", a)
        return a

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def last(self, length: int) -> int:
        """The hash of the prefix of ``length`` tokens (0 for the empty prefix)."""
        if length < 0 or length > len(self):
            raise IndexError(f"prefix length {length} outside 0..{len(self)}")
        return 0 if length == 0 else int(self.array[length - 1])


@dataclass(frozen=True, slots=True)
class ReferenceModel:
    """Deterministic stand-in for a model's KV and recurrent state.

    ``kv_width``/``swa_width``/``mamba_width`` are the per-token (per-state)
    element counts; ``dtype`` is the storage dtype of the pools the values go
    into (values are masked to the bits it holds exactly).
    """

    kv_width: int = 4
    swa_width: int = 4
    mamba_width: int = 8
    dtype: torch.dtype = torch.int32
    seed: int = 0
    _mask: int = field(init=False, repr=False, compare=False)
    _kv_salts: torch.Tensor = field(init=False, repr=False, compare=False)
    _swa_salts: torch.Tensor = field(init=False, repr=False, compare=False)
    _mamba_salts: torch.Tensor = field(init=False, repr=False, compare=False)
    _kv_np: I64Array = field(init=False, repr=False, compare=False)
    _swa_np: I64Array = field(init=False, repr=False, compare=False)
    _mamba_ints: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _both_np: I64Array = field(init=False, repr=False, compare=False)
    _mamba_np: I64Array = field(init=False, repr=False, compare=False)
    uid: int = field(init=False, repr=False, compare=False)
    """Tells this model's cached rows in a :class:`PrefixHashes` apart (never reused in a process)."""

    def __post_init__(self) -> None:
        bits = _EXACT_BITS.get(self.dtype)
        if bits is None:
            raise ReferenceDtypeError(f"dtype {self.dtype} has no exact integer range for reference values")
        for name, width in (("kv_width", self.kv_width), ("swa_width", self.swa_width),
                            ("mamba_width", self.mamba_width)):
            if width < 1:
                raise ValueError(f"{name} must be >= 1, got {width}")
        seed = mix32_int(self.seed)
        object.__setattr__(self, "_mask", (1 << bits) - 1)
        object.__setattr__(self, "_kv_salts", _salts(_KV_SALT ^ seed, self.kv_width))
        object.__setattr__(self, "_swa_salts", _salts(_SWA_SALT ^ seed, self.swa_width))
        object.__setattr__(self, "_mamba_salts", _salts(_MAMBA_SALT ^ seed, self.mamba_width))
        object.__setattr__(self, "_kv_np", self._kv_salts.numpy())
        object.__setattr__(self, "_swa_np", self._swa_salts.numpy())
        object.__setattr__(self, "_mamba_ints", tuple(self._mamba_salts.tolist()))
        object.__setattr__(self, "_both_np", np.concatenate([self._kv_np, self._swa_np]))
        object.__setattr__(self, "_mamba_np", self._mamba_salts.numpy())
        object.__setattr__(self, "uid", next(_UIDS))

    def hashes(self, tokens: torch.Tensor, *, start: int = 0, carry: int = 0) -> PrefixHashes:
        """Prefix hashes of ``tokens`` placed at positions ``start..``, continuing ``carry``.

        ``carry`` is the hash of the ``start`` tokens before (0 for an empty prefix),
        so ``hashes(b, start=len(a), carry=hashes(a).last(len(a)))`` equals the tail of
        ``hashes(a + b)``.
        """
        toks = tokens.to(torch.int64)
        if toks.dim() != 1:
            raise ValueError(f"tokens must be 1-D, got shape {tuple(toks.shape)}")
        pos = np.arange(start, start + toks.shape[0], dtype=np.int64)
        values = np.cumsum(self.token_terms_array(_as_array(toks), pos))
        values += carry
        return PrefixHashes(toks, torch.from_numpy(values), _array=values)

    def token_terms(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Each token's additive term of the prefix hash (``H[i] = sum of terms[:i + 1]``)."""
        return torch.from_numpy(self.token_terms_array(_as_array(tokens), _as_array(positions)))

    def token_terms_array(self, tokens: I64Array, positions: I64Array) -> I64Array:
        """:meth:`token_terms` on int64 numpy arrays (a new array)."""
        return mix32_array(mix32_array(tokens) ^ (positions * _POS & MASK32) ^ self.seed)

    def extend(self, prefix: PrefixHashes, more: torch.Tensor) -> PrefixHashes:
        """Hashes of ``prefix.tokens + more`` reusing the prefix's work (its cached rows included)."""
        tail = self.hashes(more, start=len(prefix), carry=prefix.last(len(prefix)))
        return self._joined(prefix, tail.tokens, tail.array)

    def _joined(self, prefix: PrefixHashes, tokens: torch.Tensor, values: I64Array) -> PrefixHashes:
        joined = np.concatenate([prefix.array, values])
        out = PrefixHashes(torch.cat([prefix.tokens, tokens]), torch.from_numpy(joined), _array=joined)
        rows = prefix.rows.get(self.uid)
        if rows is not None:
            out.rows[self.uid] = torch.cat([rows, self._lanes_array(values, self._both_np)])
        return out

    def _lanes(self, h: torch.Tensor | I64Array, salts: I64Array) -> torch.Tensor:
        return self._lanes_array(_np(h), salts)

    def _lanes_array(self, a: I64Array, salts: I64Array) -> torch.Tensor:
        folded = a ^ (a >> 32)
        lanes = mix32_array(folded[..., np.newaxis] ^ salts)
        lanes &= self._mask
        return torch.from_numpy(lanes).to(self.dtype)

    def kv_rows(self, values: torch.Tensor | I64Array) -> torch.Tensor:
        """Full-attention KV rows for the given prefix hashes: shape ``(n, kv_width)``."""
        return self._lanes(values, self._kv_np)

    def swa_rows(self, values: torch.Tensor | I64Array) -> torch.Tensor:
        """Sliding-window KV rows for the given prefix hashes: shape ``(n, swa_width)``."""
        return self._lanes(values, self._swa_np)

    def mamba_at(self, last_hash: int, length: int) -> torch.Tensor:
        """State after a prefix of ``length`` tokens whose hash is ``last_hash``: ``(mamba_width,)``.

        On Python ints: ``v ^ (v >> 32)`` and the masked mix are the int64 tensor
        arithmetic bit for bit while ``v`` fits in int64 (checked).
        """
        v = last_hash + length * _MAMBA_SALT
        if not -(1 << 63) <= v < 1 << 63:
            raise OverflowError(f"prefix hash {last_hash} at length {length} is outside int64")
        folded = v ^ (v >> 32)
        mask = self._mask
        return torch.tensor([mix32_int(folded ^ s) & mask for s in self._mamba_ints], dtype=torch.int64).to(
            self.dtype)

    def mamba_rows(self, last_hashes: torch.Tensor | I64Array, lengths: torch.Tensor | I64Array) -> torch.Tensor:
        """States after prefixes with the given hashes and lengths: ``(n, mamba_width)``."""
        h, n = _np(last_hashes), _np(lengths)
        return self._lanes_array(h + n * _MAMBA_SALT, self._mamba_np)

    def _cached(self, h: PrefixHashes) -> torch.Tensor:
        """KV and SWA KV lanes of every prefix of ``h`` side by side, computed once per (``h``, model)."""
        rows = h.rows.get(self.uid)
        if rows is None:
            rows = h.rows[self.uid] = self._lanes_array(h.array, self._both_np)
        return rows

    def kv(self, h: PrefixHashes, begin: int, end: int) -> torch.Tensor:
        """Full-attention KV of tokens ``begin..end-1``: shape ``(end - begin, kv_width)`` (read-only)."""
        self._check_range(h, begin, end)
        return self._cached(h)[begin:end, :self.kv_width]

    def swa_kv(self, h: PrefixHashes, begin: int, end: int) -> torch.Tensor:
        """Sliding-window KV of tokens ``begin..end-1``: shape ``(end - begin, swa_width)`` (read-only)."""
        self._check_range(h, begin, end)
        return self._cached(h)[begin:end, self.kv_width:]

    def mamba_state(self, h: PrefixHashes, length: int) -> torch.Tensor:
        """Recurrent state after the first ``length`` tokens: shape ``(mamba_width,)``."""
        return self.mamba_at(h.last(length), length)

    def decode(self, h: PrefixHashes, count: int, vocab: int) -> PrefixHashes:
        """Greedy-decode ``count`` tokens after ``h`` (each depends on all before it)."""
        if count < 0:
            raise ValueError(f"decode count must be >= 0, got {count}")
        if vocab < 2:
            raise ValueError(f"vocab must be >= 2, got {vocab}")
        length = len(h)
        carry = h.last(length)
        out: list[int] = []
        values: list[int] = []
        for i in range(count):
            nxt = 1 + mix32_int(carry ^ _DECODE_SALT ^ (length + i)) % (vocab - 1)
            g = mix32_int(mix32_int(nxt) ^ ((length + i) * _POS & MASK32) ^ self.seed)
            carry += g
            out.append(nxt)
            values.append(carry)
        if not count:
            return h
        return self._joined(h, torch.tensor(out, dtype=torch.int64), np.array(values, dtype=np.int64))

    @staticmethod
    def _check_range(h: PrefixHashes, begin: int, end: int) -> None:
        if not 0 <= begin <= end <= len(h):
            raise IndexError(f"token range {begin}..{end} outside 0..{len(h)}")

"""The 32-bit integer mix shared by trace token synthesis and the engine's reference model.

It lives here, in the lowest layer that needs it: `traces` derives block tokens
and prefix keys with it, and `unicache.engine.reference` builds KV and Mamba
state on top of it.

CPU tensors are mixed through numpy views (no copy): numpy's per-call cost on
the small arrays the simulator hashes is about a quarter of torch's, and the
int64 arithmetic is the same (every product stays below 2**59).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

MASK32 = 0xFFFFFFFF
_MUL = 0x045D9F3B

I64Array = npt.NDArray[np.int64]


def mix32_array(x: I64Array) -> I64Array:
    """32-bit integer hash of each element of an int64 array (input masked to 32 bits; a new array)."""
    x = x & MASK32
    x ^= x >> 16
    x *= _MUL
    x &= MASK32
    x ^= x >> 16
    x *= _MUL
    x &= MASK32
    x ^= x >> 16
    return x


def mix32(x: torch.Tensor) -> torch.Tensor:
    """32-bit integer hash of each element of an int64 tensor (input masked to 32 bits)."""
    if x.device.type == "cpu" and x.dtype == torch.int64:
        return torch.from_numpy(mix32_array(x.numpy()))
    x = x & MASK32
    x = ((x >> 16) ^ x) * _MUL & MASK32
    x = ((x >> 16) ^ x) * _MUL & MASK32
    return (x >> 16) ^ x


def mix32_int(x: int) -> int:
    """The scalar twin of :func:`mix32`."""
    x &= MASK32
    x = ((x >> 16) ^ x) * _MUL & MASK32
    x = ((x >> 16) ^ x) * _MUL & MASK32
    return (x >> 16) ^ x

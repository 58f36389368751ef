"""The 32-bit integer mix shared by trace token synthesis and the engine's reference model.

It lives here, in the lowest layer that needs it: `traces` derives block tokens
and prefix keys with it, and `unicache.engine.reference` builds KV and Mamba
state on top of it.
"""

from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
_MUL = 0x045D9F3B


def mix32(x: torch.Tensor) -> torch.Tensor:
    """32-bit integer hash of each element of an int64 tensor (input masked to 32 bits)."""
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

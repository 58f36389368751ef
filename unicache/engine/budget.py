"""What a cache configuration will allocate, computed before anything is allocated.

`unicache replay` refuses a configuration whose pools would take more than
``--memory-limit`` GiB (default :data:`DEFAULT_MEMORY_LIMIT_GIB`), so a value
like ``--hicache-ratio 1e-9`` or ``--device-tokens 10**12`` is a one-line usage
error instead of an allocation the kernel kills.
"""

from __future__ import annotations

import torch

from unicache.markers import Mamba
from unicache.config import CacheConfig

DEFAULT_MEMORY_LIMIT_GIB = 8.0
MAX_MEMORY_LIMIT_GIB = 1 << 20
MAX_HISTORY = 1 << 24
"""Flight-recorder entries a replay may keep (``--history``)."""
SLOT_BOOKKEEPING_BYTES = 48
"""Allocator bytes per page or slot (free-stack entry, int object, used flags), rounded up."""

GIB = 1 << 30


def cache_bytes(config: CacheConfig) -> int:
    """Bytes the pools of ``config`` take: device and host data plus per-slot bookkeeping."""
    dtype = getattr(torch, config.dtype)
    assert isinstance(dtype, torch.dtype)
    item = dtype.itemsize
    total = 0
    for comp in config.components:
        slots = config.device_capacity(comp) + config.host_capacity(comp)
        row = config.mamba_width if comp is Mamba else config.page_size * config.kv_width
        total += slots * (row * item + SLOT_BOOKKEEPING_BYTES)
    return total


def describe_bytes(n: int) -> str:
    return f"{n / GIB:,.2f} GiB" if n >= GIB else f"{n / (1 << 20):,.1f} MiB"

"""Torch-backed pools: paged KV rows (Full, SWA) and state rows (Mamba), one per tier."""

from __future__ import annotations

import torch

from unicache.pools.allocator import SlotAllocator


class KVPool:
    """`data[page, offset, :]` holds one token's KV row; `alloc` hands out page ids.

    `compact=True` (host pools) makes the allocator hand out `array("i")` page lists.
    """

    __slots__ = ("name", "data", "alloc", "page_size", "width", "device")

    def __init__(
        self,
        name: str,
        pages: int,
        page_size: int,
        width: int,
        dtype: torch.dtype,
        device: torch.device,
        pin_memory: bool = False,
        compact: bool = False,
    ) -> None:
        self.name = name
        self.page_size = page_size
        self.width = width
        self.device = device
        self.data = torch.zeros(
            (pages, page_size, width), dtype=dtype, device=device, pin_memory=pin_memory
        )
        self.alloc = SlotAllocator(name, pages, compact=compact)

    @property
    def row_shape(self) -> tuple[int, ...]:
        return (self.page_size, self.width)


class StatePool:
    """`data[slot, :]` holds one recurrent state; `alloc` hands out slot ids."""

    __slots__ = ("name", "data", "alloc", "width", "device")

    def __init__(
        self,
        name: str,
        slots: int,
        width: int,
        dtype: torch.dtype,
        device: torch.device,
        pin_memory: bool = False,
        compact: bool = False,
    ) -> None:
        self.name = name
        self.width = width
        self.device = device
        self.data = torch.zeros((slots, width), dtype=dtype, device=device, pin_memory=pin_memory)
        self.alloc = SlotAllocator(name, slots, compact=compact)

    @property
    def row_shape(self) -> tuple[int, ...]:
        return (self.width,)


Pool = KVPool | StatePool

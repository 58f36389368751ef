"""Slot allocators (torch-free) and the torch-backed pools."""

from unicache.pools.allocator import SlotAllocator

__all__ = ["SlotAllocator"]

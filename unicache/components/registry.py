"""Which store class implements each component marker: the one place a new component registers."""

from __future__ import annotations

from typing import Final

from unicache.components.full import FullStore
from unicache.components.mamba import MambaStore
from unicache.markers import SWA, Full, Mamba
from unicache.components.store import ComponentStore
from unicache.components.swa import SWAStore

STORES: Final[dict[type, type[ComponentStore]]] = {Full: FullStore, SWA: SWAStore, Mamba: MambaStore}
"""Marker -> store class, in eviction priority order (highest first)."""

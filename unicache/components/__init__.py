"""Component markers and the per-component residency rules."""

from unicache.markers import (
    COMPONENTS,
    FULL,
    MAMBA,
    SWA,
    SWA_IDX,
    Component,
    Full,
    Mamba,
    component_index,
    component_name,
)

__all__ = [
    "COMPONENTS",
    "FULL",
    "MAMBA",
    "SWA",
    "SWA_IDX",
    "Component",
    "Full",
    "Mamba",
    "component_index",
    "component_name",
]

"""The component markers, re-exported where the components live (defined in `unicache.markers`)."""

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
    "COMPONENTS", "FULL", "MAMBA", "SWA", "SWA_IDX", "Component", "Full", "Mamba",
    "component_index", "component_name",
]

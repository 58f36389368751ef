"""Mamba rules: a node's recurrent state is usable when present on either tier."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unicache.tree.node import Node


def state_present(node: Node) -> bool:
    """Whether the state at `node`'s end exists on device or host (the root needs none)."""
    return node.parent is None or node.dev_mamba is not None or node.host_mamba is not None


def state_on_device(node: Node) -> bool:
    return node.parent is None or node.dev_mamba is not None

"""The radix tree: nodes and their structure (torch-free)."""

from unicache.tree.node import ChildKey, Node
from unicache.tree.radix import RadixTree, common_pages

__all__ = ["ChildKey", "Node", "RadixTree", "common_pages"]

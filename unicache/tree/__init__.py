"""The radix tree: nodes and their structure (torch-free)."""

from unicache.tree.node import TOKEN_BYTES, ChildKey, Node, decode_tokens, encode_tokens
from unicache.tree.radix import RadixTree, common_pages

__all__ = [
    "TOKEN_BYTES",
    "ChildKey",
    "Node",
    "RadixTree",
    "common_pages",
    "decode_tokens",
    "encode_tokens",
]

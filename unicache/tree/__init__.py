"""The radix tree: nodes and their structure (torch-free)."""

from unicache.config import TokenBytes
from unicache.tree.keys import decode_tokens, encode_tokens, max_token_id, token_bytes_for
from unicache.tree.node import ChildKey, Node
from unicache.tree.radix import RadixTree, common_pages

__all__ = [
    "ChildKey",
    "Node",
    "RadixTree",
    "TokenBytes",
    "common_pages",
    "decode_tokens",
    "encode_tokens",
    "max_token_id",
    "token_bytes_for",
]

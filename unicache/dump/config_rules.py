"""Range checks for the cache configuration recorded in a dump (torch-free, unlike `CacheConfig`).

The writer records ``CacheConfig.to_json()``; a section it could not capture
is an empty object. Every known key is checked for its type and range (page
size and capacities >= 1, counts >= 0, finite positive ratios, closed sets of
names, a key width of 4 or 8 bytes); keys this version does not know are kept
as they are.

``token_bytes`` (bytes a token id takes in the keys) appeared after the
format's version 1: a dump without it was written when every key was 8
bytes a token, and reads as 8 (:func:`dump_token_bytes`). Dumps record keys
as token ids, not bytes, so the width only bounds the ids a dump may hold.
"""

from __future__ import annotations

import math

from unicache.dump.decode import JSONObject, at, check_int, type_name
from unicache.dump.errors import DumpFormatError

_POSITIVE = ("device_tokens", "page_size", "kv_width", "mamba_width", "write_through_threshold")
_OPTIONAL_POSITIVE = ("swa_window", "swa_device_tokens", "swa_host_tokens", "mamba_host_slots")
_COUNTS = ("mamba_device_slots", "load_back_threshold", "history")
_OPTIONAL_COUNTS = ("host_tokens",)
_FLAGS = ("mamba", "sync_write_back", "strict", "debug")
_NAMES = ("dtype", "device", "ledger_name")
_POLICIES = ("write_back", "write_through")
_KEY_WIDTHS = (4, 8)
LEGACY_TOKEN_BYTES = 8
"""The key width of a dump that does not record one (every key was 8 bytes a token then)."""


def dump_token_bytes(config: JSONObject) -> int:
    """The key width a (checked) dump configuration records: `token_bytes`, or 8 when absent."""
    value = config.get("token_bytes", LEGACY_TOKEN_BYTES)
    return value if isinstance(value, int) and value in _KEY_WIDTHS else LEGACY_TOKEN_BYTES


def check_config(config: JSONObject, where: str) -> None:
    """Raise `DumpFormatError` naming the first configuration value of the wrong type or out of range."""
    for key, value in config.items():
        path = at(where, key)
        if key in _POSITIVE or (key in _OPTIONAL_POSITIVE and value is not None):
            check_int(value, path, 1)
        elif key in _COUNTS or (key in _OPTIONAL_COUNTS and value is not None):
            check_int(value, path, 0)
        elif key in _FLAGS:
            if not isinstance(value, bool):
                raise DumpFormatError(path, f"expected a bool, got {type_name(value)}")
        elif key in _NAMES:
            if not isinstance(value, str):
                raise DumpFormatError(path, f"expected a string, got {type_name(value)}")
        elif key == "token_bytes":
            if isinstance(value, bool) or value not in _KEY_WIDTHS:
                raise DumpFormatError(path, f"expected 4 or 8 (bytes a token id takes in the keys), got {value!r}")
        elif key == "write_policy":
            if value not in _POLICIES:
                raise DumpFormatError(path, f"expected one of {', '.join(_POLICIES)}, got {value!r}")
        elif key == "host_ratio" and value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise DumpFormatError(path, f"expected a finite number > 0, got {value!r}")

"""`Scope`: its fields are validated, and its `new` line starts the cache it describes."""

from __future__ import annotations

from typing import Any

import pytest

from unicache.explore.replay import replay
from unicache.explore.scope import Scope, ScopeError


@pytest.mark.parametrize("fields", [
    {"components": ("mamba",)}, {"components": ("full", "swa")}, {"components": ("full", "full")},
    {"write_policy": "write_around"}, {"device_tokens": 0}, {"max_in_flight": 0}, {"max_receipts": -1},
    {"sequences": ()}, {"sequences": ((1,), ())},
])
def test_bad_fields_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ScopeError):
        Scope(**fields)


def test_new_line_starts_the_scoped_cache() -> None:
    r = replay(Scope(write_policy="write_through", device_tokens=5), ())
    try:
        config = r.cache.config
        assert config.write_policy == "write_through" and config.device_tokens == 5 and config.page_size == 1
        assert config.mamba and config.mamba_device_slots == 2 and r.manual.held() == []
    finally:
        assert r.close() is None

"""Fixtures for the unicache core tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.unicache.support import Driver, ManualEngine
from unicache import CacheConfig, UniCache

MakeCache = Callable[..., tuple[UniCache, Driver]]


@pytest.fixture
def make_cache() -> MakeCache:
    """`make_cache(**config)` -> (cache on a ManualEngine, driver); int32 rows, CPU."""

    def build(**kw: object) -> tuple[UniCache, Driver]:
        params: dict[str, object] = {
            "device_tokens": 64,
            "dtype": "int32",
            "device": "cpu",
            "kv_width": 4,
            "mamba_width": 4,
            "debug": True,
        }
        params.update(kw)
        config = CacheConfig(**params)  # type: ignore[arg-type]
        cache = UniCache(config, ManualEngine())
        return cache, Driver(cache)

    return build

"""CacheConfig validation and derived capacities."""

from __future__ import annotations

import pytest

from unicache import SWA, CacheConfig, ConfigError, Full, Mamba


def test_defaults_and_capacities() -> None:
    c = CacheConfig(device_tokens=64, page_size=16, swa_window=32, mamba=True)
    assert c.components == (Full, SWA, Mamba)
    assert c.device_capacity(Full) == 4 and c.host_capacity(Full) == 8
    assert c.device_capacity(SWA) == 4 and c.host_capacity(SWA) == 8
    assert c.device_capacity(Mamba) == 64 and c.host_capacity(Mamba) == 128
    r = CacheConfig(device_tokens=64, host_ratio=12)
    assert r.host_capacity(Full) == 768
    h = CacheConfig(device_tokens=64, host_tokens=100, mamba=True, mamba_device_slots=4)
    assert h.host_capacity(Full) == 100 and h.host_capacity(Mamba) == 6
    assert CacheConfig.from_json(c.to_json()) == c


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"device_tokens": 0}, "device_tokens"),
        ({"device_tokens": 10, "page_size": 4}, "device_tokens"),
        ({"device_tokens": 16, "page_size": 0}, "page_size"),
        ({"device_tokens": 16, "host_tokens": 8, "host_ratio": 2.0}, "host_tokens"),
        ({"device_tokens": 16, "host_ratio": -1.0}, "host_ratio"),
        ({"device_tokens": 16, "host_ratio": float("nan")}, "host_ratio"),
        ({"device_tokens": 16, "page_size": 4, "host_tokens": 6}, "host_tokens"),
        ({"device_tokens": 16, "swa_window": 0}, "swa_window"),
        ({"device_tokens": 16, "swa_device_tokens": 8}, "swa_device_tokens"),
        ({"device_tokens": 16, "mamba_host_slots": 3}, "mamba_host_slots"),
        ({"device_tokens": 16, "mamba": True, "mamba_device_slots": 0}, "mamba_device_slots"),
        ({"device_tokens": 16, "write_policy": "write_around"}, "write_policy"),
        ({"device_tokens": 16, "write_through_threshold": 0}, "write_through_threshold"),
        ({"device_tokens": 16, "load_back_threshold": -1}, "load_back_threshold"),
        ({"device_tokens": 16, "dtype": "complex64"}, "dtype"),
        ({"device_tokens": 16, "device": "tpu"}, "device"),
        ({"device_tokens": True}, "device_tokens"),
    ],
)
def test_nonsense_is_rejected_naming_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        CacheConfig(**kw)  # type: ignore[arg-type]
    assert err.value.field == field
    assert field in str(err.value)


def test_disabled_component_capacity_raises() -> None:
    with pytest.raises(ConfigError):
        CacheConfig(device_tokens=16).device_capacity(SWA)
    with pytest.raises(ConfigError):
        CacheConfig.from_json({"device_tokens": 16, "bogus": 1})

"""`CacheConfig`: validated sizes, components and policies of one cache."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, get_args

from unicache.markers import SWA, Component, Full, Mamba
from unicache.errors import ConfigError

WritePolicy = Literal["write_through", "write_back"]
TokenBytes = Literal[4, 8]
"""Bytes a token id takes in a tree's keys (see `CacheConfig.token_bytes`)."""

_DTYPES = frozenset(
    {"float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64"}
)


def _positive_int(field: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(field, f"must be an int, got {value!r}")
    if value < 1:
        raise ConfigError(field, f"must be >= 1, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """Everything that shapes a cache. Capacities are in tokens (Full/SWA) or slots (Mamba).

    `host_tokens`/`host_ratio`: give at most one; the host capacity of every
    component defaults to `ratio * device` (ratio 2.0 when neither is given),
    floored to whole pages. Device capacities must be whole pages.

    `token_bytes`: bytes a token id takes in the tree's keys. 4 (the default)
    holds ids 0..2**31-1, every vocabulary served, at half the key memory of
    8, which holds ids 0..2**63-1 (for callers whose ids are not vocabulary
    indices, like offset or hashed ids). An id outside the range raises
    `TokenIdRangeError` at `match_prefix` / `insert`, never wraps.
    """

    device_tokens: int
    page_size: int = 1
    host_tokens: int | None = None
    host_ratio: float | None = None
    swa_window: int | None = None
    swa_device_tokens: int | None = None
    swa_host_tokens: int | None = None
    mamba: bool = False
    mamba_device_slots: int = 64
    mamba_host_slots: int | None = None
    write_policy: WritePolicy = "write_back"
    write_through_threshold: int = 1
    load_back_threshold: int = 0
    sync_write_back: bool = True
    kv_width: int = 8
    mamba_width: int = 16
    dtype: str = "float32"
    token_bytes: TokenBytes = 4
    device: str = "auto"
    ledger_name: str = "unicache"
    strict: bool = False
    debug: bool = False
    history: int = 1024

    def __post_init__(self) -> None:
        ps = _positive_int("page_size", self.page_size)
        dev = _positive_int("device_tokens", self.device_tokens)
        if dev % ps:
            raise ConfigError("device_tokens", f"{dev} is not a multiple of page_size {ps}")
        if self.host_tokens is not None and self.host_ratio is not None:
            raise ConfigError(
                "host_tokens", "give host_tokens or host_ratio, not both "
                f"(got {self.host_tokens} and {self.host_ratio})"
            )
        if self.host_ratio is not None:
            r = self.host_ratio
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r):
                raise ConfigError("host_ratio", f"must be a finite number, got {r!r}")
            if r <= 0:
                raise ConfigError("host_ratio", f"must be > 0, got {r}")
            if int(r * dev) // ps < 1:
                raise ConfigError("host_ratio", f"{r} x {dev} device tokens is less than one page")
        if self.host_tokens is not None:
            host = _positive_int("host_tokens", self.host_tokens)
            if host % ps:
                raise ConfigError("host_tokens", f"{host} is not a multiple of page_size {ps}")
        if self.swa_window is not None:
            _positive_int("swa_window", self.swa_window)
            if self.swa_device_tokens is not None:
                sd = _positive_int("swa_device_tokens", self.swa_device_tokens)
                if sd % ps:
                    raise ConfigError("swa_device_tokens", f"{sd} is not a multiple of page_size {ps}")
            if self.swa_host_tokens is not None:
                sh = _positive_int("swa_host_tokens", self.swa_host_tokens)
                if sh % ps:
                    raise ConfigError("swa_host_tokens", f"{sh} is not a multiple of page_size {ps}")
        else:
            for name in ("swa_device_tokens", "swa_host_tokens"):
                if getattr(self, name) is not None:
                    raise ConfigError(name, "set without swa_window (SWA is disabled)")
        if not isinstance(self.mamba, bool):
            raise ConfigError("mamba", f"must be a bool, got {self.mamba!r}")
        if self.mamba:
            _positive_int("mamba_device_slots", self.mamba_device_slots)
            if self.mamba_host_slots is not None:
                _positive_int("mamba_host_slots", self.mamba_host_slots)
        elif self.mamba_host_slots is not None:
            raise ConfigError("mamba_host_slots", "set without mamba=True")
        if self.write_policy not in get_args(WritePolicy):
            raise ConfigError(
                "write_policy", f"must be one of {get_args(WritePolicy)}, got {self.write_policy!r}"
            )
        _positive_int("write_through_threshold", self.write_through_threshold)
        lbt = self.load_back_threshold
        if not isinstance(lbt, int) or isinstance(lbt, bool) or lbt < 0:
            raise ConfigError("load_back_threshold", f"must be an int >= 0, got {lbt!r}")
        _positive_int("kv_width", self.kv_width)
        _positive_int("mamba_width", self.mamba_width)
        tb: object = self.token_bytes
        if isinstance(tb, bool) or not isinstance(tb, int) or tb not in get_args(TokenBytes):
            raise ConfigError("token_bytes", f"must be 4 (token ids below 2**31) or 8 (below 2**63), got {tb!r}")
        if self.dtype not in _DTYPES:
            raise ConfigError("dtype", f"must be one of {sorted(_DTYPES)}, got {self.dtype!r}")
        d = self.device
        if not (d in ("auto", "cpu", "cuda") or (d.startswith("cuda:") and d[5:].isdigit())):
            raise ConfigError("device", f"must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {d!r}")
        if not isinstance(self.history, int) or self.history < 0:
            raise ConfigError("history", f"must be an int >= 0, got {self.history!r}")
        for name in ("sync_write_back", "strict", "debug"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, f"must be a bool, got {getattr(self, name)!r}")

    @property
    def components(self) -> tuple[Component, ...]:
        """The enabled markers, Full first."""
        out: tuple[Component, ...] = (Full,)
        if self.swa_window is not None:
            out += (SWA,)
        if self.mamba:
            out += (Mamba,)
        return out

    @property
    def ratio(self) -> float:
        """Host:device ratio used for every host capacity not given explicitly."""
        if self.host_ratio is not None:
            return float(self.host_ratio)
        if self.host_tokens is not None:
            return self.host_tokens / self.device_tokens
        return 2.0

    def _pages(self, tokens: float) -> int:
        return max(1, int(tokens) // self.page_size)

    def device_capacity(self, component: type) -> int:
        """Device pages (Full, SWA) or slots (Mamba)."""
        if component is Full:
            return self.device_tokens // self.page_size
        if component is SWA and self.swa_window is not None:
            return (self.swa_device_tokens or self.device_tokens) // self.page_size
        if component is Mamba and self.mamba:
            return self.mamba_device_slots
        raise ConfigError("components", f"component {component.__name__} is not enabled")

    def host_capacity(self, component: type) -> int:
        """Host pages (Full, SWA) or slots (Mamba)."""
        if component is Full:
            if self.host_tokens is not None:
                return self.host_tokens // self.page_size
            return self._pages(self.ratio * self.device_tokens)
        if component is SWA and self.swa_window is not None:
            if self.swa_host_tokens is not None:
                return self.swa_host_tokens // self.page_size
            return self._pages(self.ratio * (self.swa_device_tokens or self.device_tokens))
        if component is Mamba and self.mamba:
            if self.mamba_host_slots is not None:
                return self.mamba_host_slots
            return max(1, int(self.ratio * self.mamba_device_slots))
        raise ConfigError("components", f"component {component.__name__} is not enabled")

    def to_json(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> CacheConfig:
        """Inverse of `to_json`; unknown keys raise `ConfigError`."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(unknown[0], "unknown config field")
        return cls(**data)  # type: ignore[arg-type]

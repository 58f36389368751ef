"""Shared fixtures for the engine tests: small caches, the reference model, tiny workloads."""

from __future__ import annotations

import pytest
import torch

from unicache.cache import UniCache
from unicache.config import CacheConfig
from unicache.engine.reference import ReferenceModel
from unicache.traces import MultiTurnSpec, Trace, generate_multiturn
from unicache.transfer.base import TransferEngine


def small_config(**overrides: object) -> CacheConfig:
    base: dict[str, object] = {"device_tokens": 64, "page_size": 1, "host_ratio": 4.0, "kv_width": 2,
                               "mamba_width": 3, "dtype": "int32", "device": "cpu", "mamba_device_slots": 8}
    base.update(overrides)
    return CacheConfig(**base)  # type: ignore[arg-type]


def model_for(config: CacheConfig, seed: int = 0) -> ReferenceModel:
    dtype = getattr(torch, config.dtype)
    assert isinstance(dtype, torch.dtype)
    return ReferenceModel(kv_width=config.kv_width, swa_width=config.kv_width, mamba_width=config.mamba_width,
                          dtype=dtype, seed=seed)


def make_cache(engine: TransferEngine | None = None, **overrides: object) -> UniCache:
    return UniCache(small_config(**overrides), engine)


def tiny_trace(seed: int = 0, *, page_size: int = 1, output: int = 2, sessions: int = 6) -> Trace:
    spec = MultiTurnSpec(sessions=sessions, turns=3, system_prompts=2, system_len=(6 * page_size, 12 * page_size),
                         turn_len=(2 * page_size, 5 * page_size), active=3, page_size=page_size, vocab=50,
                         output_tokens=output)
    return generate_multiturn(seed, spec)


@pytest.fixture
def model() -> ReferenceModel:
    return ReferenceModel(kv_width=2, swa_width=2, mamba_width=3)

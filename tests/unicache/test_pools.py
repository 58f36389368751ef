"""PoolSet: tensors per component and tier, row copies, CUDA placement when present."""

from __future__ import annotations

import pytest
import torch

from unicache import SWA, CacheConfig, CopyOp, Full, InvalidArgumentError, Mamba, Tier
from unicache.pools.pools import PoolSet


def test_shapes_copy_and_stats() -> None:
    cfg = CacheConfig(
        device_tokens=8, page_size=2, swa_window=4, mamba=True, mamba_device_slots=2,
        kv_width=3, mamba_width=5, dtype="int32", device="cpu",
    )
    p = PoolSet(cfg)
    assert p.pool(Full, Tier.DEVICE).data.shape == (4, 2, 3)
    assert p.pool(SWA, Tier.HOST).data.shape == (8, 2, 3)
    assert p.pool(Mamba, Tier.HOST).data.shape == (4, 5)
    rows = torch.arange(12, dtype=torch.int32).view(2, 2, 3)
    p.write(Full, Tier.DEVICE, [3, 1], rows)
    p.copy(CopyOp(Full, Tier.DEVICE, Tier.HOST, [1, 3], [0, 7]))
    assert torch.equal(p.read(Full, Tier.HOST, [7, 0]), rows)
    with pytest.raises(InvalidArgumentError):
        p.write(Full, Tier.DEVICE, [0], rows)
    stats = p.stats()
    assert set(stats) == {
        "full.device", "full.host", "swa.device", "swa.host", "mamba.device", "mamba.host"
    }
    assert stats["mamba.host"].capacity == 4


def test_component_not_enabled() -> None:
    p = PoolSet(CacheConfig(device_tokens=4, device="cpu"))
    with pytest.raises(InvalidArgumentError):
        p.pool(Mamba, Tier.DEVICE)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_placement_and_async_copy() -> None:
    cfg = CacheConfig(device_tokens=8, page_size=2, kv_width=3, dtype="int32")
    p = PoolSet(cfg)
    assert p.pool(Full, Tier.DEVICE).data.is_cuda
    assert p.pool(Full, Tier.HOST).data.is_pinned()
    rows = torch.arange(12, dtype=torch.int32).view(2, 2, 3)
    p.write(Full, Tier.HOST, [5, 6], rows)
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    fin = p.copy_async(CopyOp(Full, Tier.HOST, Tier.DEVICE, [5, 6], [0, 1]), stream)
    stream.synchronize()
    fin()
    back = p.copy_async(CopyOp(Full, Tier.DEVICE, Tier.HOST, [1, 0], [2, 3]), stream)
    stream.synchronize()
    back()
    assert torch.equal(p.read(Full, Tier.HOST, [3, 2]), rows)

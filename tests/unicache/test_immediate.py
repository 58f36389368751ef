"""ImmediateEngine: copies at submit, acks on the next poll; the transfer records."""

from __future__ import annotations

import torch

from unicache import Ack, CacheConfig, CopyOp, Full, ImmediateEngine, JobKind, Tier, TransferJob
from unicache.pools.pools import PoolSet


def test_copy_now_ack_on_poll() -> None:
    pools = PoolSet(CacheConfig(device_tokens=4, kv_width=2, dtype="int32", device="cpu"))
    e = ImmediateEngine()
    e.attach(pools)
    pools.write(Full, Tier.HOST, [1], torch.tensor([[[7, 8]]], dtype=torch.int32))
    job = TransferJob(3, 0, JobKind.LOAD_BACK, (CopyOp(Full, Tier.HOST, Tier.DEVICE, [1], [2]),))
    e.submit(job)
    assert e.pending == 1
    assert torch.equal(pools.read(Full, Tier.DEVICE, [2]), torch.tensor([[[7, 8]]], dtype=torch.int32))
    assert e.poll() == [Ack(3, 0)] and e.poll() == [] and e.pending == 0
    assert job.ack(False, "x") == Ack(3, 0, False, "x")
    assert "ticket=3" in repr(job) and job.copies[0].to_json()["dst"] == [2]


def test_no_copy_mode_moves_no_bytes() -> None:
    pools = PoolSet(CacheConfig(device_tokens=4, kv_width=2, dtype="int32", device="cpu"))
    e = ImmediateEngine(copy=False)
    e.attach(pools)
    pools.write(Full, Tier.HOST, [0], torch.tensor([[[7, 8]]], dtype=torch.int32))
    e.submit(TransferJob(1, 0, JobKind.LOAD_BACK, (CopyOp(Full, Tier.HOST, Tier.DEVICE, [0], [0]),)))
    assert pools.read(Full, Tier.DEVICE, [0]).sum().item() == 0
    assert e.poll() == [Ack(1, 0)]

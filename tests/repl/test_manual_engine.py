"""`ManualEngine`: jobs wait for `complete`, which copies then (reading the source then)."""

from __future__ import annotations

import pytest
import torch

from unicache import CacheConfig, Full, Tier
from unicache.cache import UniCache
from unicache.repl.errors import NoSuchJobError
from unicache.repl.manual_engine import ManualEngine
from unicache.transfer.base import Ack, CopyOp, JobKind, TransferJob


@pytest.fixture
def engine() -> ManualEngine:
    cache = UniCache(CacheConfig(device_tokens=8, kv_width=2, device="cpu"), ManualEngine())
    assert isinstance(cache.engine, ManualEngine)
    return cache.engine


def _job(ticket: int, src: list[int], dst: list[int]) -> TransferJob:
    return TransferJob(ticket, 0, JobKind.BACKUP, (CopyOp(Full, Tier.DEVICE, Tier.HOST, src, dst),))


def _rows(value: float, n: int = 1) -> torch.Tensor:
    return torch.full((n, 1, 2), value)


def test_copy_reads_the_source_at_completion(engine: ManualEngine) -> None:
    pools = engine.pools
    assert pools is not None
    pools.write(Full, Tier.DEVICE, [3], _rows(1.0))
    engine.submit(_job(1, [3], [5]))
    assert engine.pending == 1 and engine.poll() == []
    assert torch.equal(pools.read(Full, Tier.HOST, [5]), _rows(0.0))
    pools.write(Full, Tier.DEVICE, [3], _rows(9.0))
    ack = engine.take(1)
    assert ack == Ack(1, 0, True, "")
    assert torch.equal(pools.read(Full, Tier.HOST, [5]), _rows(9.0))
    assert engine.pending == 0 and engine.jobs == {}


def test_failed_completion_copies_nothing(engine: ManualEngine) -> None:
    pools = engine.pools
    assert pools is not None
    pools.write(Full, Tier.DEVICE, [0], _rows(4.0))
    engine.submit(_job(2, [0], [1]))
    ack = engine.take(2, ok=False, detail="dma error")
    assert (ack.ok, ack.detail) == (False, "dma error")
    assert torch.equal(pools.read(Full, Tier.HOST, [1]), _rows(0.0))


def test_withhold_keeps_a_job_from_flush_and_next_ready(engine: ManualEngine) -> None:
    for t in (1, 2, 3):
        engine.submit(_job(t, [t], [t]))
    engine.withhold(1)
    assert engine.next_ready() == 2
    assert engine.describe_jobs() == [(1, 0, "backup", True), (2, 0, "backup", False), (3, 0, "backup", False)]
    engine.flush([1, 2])
    assert [a.ticket for a in engine.poll()] == [2] and engine.take_flushed() == [2]
    engine.flush()
    assert [a.ticket for a in engine.poll()] == [3]
    assert engine.held() == [1] and engine.pending == 1
    engine.release(1)
    assert engine.next_ready() == 1 and not engine.is_withheld(1)
    assert engine.complete(1).ticket == 1
    assert [a.ticket for a in engine.poll()] == [1], "complete queues the ack for the next poll"


def test_misuse_names_the_ticket(engine: ManualEngine) -> None:
    engine.submit(_job(4, [0], [0]))
    with pytest.raises(ValueError, match="ticket 4"):
        engine.submit(_job(4, [1], [1]))
    with pytest.raises(NoSuchJobError, match="ticket 9"):
        engine.complete(9)
    with pytest.raises(NoSuchJobError, match="ticket 9"):
        engine.withhold(9)
    with pytest.raises(NoSuchJobError, match="ticket 4: is not withheld"):
        engine.release(4)
    engine.complete(4)
    with pytest.raises(NoSuchJobError, match="already acked"):
        engine.complete(4)

"""`ThreadedEngine`: copies on worker threads, acks through the cache's Mailbox, byte-exact, clean shutdown."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from unicache import CacheConfig, Full, UniCache
from unicache.engine.replay import ReplayOptions, build_replay, finish_checks, load_replay_trace, run_replay
from unicache.engine.transfers import bind_transfer, make_transfer
from unicache.errors import EngineStateError, InvalidArgumentError
from unicache.transfer.base import CopyOp, JobKind, Tier, TransferJob
from unicache.transfer.simulated import FaultSpec
from unicache.transfer.threaded import ThreadedEngine
from tests.unicache.support import residency


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("unicache-transfer")]


@pytest.mark.parametrize(("components", "policy"), [
    (("full",), "write_back"), (("full", "mamba"), "write_through"), (("full", "swa", "mamba"), "write_back"),
])
def test_a_replay_on_worker_threads_is_byte_exact_and_never_touches_a_lease_off_thread(
        tmp_path: Path, components: tuple[str, ...], policy: str) -> None:
    opts = ReplayOptions(requests=120, tokens_per_block=8, crash_dir=tmp_path, components=components,
                         write_policy=policy, transfer="threaded", check_every=5)  # type: ignore[arg-type]
    sched = build_replay(opts, load_replay_trace(opts), timeline=False)
    cache = sched.cache
    engine = cache.engine
    assert isinstance(engine, ThreadedEngine)
    while not sched.done:
        sched.step()
    finish_checks(sched)
    engine.close()
    assert engine.completed > 0 and engine.failed == 0
    assert engine.copy_threads and threading.get_ident() not in engine.copy_threads
    assert cache.ledger.owner_thread == threading.get_ident()
    assert cache.ledger.live() == [] and cache.ledger.leaked == 0
    assert sched.stats.verified_tokens > 0 and cache.counters.load_backs + cache.counters.backups > 0
    assert not _workers()


def test_run_replay_with_threaded_transfer_reports_healthy(tmp_path: Path) -> None:
    report = run_replay(ReplayOptions(requests=80, tokens_per_block=8, crash_dir=tmp_path, transfer="threaded"))
    assert (report["errors"], report["corruptions"], report["leaked_leases"]) == (0, 0, 0)
    assert not _workers()


def _cache(engine: ThreadedEngine) -> UniCache:
    config = CacheConfig(device_tokens=16, host_tokens=32, dtype="int32", device="cpu", kv_width=4,
                         write_policy="write_through")
    cache = UniCache(config, engine)
    bind_transfer(cache)
    return cache


def test_backups_move_the_exact_bytes_and_ack_through_the_inbox() -> None:
    engine = ThreadedEngine(workers=3)
    cache = _cache(engine)
    pages = cache.alloc_device(Full, 8)
    assert pages is not None
    rows = torch.arange(8 * 4, dtype=torch.int32).reshape(8, 1, 4) * 7 + 1
    cache.write_slots(Full, pages, rows)
    cache.insert(list(range(100, 108)), pages)
    engine.flush()
    assert engine.pending == 0 and len(cache.inbox) >= 1
    done = cache.poll()
    assert done and all(c.status.value == "done" for c in done)
    (node,) = [x for x in cache.nodes() if x.parent is not None]
    host = residency(node).full_host
    assert host is not None
    assert torch.equal(cache.read_slots(Full, host, Tier.HOST), rows)
    assert cache.sanity_check().ok
    engine.close()


def test_a_copy_that_raises_acks_not_ok_and_shutdown_is_clean() -> None:
    engine = ThreadedEngine(workers=2)
    _cache(engine)
    bad = TransferJob(999, 0, JobKind.BACKUP, (CopyOp(Full, Tier.DEVICE, Tier.HOST, [0], [10**6]),))
    engine.submit(bad)
    engine.flush([999])
    (ack,) = engine.poll()
    assert (ack.ticket, ack.generation, ack.ok) == (999, 0, False)
    assert "copy failed on unicache-transfer" in ack.detail and "10000" in ack.detail
    assert engine.failed == 1
    engine.close()
    engine.close()
    assert not _workers()
    with pytest.raises(EngineStateError, match="after close"):
        engine.submit(bad)


def test_submit_before_bind_is_refused() -> None:
    engine = ThreadedEngine()
    config = CacheConfig(device_tokens=8, dtype="int32", device="cpu", kv_width=4)
    UniCache(config, engine)
    with pytest.raises(EngineStateError, match="bind"):
        engine.submit(TransferJob(1, 0, JobKind.BACKUP, ()))
    engine.close()
    with pytest.raises(InvalidArgumentError, match="workers"):
        ThreadedEngine(workers=0)
    assert isinstance(make_transfer("threaded", faults=FaultSpec(), seed=0), ThreadedEngine)

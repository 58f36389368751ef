"""The simulated engine: seeded delays, reordering, duplicate acks, failed copies, copy at completion."""

from __future__ import annotations

import pytest
import torch

from unicache.markers import Full
from unicache.pools.pools import PoolSet
from unicache.transfer.base import Ack, CopyOp, JobKind, Tier, TransferJob
from unicache.transfer.simulated import POISON, FaultSpec, FaultSpecError, SimulatedEngine

from .conftest import small_config


def setup(faults: FaultSpec, seed: int = 0) -> tuple[SimulatedEngine, PoolSet]:
    pools = PoolSet(small_config())
    engine = SimulatedEngine(faults, seed=seed)
    engine.attach(pools)
    return engine, pools


def job(ticket: int, src: list[int], dst: list[int]) -> TransferJob:
    return TransferJob(ticket, 0, JobKind.BACKUP, (CopyOp(Full, Tier.DEVICE, Tier.HOST, src, dst),))


def fill(pools: PoolSet, slots: list[int], value: int) -> None:
    pools.write(Full, Tier.DEVICE, slots, torch.full((len(slots), 1, 2), value, dtype=torch.int32))


def drain(engine: SimulatedEngine, steps: int) -> list[Ack]:
    out: list[Ack] = []
    for _ in range(steps):
        engine.tick()
        out.extend(engine.poll())
    return out


def test_no_faults_acks_next_step_in_order() -> None:
    engine, _ = setup(FaultSpec())
    for t in range(1, 6):
        engine.submit(job(t, [t], [t]))
    assert engine.poll() == [] and engine.pending == 5
    engine.tick()
    assert [a.ticket for a in engine.poll()] == [1, 2, 3, 4, 5]
    assert engine.pending == 0


def test_copy_reads_the_source_at_completion_time() -> None:
    engine, pools = setup(FaultSpec(delay=True, mean_delay=4.0, max_delay=6))
    fill(pools, [0], 11)
    engine.submit(job(1, [0], [7]))
    fill(pools, [0], 22)  # overwritten while the copy is in flight
    acks = drain(engine, 6)
    assert [a.ticket for a in acks] == [1] and acks[0].ok
    assert pools.read(Full, Tier.HOST, [7]).flatten().tolist() == [22, 22]


def test_delay_spreads_completions_and_respects_the_maximum() -> None:
    engine, _ = setup(FaultSpec(delay=True, mean_delay=3.0, max_delay=5), seed=4)
    for t in range(1, 41):
        engine.submit(job(t, [t % 8], [t % 8]))
    seen: dict[int, int] = {}
    for step in range(1, 8):
        engine.tick()
        for a in engine.poll():
            seen[a.ticket] = step
    assert sorted(seen) == list(range(1, 41))
    assert max(seen.values()) <= 5 and len(set(seen.values())) > 1
    order = [t for t, _ in sorted(seen.items(), key=lambda kv: kv[1])]
    assert order == sorted(order)  # without reorder, completions keep submission order


def test_reorder_changes_the_ack_order() -> None:
    engine, _ = setup(FaultSpec(delay=True, reorder=True), seed=1)
    for t in range(1, 31):
        engine.submit(job(t, [t % 8], [t % 8]))
    acks = [a.ticket for a in drain(engine, 13)]
    assert sorted(acks) == list(range(1, 31)) and acks != sorted(acks)


def test_duplicate_acks_arrive_again_later() -> None:
    engine, _ = setup(FaultSpec(duplicate=True, duplicate_rate=1.0))
    engine.submit(job(1, [0], [0]))
    acks = drain(engine, 4)
    assert [a.ticket for a in acks] == [1, 1] and engine.duplicated == 1


def test_failed_copy_acks_not_ok_and_poisons_what_it_did_not_copy() -> None:
    engine, pools = setup(FaultSpec(fail=True, fail_rate=1.0), seed=2)
    fill(pools, [0, 1, 2, 3], 5)
    ops = tuple(CopyOp(Full, Tier.DEVICE, Tier.HOST, [i], [10 + i]) for i in range(4))
    engine.submit(TransferJob(9, 3, JobKind.LOAD_BACK, ops))
    (ack,) = drain(engine, 1)
    assert (ack.ticket, ack.generation, ack.ok) == (9, 3, False)
    rows = pools.read(Full, Tier.HOST, [10, 11, 12, 13])[:, 0, 0].tolist()
    assert set(rows) <= {5, POISON} and POISON in rows
    assert engine.failed == 1


def test_flush_completes_only_the_named_jobs() -> None:
    engine, _ = setup(FaultSpec(delay=True, mean_delay=5.0, max_delay=10), seed=7)
    for t in (1, 2, 3):
        engine.submit(job(t, [t], [t]))
    engine.flush([2])
    assert [a.ticket for a in engine.poll()] == [2]
    engine.flush()
    assert sorted(a.ticket for a in engine.poll()) == [1, 3]
    assert engine.pending == 0


def test_same_seed_same_schedule() -> None:
    def run(seed: int) -> list[tuple[int, bool]]:
        engine, _ = setup(FaultSpec(delay=True, reorder=True, duplicate=True, fail=True, fail_rate=0.3), seed)
        for t in range(1, 25):
            engine.submit(job(t, [t % 8], [t % 8]))
        return [(a.ticket, a.ok) for a in drain(engine, 20)]

    assert run(5) == run(5) and run(5) != run(6)


def test_fault_parsing() -> None:
    spec = FaultSpec.parse(["delay", " Reorder ", "none"])
    assert spec.kinds == ("delay", "reorder")
    with pytest.raises(FaultSpecError, match="unknown fault kind 'drop'"):
        FaultSpec.parse(["drop"])
    with pytest.raises(FaultSpecError, match="fail_rate"):
        FaultSpec(fail_rate=2.0)


def test_describe_jobs_lists_pending_work() -> None:
    engine, _ = setup(FaultSpec(delay=True, max_delay=10, mean_delay=8.0))
    engine.submit(job(4, [1], [1]))
    assert engine.describe_jobs() == [(4, 0, "backup", False)]

"""Scheduler observers see every cache operation the loop performs, in order, with matching ids."""

from __future__ import annotations

from unicache.engine.config import EngineConfig
from unicache.engine.observer import SchedulerObserver
from unicache.engine.oplog import OpLog, OpLogObserver
from unicache.engine.scheduler import Scheduler
from unicache.transfer.simulated import FaultSpec, SimulatedEngine
from unicache.tree.node import Node

from .conftest import make_cache, model_for, tiny_trace


class Recorder(SchedulerObserver):
    """Keeps the receipts and load-back leases it was told about, and checks each ends once."""

    def __init__(self) -> None:
        self.locked: dict[int, tuple[int, ...]] = {}
        self.load_back_leases: set[int] = set()
        self.events: list[str] = []

    def on_match(self, tokens: tuple[int, ...]) -> None:
        self.events.append("match")

    def on_load_back(self, anchor: Node, ticket: int, lease_ids: tuple[int, ...]) -> None:
        assert lease_ids and not (set(lease_ids) & self.load_back_leases)
        self.load_back_leases.update(lease_ids)
        self.events.append("load_back")

    def on_load_back_end(self, lease_ids: tuple[int, ...]) -> None:
        assert set(lease_ids) <= self.load_back_leases
        self.load_back_leases.difference_update(lease_ids)

    def on_lock(self, node: Node, receipt: int, lease_ids: tuple[int, ...]) -> None:
        assert receipt not in self.locked
        self.locked[receipt] = lease_ids
        self.events.append("lock")

    def on_unlock(self, receipt: int, lease_ids: tuple[int, ...]) -> None:
        assert self.locked.pop(receipt) == lease_ids
        self.events.append("unlock")

    def on_insert(self, tokens: tuple[int, ...], start: int) -> None:
        assert 0 <= start <= len(tokens)
        self.events.append("insert")


def test_observers_see_every_operation_and_every_end() -> None:
    cache = make_cache(SimulatedEngine(FaultSpec(delay=True, reorder=True), seed=2), device_tokens=48,
                       mamba=True)
    sched = Scheduler(cache, tiny_trace(3, sessions=10).requests, model=model_for(cache.config),
                      config=EngineConfig(max_running=4, decode_per_step=1, check_every=1))
    recorder = Recorder()
    log = OpLog(cache.config)
    sched.observe(recorder)
    sched.observe(OpLogObserver(log))
    while not sched.done:
        sched.step()
    sched.drain()
    assert sched.stats.finished == sched.total
    assert recorder.locked == {} and recorder.load_back_leases == set()
    assert sched.pins.lock_leases == set() and sched.pins.load_back_leases == set()
    assert recorder.events.count("match") == sum(1 for op in log.ops if op[0] == "match")
    assert [op[0] for op in log.ops if op[0] != "ack"] == recorder.events
    assert recorder.events.count("lock") == recorder.events.count("unlock") > 0
    assert sched.stats.load_backs_started == recorder.events.count("load_back") > 0

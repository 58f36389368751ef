"""Scenario 9: randomized operation sequences with the sanity check and the byte oracle after every step.

`UNICACHE_SM_EXAMPLES` / `UNICACHE_SM_STEPS` raise the budget (defaults keep
the whole module around a minute); `--slow` multiplies it by 10.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.unicache.support import Driver, ManualEngine
from unicache import (
    SWA,
    Ack,
    CacheConfig,
    Full,
    JobKind,
    LoadBackTicket,
    LockReceipt,
    Mamba,
    TicketStatus,
    UniCache,
)

EXAMPLES = int(os.environ.get("UNICACHE_SM_EXAMPLES", "40"))
STEPS = int(os.environ.get("UNICACHE_SM_STEPS", "30"))

CONFIGS = {
    "full": {},
    "full+mamba": {"mamba": True},
    "full+swa": {"swa": True},
    "full+swa+mamba": {"swa": True, "mamba": True},
}


def make_machine(name: str, page_size: int, policy: str) -> type[RuleBasedStateMachine]:
    kind = CONFIGS[name]
    ps = page_size
    prefixes = [[(b * 37 + i) % 97 for i in range(6 * ps)] for b in range(3)]

    class CacheMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            config = CacheConfig(
                device_tokens=20 * ps,
                host_tokens=40 * ps,
                page_size=ps,
                swa_window=(3 * ps if ps > 1 else 5) if kind.get("swa") else None,
                mamba=bool(kind.get("mamba")),
                mamba_device_slots=4,
                mamba_host_slots=8 if kind.get("mamba") else None,
                write_policy=policy,  # type: ignore[arg-type]
                dtype="int32",
                device="cpu",
                kv_width=2,
                mamba_width=2,
            )
            self.cache = UniCache(config, ManualEngine())
            self.driver = Driver(self.cache)
            self.engine = self.driver.engine
            self.held: list[LockReceipt] = []
            self.open_tickets: list[LoadBackTicket] = []
            self.delivered: list[Ack] = []

        def seq(self, base: int, cut: int, tail: list[int]) -> list[int]:
            toks = prefixes[base][: cut * ps] + tail
            return toks[: len(toks) - len(toks) % ps]

        sequences = st.builds(
            lambda b, c, t: (b, c, t),
            st.integers(0, 2),
            st.integers(0, 6),
            st.lists(st.integers(0, 96), max_size=3 * ps),
        )

        @rule(s=sequences)
        def serve(self, s: tuple[int, int, list[int]]) -> None:
            toks = self.seq(*s)
            self.driver.serve(toks)

        @rule(s=sequences, evict=st.integers(0, 8), fail=st.integers(0, 4))
        def serve_with_load_back(
            self, s: tuple[int, int, list[int]], evict: int, fail: int
        ) -> None:
            """The engine's flow: evict pressure, match, load back, wait for the ack, serve."""
            toks = self.seq(*s)
            cache = self.cache
            for tid, job in list(self.engine.jobs.items()):
                if job.kind is JobKind.BACKUP:
                    self.delivered.append(self.engine.complete(tid))
            if evict:
                cache.evict_device(Full, evict)
            m = cache.match_prefix(toks)
            if m.worth_load_back:
                t = cache.load_back(m.anchor)
                if t is not None:
                    self.engine.complete(t.id, ok=fail != 0)
                    cache.poll()
                    res = t.result()
                    assert res.status is (TicketStatus.DONE if fail else TicketStatus.FAILED)
                    m = cache.match_prefix(toks)
            r = cache.lock(m.device_node)
            try:
                self.driver.compute(toks, r.length)
            finally:
                cache.unlock(r)

        @rule(s=sequences, roll=st.integers(0, 3))
        def serve_across_reset(self, s: tuple[int, int, list[int]], roll: int) -> None:
            """A request locked before a reset inserts after it: its prefix is gone."""
            toks = self.seq(*s)
            cache = self.cache
            m = cache.match_prefix(toks)
            r = cache.lock(m.device_node)
            reset = roll == 3
            if reset:
                cache.reset()
            try:
                res = self.driver.compute(toks, r.length)
                if reset and res is not None and r.length:
                    assert res.prefix_missing
            finally:
                cache.unlock(r)

        @rule(s=sequences)
        def serve_unfinished(self, s: tuple[int, int, list[int]]) -> None:
            toks = self.seq(*s)
            cache = self.cache
            m = cache.match_prefix(toks)
            r = cache.lock(m.device_node)
            try:
                self.driver.compute(toks, r.length, donate=False)
            finally:
                cache.unlock(r)

        @rule(s=sequences)
        def lock(self, s: tuple[int, int, list[int]]) -> None:
            m = self.cache.match_prefix(self.seq(*s))
            self.held.append(self.cache.lock(m.device_node))

        @precondition(lambda self: bool(self.held))
        @rule(i=st.integers(0, 50))
        def unlock(self, i: int) -> None:
            self.cache.unlock(self.held.pop(i % len(self.held)))

        @rule(s=sequences)
        def load_back(self, s: tuple[int, int, list[int]]) -> None:
            m = self.cache.match_prefix(self.seq(*s))
            if not m.needs_load_back:
                return
            t = self.cache.load_back(m.anchor)
            if t is not None:
                self.open_tickets.append(t)

        @precondition(lambda self: bool(self.open_tickets))
        @rule(i=st.integers(0, 50), abandon=st.booleans())
        def finish(self, i: int, abandon: bool) -> None:
            t = self.open_tickets.pop(i % len(self.open_tickets))
            if t.status is TicketStatus.IN_FLIGHT or abandon:
                t.abandon()
                return
            res = t.result()
            if res.ok and res.anchor.alive:
                m = self.cache.match_prefix(res.anchor.tokens())
                assert m.anchor_len >= res.anchor.end or m.anchor is res.anchor

        @precondition(lambda self: bool(self.engine.jobs))
        @rule(i=st.integers(0, 50), ok=st.booleans(), deliver=st.booleans())
        def complete(self, i: int, ok: bool, deliver: bool) -> None:
            held = self.engine.held()
            ticket = held[i % len(held)]
            ack = self.engine.complete(ticket, ok or i % 5 != 0)
            self.delivered.append(ack)
            if deliver:
                self.cache.poll()

        @rule()
        def poll(self) -> None:
            self.cache.poll()

        @precondition(lambda self: bool(self.delivered))
        @rule(i=st.integers(0, 50))
        def duplicate_ack(self, i: int) -> None:
            self.cache.poll()
            ack = self.delivered[i % len(self.delivered)]
            assert self.cache.deliver(ack) is None

        @rule(s=sequences)
        def backup(self, s: tuple[int, int, list[int]]) -> None:
            m = self.cache.match_prefix(self.seq(*s))
            self.cache.backup(m.device_node)

        @rule(comp=st.sampled_from([Full, SWA, Mamba]), n=st.integers(1, 12))
        def evict_device(self, comp: type, n: int) -> None:
            if comp in self.cache.config.components:
                self.cache.evict_device(comp, n)

        @rule(comp=st.sampled_from([Full, SWA, Mamba]), n=st.integers(1, 12))
        def evict_host(self, comp: type, n: int) -> None:
            if comp in self.cache.config.components:
                self.cache.evict_host(comp, n)

        @rule(n=st.integers(1, 12))
        def reclaim(self, n: int) -> None:
            self.cache.reclaim_host_duplicates(n)

        @rule(roll=st.integers(0, 5))
        def reset(self, roll: int) -> None:
            if roll == 5:
                self.cache.reset()

        @invariant()
        def sane(self) -> None:
            report = self.cache.sanity_check()
            assert report.ok, report.describe()
            errors = self.driver.oracle.check(self.cache)
            assert not errors, "\n".join(errors)
            led = self.cache.ledger
            assert led.leaked == 0
            assert led.acquired == led.live_count + led.released + led.revoked

        def teardown(self) -> None:
            self.engine.complete_all()
            self.cache.poll()
            while self.held:
                self.cache.unlock(self.held.pop())
            while self.open_tickets:
                self.open_tickets.pop().abandon()
            assert self.cache.ledger.live() == []
            assert self.cache.in_flight() == 0
            assert all(s.quarantined == 0 for s in self.cache.pools.stats().values())
            report = self.cache.sanity_check()
            assert report.ok, report.describe()

    CacheMachine.__name__ = f"CacheMachine_{name.replace('+', '_')}_ps{ps}_{policy}"
    return CacheMachine


def _runner(
    name: str, page_size: int, policy: str, request: pytest.FixtureRequest
) -> Callable[[], None]:
    scale = 10 if request.config.getoption("--slow") else 1
    machine = make_machine(name, page_size, policy)
    return lambda: run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES * scale,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            derandomize=settings().derandomize and scale == 1,  # the profile decides; --slow explores
        ),
    )


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_state_machine(name: str, page_size: int, request: pytest.FixtureRequest) -> None:
    policy = "write_back" if (list(CONFIGS).index(name) + page_size) % 2 else "write_through"
    _runner(name, page_size, policy, request)()

"""One server launch per tree core, the whole serving scenario, its figures kept for the tests.

Per launch, in order: a prompt, then the same prefix with a new ending (a
device-tier hit of exactly the shared prefix); prompts enough to overflow
the device pool, then the first prompt again (a host-tier hit: HiCache loads
it back); on tree core ``unicache``, SIGUSR1 to the scheduler process, one
request (a safe point), the live dump polled for, one more request, the REPL
on the dump (`take_live_dump`); ``/flush_cache`` (the reset report's first
line); a window of the bundled Mooncake trace sent with several requests in
flight; ``/flush_cache`` again (the second line); ``/metrics`` scraped until
it shows the core at rest (`metrics_at_rest`: every launch runs with
``--enable-metrics``), kept as ``metrics-<core>.txt`` in the launch's
directory; SIGTERM. `ServerRuns` launches each core at most
once per test module and hands every test the same `CoreRun` (or the error
the launch ended with), so the cross-core comparison reads the same runs.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from tests.integrations.sglang.server.client import (
    NO_HITS,
    Hits,
    flush_cache,
    generate,
    generate_concurrently,
)
from tests.integrations.sglang.server.launch import ServerConfig, SGLangServer
from tests.integrations.sglang.server.model import BYTE_TOKENS
from tests.integrations.sglang.server.observe import (
    Polled,
    Samples,
    lease_metric_problems,
    poll_metrics,
    repl_on_dump,
    scheduler_process,
    wait_for_dump,
)
from unicache.traces import load_mooncake

PROMPT_TOKENS: Final = 463
SHARED_PREFIX: Final = 447
FILLERS: Final = 12
FILLER_TOKENS: Final = 460
MAX_TOTAL_TOKENS: Final = 4096
MAX_NEW_TOKENS: Final = 2

TRACE_START: Final = 5500
TRACE_COUNT: Final = 120
TRACE_TOKENS_PER_BLOCK: Final = 8
IN_FLIGHT: Final = 4

CACHE_TYPES: Final = {"rust": "RustUnifiedTreeCore", "leases": "LeaseTreeCore", "unicache": "UnicacheTreeCore"}
LEDGERS: Final[dict[str, dict[str, bool]]] = {
    "rust": {},
    "leases": {"sglang-tree-locks": True, "sglang-tree-core": False},
    "unicache": {"sglang tree core 'unicache'": True},
}
"""Per tree core, the ledgers whose lease metrics it registers and whether serving acquires leases in them.
``leases``: tree locks, and load-back pins, which it takes under write-back only (SGLang's default
policy here is write-through, so that ledger stays at 0)."""
FLUSHES: Final = 2
EPOCHS: Final[dict[str, dict[str, int]]] = {"unicache": {"sglang tree core 'unicache'": 1 + FLUSHES}}
"""Ledger epochs once served: tree core ``unicache`` advances its epoch at every reset (the cache's
construction, each flush), so its scrape at that epoch is one taken after the last flush."""
SGLANG_REQUESTS: Final = "sglang:num_requests_total"
"""SGLang's own counter of requests served (the tokenizer manager's), next to ours in ``/metrics``."""
LIVE_DUMP_CORES: Final = ("unicache",)
"""The cores with a live dump on SIGUSR1 (``leases`` has none: docs/sglang.md, "Metrics and live dumps")."""
REPL_SCRIPT: Final = "stats\nleases\ncheck\ntree --depth 1\n"

FIGURES: Final = pytest.StashKey[dict[str, list[dict[str, object]]]]()
"""Where the test module leaves every launch's `CoreRun.figures`, by model, for the terminal summary."""


def byte_prompt(seed: int, length: int) -> list[int]:
    """`length` pseudo-random byte tokens, a pure function of `seed`."""
    rng = random.Random(seed)
    return [rng.randrange(BYTE_TOKENS) for _ in range(length)]


def shared_prefix_prompts() -> tuple[list[int], list[int]]:
    """The first prompt and its sibling: the first `SHARED_PREFIX` tokens equal, then they differ."""
    first = byte_prompt(0, PROMPT_TOKENS)
    ending = byte_prompt(1, PROMPT_TOKENS - SHARED_PREFIX)
    ending[0] = (first[SHARED_PREFIX] + 1) % BYTE_TOKENS
    return first, first[:SHARED_PREFIX] + ending


def filler_prompts() -> list[list[int]]:
    """`FILLERS` unrelated prompts, together larger than the device pool."""
    return [byte_prompt(100 + i, FILLER_TOKENS) for i in range(FILLERS)]


def trace_prompts() -> list[list[int]]:
    """The Mooncake window as byte tokens: each block id's tokens taken mod 256 (equal ids, equal tokens)."""
    trace = load_mooncake(tokens_per_block=TRACE_TOKENS_PER_BLOCK, start=TRACE_START, count=TRACE_COUNT)
    return [[t % BYTE_TOKENS for t in req.tokens] for req in trace.requests]


@dataclass(slots=True)
class LiveDumpSeen:
    """The live dump of one launch: whom SIGUSR1 went to, the file, the log line, serving after, the REPL's answers."""

    scheduler_pid: int
    scheduler_title: str
    path: Path | None
    logged: bool
    served_after: Hits | None
    repl: dict[str, dict[str, object]]
    waited_s: float

    @property
    def requests(self) -> int:
        """The requests `take_live_dump` sent: one after the signal, one after the dump when there was one."""
        return 1 if self.path is None else 2


@dataclass(slots=True)
class CoreRun:
    """What one launch with one tree core saw."""

    core: str
    sibling: Hits
    first_again: Hits
    trace: list[Hits]
    reports: list[dict[str, object]]
    returncode: int
    processes_left: list[str]
    log: str
    ready_s: float
    served_s: float
    metrics: Polled
    live_dump: LiveDumpSeen | None
    sent: int

    def figures(self) -> dict[str, object]:
        """The hit figures and timings, for the record (`ServerRuns.summary`)."""
        return {"core": self.core, "sibling": self.sibling, "first_again": self.first_again,
                "trace": self.trace_hits, "requests": len(self.trace),
                "ready_s": round(self.ready_s, 1), "served_s": round(self.served_s, 1),
                "metrics": {"scrapes": self.metrics.scrapes, "waited_s": round(self.metrics.waited_s, 1),
                            "ready": self.metrics.ready, "ours": sorted(f for f in self.metrics.samples.families
                                                                        if f.startswith("unicache_")),
                            "sglang": len([f for f in self.metrics.samples.families if f.startswith("sglang:")])},
                "live_dump": None if self.live_dump is None else {
                    "path": str(self.live_dump.path), "waited_s": round(self.live_dump.waited_s, 1)}}

    def per_request(self) -> list[tuple[int, int]]:
        """(device, host) hits of each trace request, in trace order."""
        return [(h.device, h.host) for h in self.trace]

    @property
    def trace_hits(self) -> Hits:
        total = NO_HITS
        for hits in self.trace:
            total = total + hits
        return total


def run_core(core: str, model: Path, workdir: Path, *, on_cpu: bool, extra_args: tuple[str, ...] = ()) -> CoreRun:
    """Launch the server with tree core `core`, run the scenario, stop it; what it saw."""
    config = ServerConfig(core=core, model=model, workdir=workdir, on_cpu=on_cpu,
                          max_total_tokens=MAX_TOTAL_TOKENS, extra_args=extra_args)
    server = SGLangServer(config)
    first, sibling = shared_prefix_prompts()
    try:
        started = time.monotonic()
        server.start()
        ready = time.monotonic()
        url = server.url
        generate(url, first, max_new_tokens=MAX_NEW_TOKENS, rid="first")
        sibling_hits = generate(url, sibling, max_new_tokens=MAX_NEW_TOKENS, rid="sibling")
        for i, prompt in enumerate(filler_prompts()):
            generate(url, prompt, max_new_tokens=MAX_NEW_TOKENS, rid=f"filler-{i}")
        first_again = generate(url, first, max_new_tokens=MAX_NEW_TOKENS, rid="first-again")
        live_dump = take_live_dump(server, sibling) if core in LIVE_DUMP_CORES else None
        flush_cache(url)
        trace = generate_concurrently(url, trace_prompts(), in_flight=IN_FLIGHT,
                                      max_new_tokens=MAX_NEW_TOKENS, prefix="trace")
        flush_cache(url)
        served = time.monotonic()
        sent = 2 + FILLERS + 1 + len(trace) + (0 if live_dump is None else live_dump.requests)
        metrics = poll_metrics(url, lambda samples: metrics_at_rest(samples, core, sent))
        (workdir / f"metrics-{core}.txt").write_text(metrics.samples.text)
        returncode = server.stop()
        left = server.processes_left()
    finally:
        server.kill()
    reports = [json.loads(line) for line in config.report.read_text().splitlines()] if config.report.exists() else []
    return CoreRun(core=core, sibling=sibling_hits, first_again=first_again, trace=trace, reports=reports,
                   returncode=returncode, processes_left=left, log=server.log_text(),
                   ready_s=ready - started, served_s=served - ready, metrics=metrics, live_dump=live_dump, sent=sent)


def metrics_at_rest(samples: Samples, core: str, sent: int) -> bool:
    """Whether a scrape shows SGLang's own count of requests at `sent` and, for our cores, the lease metrics at rest."""
    ours = lease_metric_problems(samples, CACHE_TYPES[core], LEDGERS[core], EPOCHS.get(core, {})) \
        if LEDGERS[core] else []
    return samples.total(SGLANG_REQUESTS) == sent and not ours


def take_live_dump(server: SGLangServer, prompt: list[int]) -> LiveDumpSeen:
    """SIGUSR1 to the scheduler, one request (a safe point), the dump polled for, one more request, the REPL on it."""
    pid, title = scheduler_process(server.pid)
    started = time.monotonic()
    os.kill(pid, signal.SIGUSR1)
    generate(server.url, prompt, max_new_tokens=MAX_NEW_TOKENS, rid="after-signal")
    path = wait_for_dump(server.config.dump_dir, server.alive)
    waited = time.monotonic() - started
    if path is None:
        return LiveDumpSeen(pid, title, None, False, None, {}, waited)
    served = generate(server.url, prompt, max_new_tokens=MAX_NEW_TOKENS, rid="after-dump")
    logged = f"live dump written to {path}" in server.log_text()
    answers = repl_on_dump(path, REPL_SCRIPT, server.config.workdir)
    commands = [line.split()[0] for line in REPL_SCRIPT.splitlines()]
    return LiveDumpSeen(pid, title, path, logged, served, dict(zip(commands, answers, strict=True)), waited)


@dataclass(slots=True)
class ServerRuns:
    """Each core's `CoreRun`, launched on first request and kept (a failed launch keeps its error)."""

    launch: Callable[[str], CoreRun]
    done: dict[str, CoreRun | BaseException] = field(default_factory=dict)

    def get(self, core: str) -> CoreRun:
        if core not in self.done:
            try:
                self.done[core] = self.launch(core)
            except Exception as exc:  # kept and re-raised for every test that asks for this core
                self.done[core] = exc
        outcome = self.done[core]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def summary(self) -> list[dict[str, object]]:
        """`CoreRun.figures` of every core launched so far (failed launches left out)."""
        return [run.figures() for run in self.done.values() if isinstance(run, CoreRun)]

    def per_request(self) -> dict[str, list[tuple[int, int]]]:
        """`CoreRun.per_request` of every core launched so far."""
        return {core: run.per_request() for core, run in self.done.items() if isinstance(run, CoreRun)}

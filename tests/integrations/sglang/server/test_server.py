"""SGLang 0.5.23's real server (``python -m sglang.launch_server``) with HiCache, once per tree core.

A tiny random-weight Llama (made here, `model`) is served on the CPU with
the stand-ins of `standins`; where CUDA is available the same runs happen
on the GPU without them, plus a tiny SWA model and a tiny GDN hybrid. Per
core (`rust`, SGLang's default; ``leases``; ``unicache``), one launch
(`scenario.run_core`): ``/generate`` reports a device-tier hit of exactly
the shared prefix, then a host-tier hit once the device pool has
overflowed, then the Mooncake window with several requests in flight
answers every request with host-tier hits; the hit totals of the three
cores agree within 10% (the requests in flight make the exact figure
depend on timing); the reset report (`unicache.integrations.sglang.report`,
written at each ``/flush_cache``) shows SGLang's sanity check clean with
nothing locked and no lease left; SIGTERM stops the server with status 0
and no process left. Every launch has ``--enable-metrics``: after the last
flush ``/metrics`` shows SGLang's own ``sglang:`` families (its request
count equal to the requests sent) and, for
``leases`` and ``unicache``, ours with SGLang's radix-cache labels, every
lease acquired accounted for (released, revoked or live), none live, hold
times observed (none for ``rust``). On ``unicache``, SIGUSR1 to the
``sglang::scheduler`` process writes a live dump while it serves, which
``unicache repl --dump`` opens: the core, its tree, its ledger, no lock held.

The GPU cases (the hybrids, and everything where CUDA is available) were
written without a GPU to run them on: they skip here, never faked, and the
figures they expect for the hybrids (`PREFIX_HITS`) are unverified.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Final

import pytest
import torch

from unicache.dump import load_dump
from tests.integrations.sglang.server.model import make_model
from tests.integrations.sglang.server.observe import lease_metric_problems
from tests.integrations.sglang.server.scenario import (
    CACHE_TYPES,
    EPOCHS,
    FLUSHES,
    FILLER_TOKENS,
    FILLERS,
    MAX_TOTAL_TOKENS,
    PROMPT_TOKENS,
    SHARED_PREFIX,
    TRACE_COUNT,
    FIGURES,
    LEDGERS,
    LIVE_DUMP_CORES,
    SGLANG_REQUESTS,
    CoreRun,
    ServerRuns,
    run_core,
)

CORES: Final = ("rust", "leases", "unicache")
"""Every core serves every model: ``unicache`` covers FULL, FULL+MAMBA (the GDN state is SGLang's Mamba
component) and FULL+SWA with one window, and SGLang gives the Gemma SWA model `SWATokenToKVPoolAllocator`
(no request ring; the unified SWA allocator, which ``unicache`` refuses, needs ``--enable-unified-memory``)."""
CORE_CLASSES: Final = CACHE_TYPES
ON_GPU: Final = torch.cuda.is_available()
HYBRID_MODELS: Final = ("gemma4-swa", "qwen3-next-gdn")
MODELS: Final = ("llama", *HYBRID_MODELS)
HIT_TOLERANCE: Final = 0.10
PREFIX_HITS: Final = {"llama": True, "gemma4-swa": True, "qwen3-next-gdn": False}
"""Whether a prompt that shares a prefix with an earlier one hits it exactly. Not for the GDN hybrid:
SGLang keeps a Mamba (GDN) state only where a request ended, so a prefix hit needs one at the
branching point; there the scenario checks that serving works and the cores agree, not the figures.
The hybrid expectations are untested: no GPU was lent to the session that wrote them."""

needs_gpu = pytest.mark.skipif(not ON_GPU, reason="hybrid models need SGLang's GPU kernels (no CUDA here)")


CASES: Final = [
    pytest.param(model, core, id=f"{model}-{core}", marks=() if model == "llama" else needs_gpu)
    for model in MODELS for core in CORES
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[dict[str, ServerRuns]]:
    """Per model, its `ServerRuns`: each core launched once for the whole module.

    At the end the hit figures and timings of every launch are written to
    ``figures.json`` in the module's temporary directory and left for the
    terminal summary (``conftest.py``); each trace request's hits per core
    to ``trace-hits.json`` beside it.
    """
    base = tmp_path_factory.mktemp("sglang-server")

    def runs_of(model: str) -> ServerRuns:
        def launch(core: str) -> CoreRun:
            path = base / model
            if not path.exists():
                make_model(model, path)
            return run_core(core, path, base / f"{model}-{core}", on_cpu=not ON_GPU)
        return ServerRuns(launch)

    by_model = {model: runs_of(model) for model in MODELS}
    yield by_model
    figures = {model: r.summary() for model, r in by_model.items() if r.done}
    (base / "figures.json").write_text(json.dumps(figures, default=str, indent=1))
    per_request = {model: r.per_request() for model, r in by_model.items() if r.done}
    (base / "trace-hits.json").write_text(json.dumps(per_request))
    pytestconfig.stash[FIGURES] = figures


@pytest.mark.parametrize(("model", "core"), CASES)
def test_shared_prefix_hits_the_device_tier(runs: dict[str, ServerRuns], model: str, core: str) -> None:
    run = runs[model].get(core)
    assert run.sibling.host == 0, run.sibling
    if PREFIX_HITS[model]:
        assert run.sibling.device == SHARED_PREFIX, run.sibling
    else:
        assert run.sibling.device <= SHARED_PREFIX, run.sibling


@pytest.mark.parametrize(("model", "core"), CASES)
def test_after_the_pool_fills_the_prompt_comes_back_from_the_host_tier(
    runs: dict[str, ServerRuns], model: str, core: str
) -> None:
    assert FILLERS * FILLER_TOKENS > MAX_TOTAL_TOKENS, "the fillers overflow the device pool"
    run = runs[model].get(core)
    if not PREFIX_HITS[model]:
        pytest.skip("the GDN hybrid has no Mamba state where the prompt ends (see PREFIX_HITS)")
    assert run.first_again.host > 0, run.first_again
    assert SHARED_PREFIX <= run.first_again.total < PROMPT_TOKENS, run.first_again


@pytest.mark.parametrize(("model", "core"), CASES)
def test_trace_window_in_flight_hits_the_host_tier(runs: dict[str, ServerRuns], model: str, core: str) -> None:
    run = runs[model].get(core)
    assert len(run.trace) == TRACE_COUNT
    if PREFIX_HITS[model]:
        assert run.trace_hits.host > 0, run.trace_hits
        assert run.trace_hits.device > 0, run.trace_hits


@pytest.mark.parametrize("model", [pytest.param(m, marks=() if m == "llama" else needs_gpu) for m in MODELS])
def test_hit_totals_agree_across_cores(runs: dict[str, ServerRuns], model: str) -> None:
    totals = {core: runs[model].get(core).trace_hits.total for core in CORES}
    low, high = min(totals.values()), max(totals.values())
    assert (high - low) <= HIT_TOLERANCE * high, totals
    assert high > 0 or not PREFIX_HITS[model], totals


@pytest.mark.parametrize(("model", "core"), CASES)
def test_server_stops_cleanly_with_no_lease_left(runs: dict[str, ServerRuns], model: str, core: str) -> None:
    run = runs[model].get(core)
    assert run.returncode == 0, run.log[-3000:]
    assert run.processes_left == []
    assert "Scheduler hit an exception" not in run.log
    assert len(run.reports) == FLUSHES, run.reports
    for report in run.reports:
        assert report["tree_core"] == CORE_CLASSES[core], report
        assert report["sanity_check"] == "clean", report
        assert report["live_leases"] == (None if core == "rust" else 0), report
        assert report["protected_tokens"] == 0, report
        assert report["ongoing_load_back"] == 0 and report["ongoing_write_through"] == 0, report


@pytest.mark.parametrize(("model", "core"), CASES)
def test_our_metrics_are_in_sglangs_metrics_next_to_its_own(runs: dict[str, ServerRuns], model: str,
                                                            core: str) -> None:
    """``/metrics`` (``--enable-metrics``, multiprocess mode) after the last flush, scraped until at rest."""
    run = runs[model].get(core)
    seen = run.metrics.samples
    assert any(f.startswith("sglang:") for f in seen.families), sorted(seen.families)
    assert seen.total(SGLANG_REQUESTS) == run.sent, (seen.get(SGLANG_REQUESTS), run.sent)  # every request counted
    ours = {f for f in seen.families if f.startswith("unicache_")}
    if not LEDGERS[core]:
        assert ours == set(), ours
        return
    problems = lease_metric_problems(seen, CACHE_TYPES[core], LEDGERS[core], EPOCHS.get(core, {}))
    assert problems == [] and run.metrics.ready, (problems, run.metrics.scrapes, run.metrics.waited_s)
    assert {"unicache_leases_live", "unicache_leases_acquired", "unicache_leases_released", "unicache_leases_revoked",
            "unicache_leases_leaked", "unicache_lease_hold_seconds_count", "unicache_oldest_lease_age_seconds",
            "unicache_ledger_epoch", "unicache_transfers_in_flight"} <= ours, ours
    for name in ("unicache_leases_acquired_total", "unicache_leases_live"):
        rows = seen.get(name)
        assert rows and all(lv.get("cache_type") == CACHE_TYPES[core] and lv.get("tp_rank") == "0"
                            and lv.get("pp_rank") == "0" and lv.get("dp_rank") == "0" for lv, _ in rows), rows
    assert seen.total("unicache_transfers_in_flight") == 0
    assert seen.total("unicache_oldest_lease_age_seconds") == 0  # no lease live: the age gauge is 0
    assert seen.total("unicache_errors_total") == 0  # a series per error class raised: none
    assert seen.values("ledger", "unicache_leases_acquired_total") == set(LEDGERS[core])
    if core == "unicache":
        assert seen.values("component", "unicache_leases_live") == {"full", "fullhost"}
        assert seen.total("unicache_acks_total", outcome="ok") > 0  # write-through and load-back acks
        assert seen.total("unicache_operations_total", op="load_back") > 0
        assert seen.total("unicache_acks_total", outcome="stale") == 0
    else:
        assert seen.total("unicache_acks_total", outcome="stale") == 0
        assert seen.total("unicache_overlapping_load_backs_total") == 0


@pytest.mark.parametrize("core", LIVE_DUMP_CORES)
def test_sigusr1_to_the_scheduler_writes_a_live_dump_the_repl_opens(runs: dict[str, ServerRuns], core: str) -> None:
    """SIGUSR1 to the ``sglang::scheduler`` process: a dump at its next safe point, serving goes on, the REPL opens it."""
    run = runs["llama"].get(core)
    dump = run.live_dump
    assert dump is not None
    assert dump.scheduler_title.startswith("sglang::scheduler"), dump
    assert dump.path is not None, run.log[-3000:]
    assert dump.path.name.endswith(f"-{dump.scheduler_pid}.json"), dump.path
    assert dump.logged, run.log[-3000:]
    written = load_dump(dump.path)
    assert written.extra["live_dump"] is True and written.extra["tree_core"] == core, written.extra
    assert dump.served_after is not None and dump.served_after.total > 0  # served after, from the cache
    stats, leases, check, tree = (dump.repl[c] for c in ("stats", "leases", "check", "tree"))
    assert check["clean"] is True and check["inconsistencies"] == 0, check
    nodes = stats["nodes"]
    assert isinstance(nodes, int) and nodes > FILLERS, stats
    assert stats["epoch"] == 1, stats  # the construction's reset; the first flush comes after the dump
    ledger, counters = stats["ledger"], stats["counters"]
    assert isinstance(ledger, dict) and isinstance(counters, dict)
    assert ledger["acquired"] == ledger["released"] + ledger["revoked"] + ledger["live"] > 0, ledger
    assert ledger["leaked"] == 0, ledger
    # taken between requests (each answered before the next is sent): no request holds a lock; only
    # write-through backups and load-backs not acked yet may hold leases, and the listing shows them all
    assert counters["device_locks"] == counters["host_locks"] == counters["protected_tokens"] == 0, counters
    assert counters["load_backs"] >= 1 and counters["write_through_acks"] > 0, counters  # "first-again"
    listed = leases["leases"]
    assert isinstance(listed, list) and len(listed) == ledger["live"], (listed, ledger)
    assert all(isinstance(x, dict) and str(x["owner"]).startswith(("write-through", "load-back"))
               for x in listed), listed
    top = tree["nodes"]
    assert isinstance(top, list) and len(top) > 1, tree

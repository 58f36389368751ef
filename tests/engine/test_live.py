"""A watched replay: metrics scraped over HTTP, the lease watchdog, a live dump on SIGUSR1.

The subprocess tests never sleep: they read the run's stderr up to the line
they need (the metrics URL, the first progress line, the dump's path), as
tests/engine/test_interrupt.py does.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from unicache.dump import load_dump
from unicache.engine.interrupt import EXIT_INTERRUPTED
from unicache.engine.live import LiveHooks
from unicache.engine.replay import ReplayOptions, run_replay
from unicache.metrics.exporter import serve_metrics

EXIT_USAGE = 2


def _scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of the endpoint by name and sorted labels, through a real HTTP GET."""
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        text = response.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def _one(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str) -> float:
    values = samples[name]
    assert len(values) == 1, values
    return next(iter(values.values()))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def test_a_scrape_after_the_run_equals_the_report(tmp_path: Path) -> None:
    opts = ReplayOptions(requests=40, tokens_per_block=16, crash_dir=tmp_path / "crash")
    server = serve_metrics(0)
    try:
        live = LiveHooks(collector=server.collector, lease_age_limit=1000.0, clock=FakeClock(), say=lambda _: None)
        report = run_replay(opts, live=live)
        samples = _scrape(server.url)
    finally:
        server.close()
    assert report["errors"] == 0 and report["corruptions"] == 0
    assert _one(samples, "unicache_leases_acquired_total") == report["leases_acquired"]
    assert _one(samples, "unicache_leases_released_total") == report["leases_released"]
    assert _one(samples, "unicache_leases_leaked_total") == report["leaked_leases"] == 0
    assert _one(samples, "unicache_engine_requests_finished_total") == report["requests"] == 40
    assert _one(samples, "unicache_engine_steps_total") == report["steps"]
    assert sum(samples["unicache_leases_live"].values()) == report["live_leases_at_end"] == 0
    acks = {dict(k)["outcome"]: v for k, v in samples["unicache_acks_total"].items()}
    counters = report["cache_counters"]
    assert isinstance(counters, dict)
    assert acks["ok"] == counters["acks"] and acks["stale"] == counters["stale_acks"]
    refusals = report["refusals"]
    assert isinstance(refusals, dict)
    got = {":".join(v for k, v in key if k != "component") + ("" if dict(key)["component"] == "none"
           else ":" + dict(key)["component"]): value for key, value in samples["unicache_refusals_total"].items()}
    assert got == refusals
    hold = samples["unicache_lease_hold_seconds_count"]
    assert sum(hold.values()) == report["leases_released"]
    assert report["lease_watchdog"] == {"age_limit_seconds": 1000.0, "reported": 0, "overdue_at_end": []}


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "unicache.cli", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _read_until(proc: subprocess.Popen[str], pattern: str, seen: list[str]) -> re.Match[str]:
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        match = re.search(pattern, line)
        if match:
            return match
    out, _ = proc.communicate()
    raise AssertionError(f"the run ended (status {proc.returncode}) before {pattern!r}:\n{''.join(seen)}{out}")


def test_a_running_replay_serves_metrics_and_dumps_on_sigusr1(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = _start(["replay", "--requests", "12000", "--tokens-per-block", "32", "--metrics-port", "0",
                   "--lease-age-limit", "3600", "--report", str(report), "--crash-dir", str(tmp_path / "crash")],
                  tmp_path)
    seen: list[str] = []
    try:
        url = _read_until(proc, r"metrics at (http://\S+)", seen).group(1)
        _read_until(proc, r"replay: \d+/\d+ requests", seen)
        during = _scrape(url)
        proc.send_signal(signal.SIGUSR1)
        dump_path = Path(_read_until(proc, r"live dump written to (\S+)", seen).group(1))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = "".join(seen) + err
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err
    acquired = _one(during, "unicache_leases_acquired_total")
    live = sum(during["unicache_leases_live"].values())
    assert acquired > 0
    assert acquired == (_one(during, "unicache_leases_released_total") + live
                        + _one(during, "unicache_leases_revoked_total") + _one(during, "unicache_leases_leaked_total"))
    final = json.loads(report.read_text())
    assert final["interrupted"] is True and final["errors"] == 0
    assert 0 < _one(during, "unicache_engine_requests_finished_total") <= final["requests"]
    assert acquired <= final["leases_acquired"]
    assert final["live_dumps"] == [str(dump_path)]
    dump = load_dump(dump_path)
    assert dump.error is None and dump.extra["live_dump"] is True
    assert dump.extra["lease_age_limit"] == 3600.0 and dump.extra["overdue_leases"] == []
    assert isinstance(dump.step, int) and 0 < dump.step <= final["steps"]
    ages = dump.extra["lease_ages"]
    assert isinstance(ages, dict) and set(ages) == {str(i) for i in dump.leases}


@pytest.mark.parametrize("command", [["replay", "--requests", "5"], ["simulate", "--seeds", "2", "--jobs", "1"]])
def test_a_port_in_use_is_refused_before_any_work(tmp_path: Path, command: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "unicache.cli", *command,
                               "--metrics-port", str(port), "--report", str(tmp_path / "r.json")],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_USAGE
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--metrics-port {port}" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.json").exists() and proc.stdout == ""


def test_simulate_serves_its_sweep(tmp_path: Path) -> None:
    """The endpoint after the sweep's last seed has the sweep's counts (in-process, served over HTTP)."""
    from unicache.engine.commands import sweep_publisher
    from unicache.engine.simulate import SimulateOptions
    from unicache.engine.sweep import run_sweep

    server = serve_metrics(0)
    try:
        result = run_sweep([0, 1], SimulateOptions(steps=5), crash_dir=tmp_path, jobs=1,
                           on_outcome=sweep_publisher(server.collector))
        samples = _scrape(server.url)
    finally:
        server.close()
    seeds = {dict(k)["outcome"]: v for k, v in samples["unicache_simulate_seeds_total"].items()}
    assert seeds == {"passed": 2 - len(result.failures), "failed": len(result.failures)}
    assert _one(samples, "unicache_simulate_executed_steps_total") == result.executed_steps > 0


@pytest.mark.parametrize("args", [["--metrics-port", "70000"], ["--metrics-port", "-1"],
                                  ["--metrics-addr", "0.0.0.0"], ["--lease-age-limit", "0"]])
def test_bad_observability_options_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "unicache.cli", "replay", "--requests", "5", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_USAGE and "Traceback" not in proc.stderr
    assert args[0] in proc.stderr

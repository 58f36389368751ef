"""SIGINT/SIGTERM during a real `unicache replay` / `unicache simulate` subprocess: summary, report, exit 130."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from unicache.engine.interrupt import EXIT_INTERRUPTED


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "unicache.cli", *args], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_replay_interrupted_reports_what_it_has(tmp_path: Path, sig: signal.Signals) -> None:
    report = tmp_path / "report.json"
    proc = _start(["replay", "--requests", "3000", "--tokens-per-block", "32", "--report", str(report),
                   "--crash-dir", str(tmp_path / "crash")], tmp_path)
    time.sleep(8)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err and f"interrupted by {sig.name}" in err
    assert "unicache replay" in out and "interrupted" in out
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and data["interrupted_by"] == sig.name
    assert data["requests"] < 3000 and data["errors"] == 0 and data["corruptions"] == 0
    assert data["live_leases_at_end"] == 0
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


@pytest.mark.parametrize("jobs", [1, 2])
def test_simulate_interrupted_keeps_finished_seeds(tmp_path: Path, jobs: int) -> None:
    report = tmp_path / "sim.json"
    proc = _start(["simulate", "--seeds", "100000", "--steps", "10", "--jobs", str(jobs), "--no-progress",
                   "--report", str(report), "--crash-dir", str(tmp_path / "crash")], tmp_path)
    time.sleep(20 if jobs == 1 else 45)  # spawned workers import torch first: slow under `make -j2` load
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err + out
    assert "interrupted by SIGINT" in out and "seed-steps/minute" in out
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and data["seeds_requested"] == 100000
    assert 1 <= data["seeds_finished"] < 100000 and data["failures"] == 0
    assert all(seed["ok"] for seed in data["seeds"])


def test_a_second_signal_stops_at_once_without_a_traceback(tmp_path: Path) -> None:
    proc = _start(["replay", "--requests", "3000", "--tokens-per-block", "32", "--no-progress",
                   "--crash-dir", str(tmp_path / "crash")], tmp_path)
    time.sleep(8)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err + out and "interrupted" in err

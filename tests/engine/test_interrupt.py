"""SIGINT/SIGTERM during a real `unicache replay` / `unicache simulate` subprocess: summary, report, exit 130.

No test sleeps and hopes: each waits for the progress line the run prints
when its first request (or seed) has finished (stderr is a pipe, so the
runs log progress as plain lines), then signals. The runs are sized so
that what remains after that line takes far longer than delivering a
signal, and the reports are checked against the line's count.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from unicache.engine.interrupt import EXIT_INTERRUPTED

REPLAY_REQUESTS = 12000
"""Nearly the whole bundled trace: tens of seconds of work after the first request finishes."""


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "unicache.cli", *args], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_progress(proc: subprocess.Popen[str], label: str) -> tuple[int, list[str]]:
    """Read stderr up to the run's first progress line; return its done count and the lines read."""
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        match = re.match(rf"{label}: (\d+)/\d+ ", line)
        if match:
            return int(match.group(1)), seen
    out, _ = proc.communicate()
    raise AssertionError(f"{label} ended (status {proc.returncode}) before printing progress:\n"
                         f"{''.join(seen)}{out}")


def _finish(proc: subprocess.Popen[str], seen: list[str], timeout: float) -> tuple[str, str]:
    out, err = proc.communicate(timeout=timeout)
    return out, "".join(seen) + err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_replay_interrupted_reports_what_it_has(tmp_path: Path, sig: signal.Signals) -> None:
    report = tmp_path / "report.json"
    proc = _start(["replay", "--requests", str(REPLAY_REQUESTS), "--tokens-per-block", "32", "--report", str(report),
                   "--crash-dir", str(tmp_path / "crash")], tmp_path)
    done, seen = _wait_for_progress(proc, "replay")
    proc.send_signal(sig)
    out, err = _finish(proc, seen, timeout=300)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err and f"interrupted by {sig.name}" in err
    assert "unicache replay" in out and "interrupted" in out
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and data["interrupted_by"] == sig.name
    assert done <= data["requests"] < REPLAY_REQUESTS and data["errors"] == 0 and data["corruptions"] == 0
    assert data["live_leases_at_end"] == 0
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


@pytest.mark.parametrize("jobs", [1, 2])
def test_simulate_interrupted_keeps_finished_seeds(tmp_path: Path, jobs: int) -> None:
    report = tmp_path / "sim.json"
    proc = _start(["simulate", "--seeds", "100000", "--steps", "10", "--jobs", str(jobs),
                   "--report", str(report), "--crash-dir", str(tmp_path / "crash")], tmp_path)
    try:
        done, seen = _wait_for_progress(proc, "simulate")
        proc.send_signal(signal.SIGINT)
        out, err = _finish(proc, seen, timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err + out
    assert "interrupted by SIGINT" in out and "seed-steps/minute" in out
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and data["seeds_requested"] == 100000
    assert done <= data["seeds_finished"] < 100000 and data["failures"] == 0
    assert all(seed["ok"] for seed in data["seeds"])


def test_a_second_signal_stops_at_once_without_a_traceback(tmp_path: Path) -> None:
    proc = _start(["replay", "--requests", str(REPLAY_REQUESTS), "--tokens-per-block", "32",
                   "--crash-dir", str(tmp_path / "crash")], tmp_path)
    _, seen = _wait_for_progress(proc, "replay")
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    out, err = _finish(proc, seen, timeout=300)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err + out and "interrupted" in err

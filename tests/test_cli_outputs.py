"""The `unicache` command line's outputs: refused before the run when they could destroy something, written
atomically with ordinary permissions, and a write that fails at the end is one line, not a traceback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from unicache.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main

REPLAY = ["replay", "--requests", "5", "--tokens-per-block", "16", "--no-progress"]
SIMULATE = ["simulate", "--seeds", "1", "--steps", "5", "--no-progress"]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """Exit 2, one line on stderr holding every needle, nothing on stdout (the run never started)."""
    assert main(argv) == EXIT_USAGE, argv
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert captured.out == ""
    return lines[0]


def test_replay_leaves_dev_null_a_character_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crash = tmp_path / "crash"
    for option in ("--report", "--plot"):
        target = "/dev/null" if option == "--report" else "/dev/null.png"
        _refused([*REPLAY, option, target, "--crash-dir", str(crash)], capsys, f"{option} {target}:")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    _refused([*REPLAY, "--report", "/dev/null", "--crash-dir", str(crash)], capsys, "is a character device")
    assert not crash.exists()


def test_replay_refuses_a_fifo_a_directory_and_a_socket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    (tmp_path / "dir.json").mkdir()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock.json"))
        for name, kind in (("fifo.json", "a FIFO"), ("dir.json", "a directory"), ("sock.json", "a socket")):
            _refused([*REPLAY, "--report", str(tmp_path / name), "--crash-dir", str(tmp_path / "crash")], capsys,
                     f"--report {tmp_path / name}: is {kind}, not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    _refused([*REPLAY, "--plot", str(fifo.with_suffix(".png")), "--crash-dir", str(fifo)], capsys,
             f"--crash-dir {fifo}: is not a directory")


def test_replay_refuses_a_symlink_as_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "real.json"
    real.write_text("keep")
    (tmp_path / "link.json").symlink_to(real)
    _refused([*REPLAY, "--report", str(tmp_path / "link.json"), "--crash-dir", str(tmp_path / "crash")], capsys,
             "--report", "is a symbolic link")
    assert real.read_text() == "keep" and (tmp_path / "link.json").is_symlink()


def test_replay_refuses_report_and_plot_in_one_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = tmp_path / "x.png"
    _refused([*REPLAY, "--report", str(same), "--plot", str(same), "--crash-dir", str(tmp_path / "crash")], capsys,
             f"--plot {same}: is the same file as the output --report {same}")
    assert not same.exists()


def test_replay_refuses_a_report_over_its_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "wl.jsonl"
    text = "".join(json.dumps({"id": i, "session": 0, "turn": i, "tokens": list(range(1, 20))}) + "\n"
                   for i in range(3))
    trace.write_text(text)
    _refused(["replay", "--requests", "3", "--no-progress", "--trace", str(trace), "--report", str(trace),
              "--crash-dir", str(tmp_path / "crash")],
             capsys, f"--report {trace}: is the same file as the input --trace {trace}")
    assert trace.read_text() == text


@pytest.mark.parametrize(("report", "reason"), [
    ("/proc/unicache-report.json", "is under /proc, a special filesystem"),
    ("/sys/kernel/unicache-report.json", "is under /sys, a special filesystem"),
    ("LONG", "NAME_MAX"),
    ("existing_file/child.json", "existing_file is not a directory"),
])
def test_unusable_report_paths_are_refused_before_the_run(report: str, reason: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "existing_file").write_text("x")
    if report == "LONG":
        report = str(tmp_path / ("r" * 300 + ".json"))
    elif not report.startswith("/"):
        report = str(tmp_path / report)
    _refused([*REPLAY, "--report", report,
              "--crash-dir", str(tmp_path / "crash")], capsys, f"--report {report}: ", reason)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing_file"]


def test_replay_crash_dir_is_checked_like_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused([*REPLAY, "--crash-dir", "/proc/unicache-crash"], capsys, "--crash-dir /proc/unicache-crash: ",
             "special filesystem")
    _refused([*REPLAY, "--crash-dir", str(tmp_path / ("c" * 300))], capsys, "--crash-dir", "NAME_MAX")
    _refused([*REPLAY, "--report", str(tmp_path / "out"), "--crash-dir", str(tmp_path / "out" / "crash")], capsys,
             f"--crash-dir {tmp_path / 'out' / 'crash'}: needs --report {tmp_path / 'out'} to be a directory")


def test_simulate_outputs_are_checked_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crash = tmp_path / "crash"
    _refused([*SIMULATE, "--report", "/dev/null", "--crash-dir", str(crash)], capsys,
             "unicache simulate: --report /dev/null: is a character device")
    _refused([*SIMULATE, "--crash-dir", "/proc/unicache-crash"], capsys, "--crash-dir", "special filesystem")
    _refused([*SIMULATE, "--report", str(crash), "--crash-dir", str(crash)], capsys,
             f"--report {crash}: is the same file as the output --crash-dir {crash}")
    _refused([*SIMULATE, "--report", str(tmp_path / ("s" * 300)), "--crash-dir", str(crash)], capsys, "NAME_MAX")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode) and list(tmp_path.iterdir()) == []


def test_replay_outputs_get_ordinary_permissions(tmp_path: Path, umask_027: None) -> None:
    kept = tmp_path / "kept.json"
    kept.write_text("old")
    kept.chmod(0o604)
    argv = [*REPLAY, "--crash-dir", str(tmp_path / "crash")]
    assert main([*argv, "--report", str(tmp_path / "new.json"), "--plot", str(tmp_path / "new.png")]) == EXIT_OK
    assert main([*argv, "--report", str(kept)]) == EXIT_OK
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"new.json": 0o640, "new.png": 0o640, "kept.json": 0o604}
    assert json.loads(kept.read_text())["requests"] == 5


def _with_file_size_limit(argv: list[str], limit: int) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a child whose files cannot grow past ``limit`` bytes: writes fail with EFBIG, as on a full
    disk (SIGXFSZ ignored, as Python does at start-up anyway)."""
    code = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "from unicache.cli import main\n"
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
            f"sys.exit(main({argv!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_a_report_that_cannot_be_written_at_the_end_is_one_line(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text("old report")
    done = _with_file_size_limit([*REPLAY, "--report", str(report), "--crash-dir", str(tmp_path / "crash")], 512)
    assert done.returncode == EXIT_FAILED, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert errors == [f"unicache replay: --report {report}: could not be written (File too large); "
                      "the previous file, if any, is unchanged"], done.stderr
    assert "leaked leases" in done.stdout and "report:" not in done.stdout
    assert report.read_text() == "old report" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_crash_dump_that_cannot_be_written_is_reported_not_raised(tmp_path: Path) -> None:
    done = _with_file_size_limit(["simulate", "--seed", "3", "--steps", "30", "--no-progress", "--inject", "corrupt",
                                  "--no-shrink", "--crash-dir", str(tmp_path)], 512)
    assert done.returncode == EXIT_FAILED and "Traceback" not in done.stderr, done.stderr
    out = " ".join(done.stdout.split())
    assert "not written: --crash-dir" in out and "File too large" in out, done.stdout
    assert list(tmp_path.iterdir()) == []

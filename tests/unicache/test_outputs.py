"""unicache.outputs: which paths an output may take, and the atomic writer that never destroys anything else."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from unicache import outputs
from unicache.outputs import (
    OutputPathError,
    OutputSet,
    OutputWriteError,
    check_directory,
    check_file,
    write_atomic,
)


def _refused(path: str | Path, reason: str, *, directory: bool = False) -> OutputPathError:
    with pytest.raises(OutputPathError) as info:
        (check_directory if directory else check_file)(path, "--out")
    assert str(info.value).startswith(f"--out {path}: ") and reason in str(info.value), str(info.value)
    assert "\n" not in str(info.value)
    return info.value


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_dev_null_is_refused_and_stays_a_character_device() -> None:
    _refused("/dev/null", "is a character device, not a regular file")
    with pytest.raises(OutputPathError, match="character device"):
        write_atomic("/dev/null", b"report", "--out")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(fifo, "is a FIFO, not a regular file")
    with pytest.raises(OutputPathError, match="FIFO"):
        write_atomic(fifo, b"report", "--out")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and _listing(tmp_path) == ["fifo"]


def test_a_socket_and_a_directory_are_refused(tmp_path: Path) -> None:
    sock_path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        _refused(sock_path, "is a socket, not a regular file")
    _refused(tmp_path, "is a directory, not a regular file")
    with pytest.raises(OutputPathError, match="directory"):
        write_atomic(tmp_path, b"report", "--out")


def test_a_symlink_target_is_refused_dangling_or_not(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    for path in (link, dangling):
        _refused(path, "is a symbolic link")
        with pytest.raises(OutputPathError, match="symbolic link"):
            write_atomic(path, b"new", "--out")
    assert real.read_text() == "keep" and link.is_symlink() and not (tmp_path / "nowhere.json").exists()


def test_a_symlinked_parent_directory_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert check_file(tmp_path / "alias" / "r.json", "--out") == tmp_path / "alias" / "r.json"
    write_atomic(tmp_path / "alias" / "r.json", b"{}", "--out")
    assert (tmp_path / "real" / "r.json").read_bytes() == b"{}"
    assert check_directory(tmp_path / "alias", "--out") == tmp_path / "alias"


def test_a_file_as_parent_is_refused(tmp_path: Path) -> None:
    existing = tmp_path / "existing_file"
    existing.write_text("x")
    _refused(existing / "child.json", f"{existing} is not a directory")
    _refused(existing / "deeper" / "child.json", f"{existing} is not a directory")
    _refused(existing, "is not a directory", directory=True)
    _refused(existing / "crash", f"{existing} is not a directory", directory=True)


def test_missing_parents_are_allowed_unless_told_otherwise(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "r.json"
    assert check_file(target, "--out") == target and not (tmp_path / "a").exists()
    with pytest.raises(OutputPathError, match="does not exist .create it first."):
        check_file(target, "--out", create_parents=False)
    with pytest.raises(OutputPathError, match="does not exist"):
        check_directory(tmp_path / "a", "--out", create=False)
    write_atomic(target, b"x", "--out")
    assert target.read_bytes() == b"x"
    assert _listing(tmp_path) == ["a"], "the checks leave no probe file behind"


@pytest.mark.parametrize("path", ["/proc/unicache-report.json", "/proc/self/report.json", "/sys/report.json",
                                  "/dev/report.json"])
def test_special_filesystems_are_refused(path: str) -> None:
    _refused(path, "special filesystem")
    _refused(path, "special filesystem", directory=True)


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_dev_shm_holds_ordinary_files() -> None:
    assert check_file("/dev/shm/unicache-report.json", "--out") == Path("/dev/shm/unicache-report.json")


def test_a_special_filesystem_is_found_in_mountinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside /proc, /sys and /dev the mount table decides (a mount point with a space, escaped as \\040)."""
    spaced = tmp_path / "kernel view"
    spaced.mkdir()
    mountinfo = tmp_path / "mountinfo"
    escaped = str(spaced).replace(" ", "\\040")
    mountinfo.write_text(f"22 1 0:5 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
                         f"23 22 0:6 / {escaped} rw,nosuid master:2 shared:3 - sysfs sysfs rw\n")
    monkeypatch.setattr(outputs, "MOUNTINFO", mountinfo)
    _refused(spaced / "r.json", f"is on {spaced}, a sysfs filesystem")
    _refused(spaced / "sub" / "crash", "a sysfs filesystem", directory=True)
    assert check_file(tmp_path / "r.json", "--out") == tmp_path / "r.json"


def test_an_unwritable_parent_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the special-filesystem rules off, /proc still cannot take a new file: the probe says so (even as root)."""
    monkeypatch.setattr(outputs, "REFUSED_TREES", ())
    monkeypatch.setattr(outputs, "MOUNTINFO", Path("/nonexistent/mountinfo"))
    _refused("/proc/unicache-report.json", "cannot create files in /proc (")
    _refused("/proc/self/unicache-crash", "directory /proc/self is not writable", directory=True)


def test_name_and_path_lengths_are_checked_up_front(tmp_path: Path) -> None:
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    path_max = os.pathconf(tmp_path, "PC_PATH_MAX")
    _refused(tmp_path / ("r" * 300 + ".json"), f"more than this filesystem's NAME_MAX of {name_max}")
    _refused(tmp_path / ("c" * 300), "NAME_MAX", directory=True)
    deep = tmp_path.joinpath(*(["d" * 200] * (path_max // 200 + 1)), "r.json")
    _refused(deep, f"more than PATH_MAX of {path_max}")
    longest = tmp_path / ("n" * (name_max - 5) + ".json")
    write_atomic(check_file(longest, "--out"), b"fits", "--out")
    assert longest.read_bytes() == b"fits", "the temp file's name does not grow with the target's"
    _refused(tmp_path / ("n" * (name_max - 4) + ".json"), "NAME_MAX")


def test_a_nul_byte_and_an_empty_path_are_refused() -> None:
    with pytest.raises(OutputPathError, match="NUL byte"):
        check_file("r\0.json", "--out")
    with pytest.raises(OutputPathError, match="is empty"):
        check_file("", "--out")


def test_an_existing_file_is_replaced_and_keeps_its_mode(tmp_path: Path, umask_027: None) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    target.chmod(0o604)
    before = target.stat().st_ino
    assert write_atomic(target, b"new", "--out") == target
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o604
    assert target.stat().st_ino != before, "replaced by rename, not rewritten in place"
    assert _listing(tmp_path) == ["r.json"]


def test_a_new_file_gets_0666_less_the_umask(tmp_path: Path, umask_027: None) -> None:
    write_atomic(tmp_path / "r.json", b"{}", "--out")
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o640
    os.umask(0o002)
    write_atomic(tmp_path / "s.json", b"{}", "--out")
    assert stat.S_IMODE((tmp_path / "s.json").stat().st_mode) == 0o664


def test_a_target_that_turned_into_a_fifo_during_the_run_is_not_written(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    check_file(target, "--out")
    os.mkfifo(target)
    with pytest.raises(OutputPathError, match="is a FIFO, not a regular file; not written"):
        write_atomic(target, b"{}", "--out")
    assert stat.S_ISFIFO(os.lstat(target).st_mode) and _listing(tmp_path) == ["r.json"]


def test_a_failing_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    """A real write failure: a file-size limit (EFBIG) in a child process, as a full disk would fail it."""
    target = tmp_path / "r.json"
    target.write_text("old report")
    code = textwrap.dedent(f"""
        import resource, signal, sys
        from unicache.outputs import OutputWriteError, write_atomic
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        try:
            write_atomic({str(target)!r}, b"x" * 100_000, "--report")
        except OutputWriteError as exc:
            print(exc)
            sys.exit(3)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith(f"--report {target}: could not be written (File too large)")
    assert target.read_text() == "old report" and _listing(tmp_path) == ["r.json"]


def test_the_error_types_carry_option_path_and_reason() -> None:
    for cls in (OutputPathError, OutputWriteError):
        exc = cls("--plot", Path("x.png"), "why")
        assert (exc.option, exc.path, exc.reason, str(exc)) == ("--plot", "x.png", "why", "--plot x.png: why")


def test_two_outputs_that_are_one_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    for second in (tmp_path / "x.png", tmp_path / "real" / ".." / "x.png"):
        paths = OutputSet()
        paths.file(tmp_path / "x.png", "--report")
        with pytest.raises(OutputPathError, match=f"--plot {second}: is the same file as the output --report"):
            paths.file(second, "--plot")
    paths = OutputSet()
    paths.file(tmp_path / "real" / "r.json", "--report")
    with pytest.raises(OutputPathError, match="same file"):
        paths.file(tmp_path / "alias" / "r.json", "--plot")


def test_an_output_that_is_an_input_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("{}\n")
    os.link(trace, tmp_path / "hardlink.jsonl")
    for output in (trace, tmp_path / "hardlink.jsonl"):
        paths = OutputSet()
        paths.input(trace, "--trace")
        with pytest.raises(OutputPathError, match=f"is the same file as the input --trace {trace}"):
            paths.file(output, "--report")
    assert trace.read_text() == "{}\n"


def test_an_input_that_names_no_file_conflicts_with_nothing(tmp_path: Path) -> None:
    paths = OutputSet()
    paths.input("trace\0.jsonl", "--trace")
    paths.input(tmp_path / "missing.jsonl", "--trace")
    assert paths.file(tmp_path / "r.json", "--report") == tmp_path / "r.json"
    with pytest.raises(OutputPathError, match="same file as the input --trace"):
        paths.file(tmp_path / "missing.jsonl", "--plot")


def test_a_file_output_where_a_directory_output_goes_is_refused(tmp_path: Path) -> None:
    paths = OutputSet()
    paths.directory(tmp_path / "out" / "crash", "--crash-dir")
    with pytest.raises(OutputPathError, match="would be a file where --crash-dir .* needs a directory"):
        paths.file(tmp_path / "out", "--report")
    with pytest.raises(OutputPathError, match="same file"):
        paths.file(tmp_path / "out" / "crash", "--report")
    paths.file(tmp_path / "out" / "crash" / "r.json", "--report")
    first = OutputSet()
    first.file(tmp_path / "r.json", "--report")
    with pytest.raises(OutputPathError, match="needs --report .* to be a directory"):
        first.directory(tmp_path / "r.json" / "crash", "--crash-dir")

"""Where the command line and the REPL may write, and how: every output checked before any work, then
written atomically over a regular file or a missing path, never over anything else.

The policy, for every file a command writes (reports, plots, crash dumps, REPL scripts, DOT files):

* the target is a regular file or does not exist yet; a directory, character or block device
  (``/dev/null``), FIFO or socket is refused, and so is a symbolic link as the last component
  (dangling or not: an output never writes through a link; links among the parent directories are
  followed as usual);
* its parent directory exists or can be created (each missing parent under a directory that is one),
  is writable (a probe file is created and removed), and is not on a special filesystem: anything
  under ``/proc``, ``/sys`` or ``/dev`` (but ``/dev/shm``), or mounted as proc, sysfs, devtmpfs,
  cgroup and the like according to ``/proc/self/mountinfo``;
* every name component fits ``NAME_MAX`` and the whole path ``PATH_MAX`` (``os.pathconf`` of the
  nearest existing directory; 255 and 4096 where it cannot say), the temp file's path included;
* two outputs of one command, or an output and an input, that are the same file (by resolved path,
  or by device and inode where both exist) are refused, as is a file output where another output
  needs a directory (:class:`OutputSet`).

:func:`write_atomic` writes a temp file next to the target (opened with mode 0666, so the umask
applies as for any new file; an existing target's mode, and as root its owner, are copied),
fsyncs it, renames it over the target and fsyncs the directory. It checks the target's type again
just before, so a FIFO that appeared during the run is refused too. A refusal is an
:class:`OutputPathError`; a write that fails anyway (disk full) is an :class:`OutputWriteError`
and leaves the previous file as it was. Both have a one-line message naming the option and path.
Nothing here imports the rest of unicache.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from pathlib import Path

REFUSED_FILESYSTEMS: frozenset[str] = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
    "pstore", "bpf", "configfs", "fusectl", "mqueue", "efivarfs", "binfmt_misc", "autofs", "nsfs",
    "selinuxfs", "rpc_pipefs", "hugetlbfs",
})
"""Filesystem types whose files are kernel interfaces, not places for outputs."""

REFUSED_TREES: tuple[str, ...] = ("/proc", "/sys", "/dev")
"""Directory trees refused whatever is mounted there (containers often mount a tmpfs on /dev)."""

ALLOWED_UNDER_REFUSED: tuple[str, ...] = ("/dev/shm",)
"""Subtrees of :data:`REFUSED_TREES` that hold ordinary files."""

GENERATED_NAME_BYTES = 80
"""Room kept for the names an output directory's writers generate (``unicache-crash-<time>-seed<S>-step<N>.json``)."""

DEFAULT_NAME_MAX = 255
DEFAULT_PATH_MAX = 4096
MOUNTINFO = Path("/proc/self/mountinfo")
_TEMP_PREFIX = ".unicache-"
_TEMP_NAME_BYTES = len(_TEMP_PREFIX) + 16 + len(".tmp")


class OutputPathError(ValueError):
    """An output path is refused; the message names the option, the path and why."""

    def __init__(self, option: str, path: str | os.PathLike[str], reason: str) -> None:
        self.option = option
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"{option} {self.path}: {reason}")


class OutputWriteError(Exception):
    """Writing a checked output failed anyway (disk full, I/O error); the previous file, if any, is intact."""

    def __init__(self, option: str, path: str | os.PathLike[str], reason: str) -> None:
        self.option = option
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"{option} {self.path}: {reason}")


def _kind(mode: int) -> str | None:
    """What a non-regular file is, for a refusal; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _absolute(path: str | os.PathLike[str], option: str) -> str:
    text = os.fspath(path)
    if not text:
        raise OutputPathError(option, text, "is empty")
    if "\0" in text:
        raise OutputPathError(option, text.replace("\0", "\\0"), "contains a NUL byte")
    return os.path.abspath(text)


def _nearest_existing(absolute: str, option: str, shown: str) -> str:
    """The deepest existing ancestor of ``absolute`` (itself excluded); it must be a directory."""
    probe = os.path.dirname(absolute)
    while True:
        try:
            st = os.stat(probe)
        except FileNotFoundError:
            if os.path.lexists(probe):
                raise OutputPathError(option, shown, f"{probe} is a dangling symbolic link") from None
            probe = os.path.dirname(probe)
            continue
        except NotADirectoryError:
            probe = os.path.dirname(probe)
            continue
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                probe = os.path.dirname(probe)
                continue
            raise OutputPathError(option, shown, f"cannot look up {probe} ({exc.strerror or exc})") from None
        if not stat.S_ISDIR(st.st_mode):
            raise OutputPathError(option, shown, f"{probe} is not a directory")
        return probe


def _limits(directory: str) -> tuple[int, int]:
    """(NAME_MAX, PATH_MAX) of the filesystem holding ``directory``."""
    values = []
    for name, default in (("PC_NAME_MAX", DEFAULT_NAME_MAX), ("PC_PATH_MAX", DEFAULT_PATH_MAX)):
        try:
            value = os.pathconf(directory, name) if hasattr(os, "pathconf") else -1
        except (OSError, ValueError):
            value = -1
        values.append(value if value > 0 else default)
    return values[0], values[1]


def _check_lengths(absolute: str, existing: str, extra_name_bytes: int, option: str, shown: str) -> None:
    name_max, path_max = _limits(existing)
    for part in absolute.split(os.sep):
        size = len(os.fsencode(part))
        if size > name_max:
            start = part[:24] + "..." if len(part) > 27 else part
            raise OutputPathError(option, shown, f"the name {start!r} is {size} bytes, more than this "
                                                 f"filesystem's NAME_MAX of {name_max}")
    size = len(os.fsencode(absolute)) + extra_name_bytes + 1
    if size > path_max:
        raise OutputPathError(option, shown, f"the path is {size} bytes (with the names written next to it), "
                                             f"more than PATH_MAX of {path_max}")


def _unescape_mount_field(field: bytes) -> str:
    """A mountinfo field with its octal escapes (``\\040`` for a space) undone."""
    return os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field))


def _mount_of(real: str) -> tuple[str, str] | None:
    """(mount point, filesystem type) holding the resolved path ``real``, from /proc/self/mountinfo."""
    try:
        text = MOUNTINFO.read_bytes()
    except OSError:
        return None
    best: tuple[str, str] | None = None
    for line in text.splitlines():
        fields = line.split(b" ")
        if b"-" not in fields[6:]:
            continue
        sep = fields.index(b"-", 6)
        if sep + 1 >= len(fields):
            continue
        point = _unescape_mount_field(fields[4])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, os.fsdecode(fields[sep + 1]))
    return best


def _check_ordinary_filesystem(directory: str, option: str, shown: str) -> None:
    real = os.path.realpath(directory)
    for tree in REFUSED_TREES:
        inside = real == tree or real.startswith(tree + "/")
        allowed = any(real == ok or real.startswith(ok + "/") for ok in ALLOWED_UNDER_REFUSED)
        if inside and not allowed:
            raise OutputPathError(option, shown, f"is under {tree}, a special filesystem (outputs go to "
                                                 "an ordinary directory)")
    mount = _mount_of(real)
    if mount is not None and mount[1] in REFUSED_FILESYSTEMS:
        raise OutputPathError(option, shown, f"is on {mount[0]}, a {mount[1]} filesystem (outputs go to "
                                             "an ordinary directory)")


def _check_can_create_in(directory: str, option: str, shown: str) -> None:
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputPathError(option, shown, f"directory {directory} is not writable")
    probe = os.path.join(directory, f"{_TEMP_PREFIX}probe-{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        raise OutputPathError(option, shown, f"cannot create files in {directory} "
                                             f"({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)


def _check_parent(absolute: str, existing: str, option: str, shown: str, *, create_parents: bool) -> None:
    parent = os.path.dirname(absolute)
    if existing != parent and not create_parents:
        raise OutputPathError(option, shown, f"directory {parent} does not exist (create it first)")
    _check_ordinary_filesystem(existing, option, shown)
    _check_can_create_in(existing, option, shown)


def check_file(path: str | os.PathLike[str], option: str, *, create_parents: bool = True) -> Path:
    """Refuse ``path`` unless a regular file can be written there atomically; returns its absolute path.

    ``create_parents``: whether missing parent directories may be created when it is written
    (the REPL creates none).
    """
    shown = os.fspath(path)
    absolute = _absolute(path, option)
    existing = _nearest_existing(absolute, option, shown)
    temp_room = max(0, _TEMP_NAME_BYTES - len(os.fsencode(os.path.basename(absolute))))
    _check_lengths(absolute, existing, temp_room, option, shown)
    try:
        st = _lstat(absolute)
    except OSError as exc:
        raise OutputPathError(option, shown, f"cannot look it up ({exc.strerror or exc})") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise OutputPathError(option, shown, "is a symbolic link (outputs never write through one; "
                                                 "give the path of the file itself)")
        kind = _kind(st.st_mode)
        if kind is not None:
            raise OutputPathError(option, shown, f"is {kind}, not a regular file")
        if not os.access(absolute, os.W_OK):
            raise OutputPathError(option, shown, "is not writable")
    _check_parent(absolute, existing, option, shown, create_parents=create_parents)
    return Path(absolute)


def check_directory(path: str | os.PathLike[str], option: str, *, create: bool = True) -> Path:
    """Refuse ``path`` unless files with generated names can be written in it; returns its absolute path.

    The directory may be a symbolic link to one. ``create``: whether it may be missing (it is
    created when the first file is written).
    """
    shown = os.fspath(path)
    absolute = _absolute(path, option)
    existing = _nearest_existing(absolute, option, shown)
    _check_lengths(absolute, existing, GENERATED_NAME_BYTES + 1, option, shown)
    try:
        st: os.stat_result | None = os.stat(absolute)
    except FileNotFoundError:
        st = None
        if os.path.lexists(absolute):
            raise OutputPathError(option, shown, "is a dangling symbolic link") from None
    except OSError as exc:
        raise OutputPathError(option, shown, f"cannot look it up ({exc.strerror or exc})") from None
    if st is None:
        if not create:
            raise OutputPathError(option, shown, "directory does not exist (create it first)")
        _check_parent(absolute, existing, option, shown, create_parents=True)
        return Path(absolute)
    if not stat.S_ISDIR(st.st_mode):
        raise OutputPathError(option, shown, "is not a directory")
    _check_ordinary_filesystem(absolute, option, shown)
    _check_can_create_in(absolute, option, shown)
    return Path(absolute)


class _Entry:
    """One checked path of a command: what it is for and how to recognise the same file."""

    __slots__ = ("option", "shown", "real", "inode", "kind")

    def __init__(self, option: str, shown: str, kind: str) -> None:
        self.option = option
        self.shown = shown
        self.kind = kind
        self.real = os.path.realpath(os.path.abspath(shown))
        try:
            st = os.stat(self.real)
        except OSError:
            self.inode: tuple[int, int] | None = None
        else:
            self.inode = (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None

    def same_file(self, other: _Entry) -> bool:
        return self.real == other.real or (self.inode is not None and self.inode == other.inode)

    def contains(self, other: _Entry) -> bool:
        """Whether ``other`` lies below this path (so this one must be a directory)."""
        return other.real.startswith(self.real.rstrip(os.sep) + os.sep)


class OutputSet:
    """The outputs and inputs of one command: each checked as it is added, and no two the same file.

    Add the inputs first, then the outputs; the first conflict raises :class:`OutputPathError`
    naming both options.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def input(self, path: str | os.PathLike[str], option: str) -> None:
        """A file the command reads: no output may be it (a path with a NUL byte names no file: ignored,
        its reader refuses it)."""
        if "\0" not in os.fspath(path):
            self._entries.append(_Entry(option, os.fspath(path), "input"))

    def file(self, path: str | os.PathLike[str], option: str, *, create_parents: bool = True) -> Path:
        """An output file (see :func:`check_file`); returns its absolute path."""
        absolute = check_file(path, option, create_parents=create_parents)
        self._add(_Entry(option, os.fspath(path), "file"))
        return absolute

    def directory(self, path: str | os.PathLike[str], option: str, *, create: bool = True) -> Path:
        """An output directory (see :func:`check_directory`); returns its absolute path."""
        absolute = check_directory(path, option, create=create)
        self._add(_Entry(option, os.fspath(path), "directory"))
        return absolute

    def _add(self, new: _Entry) -> None:
        for old in self._entries:
            reason = self._conflict(old, new)
            if reason is not None:
                raise OutputPathError(new.option, new.shown, reason)
        self._entries.append(new)

    @staticmethod
    def _conflict(old: _Entry, new: _Entry) -> str | None:
        what = "the input" if old.kind == "input" else "the output"
        if old.same_file(new) and not (old.kind == new.kind == "directory"):
            return f"is the same file as {what} {old.option} {old.shown}"
        if new.kind == "file" and new.contains(old) and old.kind != "input":
            return f"would be a file where {old.option} {old.shown} needs a directory"
        if old.kind == "file" and old.contains(new):
            return f"needs {old.option} {old.shown} to be a directory, but it is an output file"
        return None


def _open_temp(directory: str) -> tuple[int, str]:
    """A new temp file in ``directory``, mode 0666 less the umask (as any new file)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    while True:
        tmp = os.path.join(directory, f"{_TEMP_PREFIX}{secrets.token_hex(8)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def _copy_owner_and_mode(fd: int, old: os.stat_result) -> None:
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.fchown(fd, old.st_uid, old.st_gid)
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_directory(directory: str) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(dir_fd)


def write_atomic(path: str | os.PathLike[str], data: bytes, option: str) -> Path:
    """Replace ``path`` with ``data`` atomically (see the module docstring); returns its absolute path.

    Raises :class:`OutputPathError` if the target is no longer a regular file or missing path, and
    :class:`OutputWriteError` if writing fails; in both cases nothing was replaced.
    """
    shown = os.fspath(path)
    absolute = _absolute(path, option)
    directory = os.path.dirname(absolute)
    try:
        os.makedirs(directory, exist_ok=True)
        old = _lstat(absolute)
    except OSError as exc:
        raise OutputWriteError(option, shown, f"could not be written ({exc.strerror or exc})") from None
    if old is not None and stat.S_ISLNK(old.st_mode):
        raise OutputPathError(option, shown, "is a symbolic link (outputs never write through one); not written")
    kind = None if old is None else _kind(old.st_mode)
    if kind is not None:
        raise OutputPathError(option, shown, f"is {kind}, not a regular file; not written")
    tmp: str | None = None
    try:
        fd, tmp = _open_temp(directory)
        try:
            if old is not None:
                _copy_owner_and_mode(fd, old)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, absolute)
        tmp = None
    except OSError as exc:
        raise OutputWriteError(option, shown, f"could not be written ({exc.strerror or exc}); "
                                              "the previous file, if any, is unchanged") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    try:
        _fsync_directory(directory)
    except OSError as exc:
        raise OutputWriteError(option, shown, f"was written, but its directory could not be synced "
                                              f"({exc.strerror or exc})") from None
    return Path(absolute)

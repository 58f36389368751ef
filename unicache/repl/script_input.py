"""Reading a script's lines with bounded, validated input: a size cap, a line cap, UTF-8 checked.

A script file (`--script FILE`) must be a regular file of at most
`MAX_SCRIPT_BYTES`; it is read and checked whole before its first command
runs, so a bad byte on line 40 runs nothing. Standard input (`--script -`, or
piped) is a stream: each line is checked as it arrives (a command may be
waiting for the answer to the previous one), and only the line cap bounds it.
Every refusal is one `ScriptInputError` naming the file and the line.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from unicache.repl.errors import ReplError

MAX_SCRIPT_BYTES = 64 * 1024 * 1024
MAX_LINE_BYTES = 8 * 1024 * 1024
STDIN_NAME = "<stdin>"


class ScriptInputError(ReplError):
    """A script that cannot be read as one: not a regular file, too large, a line too long, or not UTF-8.

    `path` is the file as given (`<stdin>` for standard input), `line` the
    1-based line at fault (None when it is about the whole file).
    """

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"script {where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def _decode(raw: bytes, path: str, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScriptInputError(path, line, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})") \
            from None


def _too_long(path: str, line: int) -> ScriptInputError:
    return ScriptInputError(path, line, f"line longer than {MAX_LINE_BYTES} bytes (the per-line cap)")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a file"


def read_script(path: str) -> list[str]:
    """Every line of script file `path` (without line ends), checked before any runs.

    Refuses what is not a regular file (a FIFO, a device like /dev/zero, a
    directory) without reading from it, so nothing waits on a writer that
    never comes or reads an endless device.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ScriptInputError(path, None, exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ScriptInputError(path, None, f"is {_kind(info.st_mode)}, not a regular file (to run commands "
                                               f"from a pipe, feed them to standard input with '--script -')")
        if info.st_size > MAX_SCRIPT_BYTES:
            raise ScriptInputError(path, None, f"{info.st_size} bytes is over the {MAX_SCRIPT_BYTES}-byte cap")
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise ScriptInputError(path, None, exc.strerror or str(exc)) from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptInputError(path, None, f"more than {MAX_SCRIPT_BYTES} bytes (the cap; it grew while read)")
    lines: list[str] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if len(raw) > MAX_LINE_BYTES:
            raise _too_long(path, number)
        lines.append(_decode(raw, path, number).removesuffix("\r"))
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def stream_lines(stream: BinaryIO, path: str = STDIN_NAME) -> Iterator[str]:
    """The lines of `stream` as they arrive, each checked (line cap, UTF-8) before it is yielded."""
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES and not (len(raw) == MAX_LINE_BYTES + 1 and raw.endswith(b"\n")):
            raise _too_long(path, number)
        yield _decode(raw, path, number).removesuffix("\n").removesuffix("\r")

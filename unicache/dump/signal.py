"""A dump of a running process on `SIGUSR1`, written at the process's next safe point.

A signal handler runs between two bytecodes of the main thread, possibly
inside a cache operation, so it only records the request; the process
writes the dump where its cache is consistent: the replay between two
steps (`unicache.engine.live`), a serving engine at a point of its own loop
(`SignalDumper.poll()`). The document is the crash-dump format with no
error (``extra.live_dump`` true): ``unicache repl --dump FILE`` opens it.
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from unicache.dump.schema import JSONObject
from unicache.dump.writer import capture, write_document
from unicache.outputs import OutputPathError, OutputWriteError

if TYPE_CHECKING:
    from unicache.cache import UniCache

DUMP_SIGNAL = signal.SIGUSR1


class DumpRequest:
    """Set by the dump signal; taken (and cleared) at a safe point. `written` lists the dumps so far."""

    __slots__ = ("pending", "written")

    def __init__(self) -> None:
        self.pending = False
        self.written: list[Path] = []

    def take(self) -> bool:
        """Whether a dump was asked for since the last take."""
        asked, self.pending = self.pending, False
        return asked

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True


@contextmanager
def dump_on_signal(sig: signal.Signals = DUMP_SIGNAL) -> Iterator[DumpRequest]:
    """While the block runs, `sig` asks for a dump instead of killing the process (main thread only)."""
    request = DumpRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = signal.signal(sig, request.handler)
    try:
        yield request
    finally:
        signal.signal(sig, previous)


def live_dump_name(seed: int | None, step: int | None) -> str:
    """``unicache-live-<time>[-seed<S>][-step<N>]-<pid>.json``."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    seed_part = "" if seed is None else f"-seed{seed}"
    step_part = "" if step is None else f"-step{step}"
    return f"unicache-live-{stamp}{seed_part}{step_part}-{os.getpid()}.json"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class SignalDumper:
    """For a long-lived process using our core: `install()` the handler, call `poll()` at a safe point.

    `capture` builds the document (default: the crash-dump capture of `cache`
    with ``live_dump`` in its extra section; required when `cache` is None, as
    for SGLang tree core ``"unicache"``, which captures itself); dumps go into
    `directory`. A dump that cannot be written is one line through `say`, and
    the process carries on.
    """

    def __init__(self, cache: UniCache | None, directory: Path, *,
                 capture: Callable[[], JSONObject] | None = None,
                 say: Callable[[str], None] = _say, sig: signal.Signals = DUMP_SIGNAL) -> None:
        if cache is None and capture is None:
            raise TypeError("SignalDumper: give the cache to dump, or a capture function")
        self.cache = cache
        self.directory = Path(directory)
        self.capture = capture if capture is not None else self._capture
        self.say = say
        self.sig = sig
        self.request = DumpRequest()
        self._previous: object = None

    def _capture(self) -> JSONObject:
        cache = self.cache
        assert cache is not None
        return capture(cache, extra={"live_dump": True})

    def install(self) -> None:
        """Take over `sig` (main thread only: Python runs signal handlers there)."""
        self._previous = signal.signal(self.sig, self.request.handler)

    def uninstall(self) -> None:
        previous = self._previous
        if callable(previous) or isinstance(previous, (int, signal.Handlers)):
            signal.signal(self.sig, previous)

    def poll(self) -> Path | None:
        """Write the dump the signal asked for, if any; the path written (None: none asked, or it failed)."""
        if not self.request.take():
            return None
        try:
            path = write_document(self.capture(), self.directory / live_dump_name(None, None), option="live dump")
        except (OutputPathError, OutputWriteError) as exc:
            self.say(f"unicache: live dump not written: {exc}")
            return None
        self.request.written.append(path)
        self.say(f"unicache: live dump written to {path} (open it with unicache repl --dump)")
        return path

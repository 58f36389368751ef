"""SIGINT/SIGTERM as a request to stop at the next step boundary, not a traceback.

Inside :func:`stop_on_signals` the first SIGINT or SIGTERM only sets the
returned :class:`StopFlag`; the run loop checks it between steps, stops, and
reports what it has. A second signal raises :class:`KeyboardInterrupt` at once
(for a loop that does not come back). Handlers are restored on exit.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_INTERRUPTED = 130
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


class StopFlag:
    """Set once a stop signal arrived; ``signal_name`` says which."""

    __slots__ = ("signal_name",)

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None

    def set(self, name: str) -> None:
        self.signal_name = name


@contextmanager
def stop_on_signals() -> Iterator[StopFlag]:
    """Catch SIGINT/SIGTERM into a flag while the block runs (main thread only; else a no-op flag)."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if flag:
            raise KeyboardInterrupt
        flag.set(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield flag
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)

"""Ctrl-C during a REPL command: a request to stop the command at its next step boundary.

While :func:`catch_interrupt` is active (the script and interactive loops
hold it around each command), SIGINT only sets the session's `StopFlag`;
every further SIGINT does the same, so a step is never cut in the middle.
The step loops (`step N`, `run until`, `ack all`) check the flag between steps through
:class:`StepLoop` and stop with `CommandInterrupted`: the last step completed,
the next one never started, the session is as consistent as after any
command. A command without steps just finishes. SIGTERM keeps its default
action (the process ends).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from unicache.engine.interrupt import EXIT_INTERRUPTED, StopFlag
from unicache.repl.errors import CommandInterrupted
from unicache.repl.session import Session

__all__ = ["EXIT_INTERRUPTED", "FIRST_NOTICE", "StepLoop", "catch_interrupt"]

FIRST_NOTICE = 500


@contextmanager
def catch_interrupt(session: Session) -> Iterator[StopFlag]:
    """Give `session` a fresh stop flag that SIGINT sets while the block runs (main thread only).

    The yielded flag says afterwards whether a SIGINT came; the session gets
    a clear one back, so a command run later is not stopped by it.
    """
    flag = StopFlag()
    session.stop = flag
    try:
        if threading.current_thread() is not threading.main_thread():
            yield flag
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            flag.set(signal.Signals(signum).name)

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield flag
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        session.stop = StopFlag()


class StepLoop:
    """The step loop of one long command: stops it between steps on Ctrl-C, and tells an interactive
    user that it is still running (after `FIRST_NOTICE` steps, then at every doubling)."""

    __slots__ = ("session", "command", "unit", "notice")

    def __init__(self, session: Session, command: str, unit: str = "step") -> None:
        self.session = session
        self.command = command
        self.unit = unit
        self.notice = FIRST_NOTICE

    def between_steps(self, steps: int, pending: str) -> None:
        """Call before each step after the first `steps`; `pending` says what is not done yet.

        Raises `CommandInterrupted` when a stop was requested.
        """
        s = self.session
        stop = s.stop
        if stop:
            cache = s.cache
            raise CommandInterrupted(self.command, stop.signal_name or "SIGINT", steps,
                                     cache.ledger.step if cache is not None else None, pending, self.unit)
        if steps >= self.notice:
            self.notice *= 2
            if s.notify is not None:
                s.notify(f"{self.command}: {steps} {self.unit}s so far, {pending}; Ctrl-C stops it after the "
                         f"current {self.unit}")

"""Progress as plain log lines, for a stderr that is not a terminal (CI logs, pipes, `2> file`).

A live progress bar redraws one line in place; in a log it prints nothing
until the end. So when stderr is not a terminal, `replay` and `simulate`
print a line instead: when the first item finishes, then at every
twentieth of the total, and at the end. Milestones are counts, never
clocks, so a run prints the same lines however fast the machine is; a
process that drives a run (a test, a supervisor) can wait for the first
line to know the run is under way.
"""

from __future__ import annotations

from typing import IO

MILESTONES = 20
"""Lines per run besides the first item's: one at every 1/MILESTONES of the total."""


class ProgressLog:
    """Prints ``LABEL: DONE/TOTAL NOUN[ · DETAIL]`` when ``done`` crosses the next milestone."""

    __slots__ = ("_label", "_noun", "_total", "_stream", "_step", "_next")

    def __init__(self, label: str, noun: str, total: int, stream: IO[str]) -> None:
        self._label = label
        self._noun = noun
        self._total = total
        self._stream = stream
        self._step = max(1, -(-total // MILESTONES))
        self._next = 1

    def update(self, done: int, detail: str = "") -> None:
        """Report ``done`` finished items when it has reached the next milestone (at most one line a call)."""
        if done < self._next:
            return
        self._next = (done // self._step + 1) * self._step if done < self._total else self._total + 1
        tail = f" · {detail}" if detail else ""
        print(f"{self._label}: {done}/{self._total} {self._noun}{tail}", file=self._stream, flush=True)

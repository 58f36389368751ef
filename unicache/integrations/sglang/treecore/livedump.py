"""A live dump of tree core ``"unicache"`` on SIGUSR1, taken at the core's next safe point; the process carries on.

Built with the core, in SGLang's scheduler process: its scheduler runs on
the process's main thread, the one Python delivers signals to, so the core
takes over ``SIGUSR1`` there (`unicache.dump.signal.SignalDumper`; a core
built on another thread takes no signal, and the last core built in a
process is the one dumped). The handler only sets a flag. The core looks
at it where SGLang calls it every scheduler iteration and its state is
consistent: the entry of `match_prefix` (every new request) and of
`evictable_size` (the scheduler's pool and scheduling checks, busy or
idle), outside an eviction walk or a suspended insert (`poll` waits for the
next such call then). The dump (``extra.live_dump`` true) goes into the
dump directory (`dump.dump_directory`) as ``unicache-live-<time>-<pid>.json``,
a line on stderr names it, and a dump that cannot be written is one line
there too.
"""

from __future__ import annotations

import threading
from pathlib import Path
from unicache.dump.schema import JSONObject
from unicache.dump.signal import DumpRequest, SignalDumper
from unicache.integrations.sglang.treecore.dump import capture_core
from unicache.integrations.sglang.treecore.failures import DumpedCore


class LiveDump:
    """One core's SIGUSR1 dumps: `request.pending` is the flag the core reads; `poll()` writes the dump."""

    __slots__ = ("core", "dumper", "request")

    def __init__(self, core: DumpedCore, directory: Path | None) -> None:
        self.core = core
        self.dumper: SignalDumper | None = None
        self.request = DumpRequest()
        if directory is None or threading.current_thread() is not threading.main_thread():
            return
        dumper = SignalDumper(None, directory, capture=self._capture)
        dumper.install()
        self.dumper = dumper
        self.request = dumper.request

    def _capture(self) -> JSONObject:
        with self.core.failure_dumps.suspended():
            return capture_core(self.core, extra={"live_dump": True})

    @property
    def written(self) -> list[Path]:
        return self.request.written

    def poll(self) -> Path | None:
        """Write the dump asked for if the core is at a safe point (else leave it asked); the path written."""
        dumper = self.dumper
        if dumper is None or not self.core.between_walks():
            return None
        return dumper.poll()

"""`SignalDumper`: SIGUSR1 to a running process using our core writes a dump the REPL loader opens.

The child prints a line when its handler is installed and then works and
polls until the dump is written; the test signals after reading that line
(no sleep), then reads the path from the child's stderr.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from unicache.dump import load_dump

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from pathlib import Path
from unicache import CacheConfig, UniCache, Full
from unicache.dump.signal import SignalDumper
cache = UniCache(CacheConfig(device_tokens=64, dtype="int32", device="cpu", kv_width=4))
dumper = SignalDumper(cache, Path(sys.argv[1]))
dumper.install()
tokens = list(range(1, 9))
pages = cache.alloc_device(Full, 8)
cache.insert(tokens, pages)
receipt = cache.lock(cache.match_prefix(tokens).device_node)
print("ready", file=sys.stderr, flush=True)
while not dumper.request.written:
    cache.match_prefix(tokens)
    dumper.poll()
cache.unlock(receipt)
print("done", file=sys.stderr, flush=True)
"""


def test_sigusr1_dumps_a_running_process_without_stopping_it(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=ROOT, text=True,
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().strip() == "ready"
        proc.send_signal(signal.SIGUSR1)
        line = proc.stderr.readline()
        match = re.search(r"live dump written to (\S+)", line)
        assert match, line
        assert proc.stderr.readline().strip() == "done"
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    dump = load_dump(Path(match.group(1)))
    assert dump.error is None and dump.extra["live_dump"] is True
    (lease,) = dump.leases.values()
    assert lease.component == "full" and lease.owner.startswith("lock")

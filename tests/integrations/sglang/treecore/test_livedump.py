"""SIGUSR1 to a separate process running SGLang's cache on tree core "unicache": a dump the REPL opens, no stop.

The child builds SGLang's `UnifiedRadixCache` with tree core ``"unicache"``
as the other tests do (`workload.build_cache`), locks one node, prints a ready
line naming it and the lock, and runs a workload loop (match, insert, lock,
unlock) until its core has written the dump, then a few more iterations,
and exits 0. The test signals after reading the ready line and reads the
dump's path from the child's stderr (no sleeps). The REPL on the dump names
the held lock on that node.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from unicache.dump import load_dump
from unicache.repl import main

ROOT = Path(__file__).resolve().parents[4]

CHILD = """
import json, logging, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
from tests.integrations.sglang.chains import insert_tokens, node_of
from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.workload import build_cache

setup = build_cache(backend="unicache", mamba=False, device_tokens=256, max_context_len=64)
cache = setup.cache
core = cache.tree_core
assert isinstance(core, UnicacheTreeCore) and core.live_dump.dumper is not None
insert_tokens(setup, list(range(1, 17)))
held = node_of(setup, list(range(1, 17)))
receipt = cache.inc_lock_ref(held)
print("READY " + json.dumps({"node": held, "lock": str(receipt)}), flush=True)
i = after = 0
while after < 5:
    i += 1
    tokens = list(range(1, 9)) + [100 + i % 7, 200 + i % 3]
    insert_tokens(setup, tokens)
    node = node_of(setup, tokens)
    lock = cache.inc_lock_ref(node)
    cache.dec_lock_ref(node, lock.to_dec_params())
    if core.live_dump.written:
        after += 1
cache.dec_lock_ref(held, receipt.to_dec_params())
cache.sanity_check()
cache.release_host_resources()
print("DONE " + json.dumps({"iterations": i, "dumps": [str(p) for p in core.live_dump.written]}), flush=True)
"""


def _line(stream: object, prefix: str) -> str:
    """The first line of `stream` starting with `prefix` (SGLang may print other lines first)."""
    assert hasattr(stream, "readline")
    while True:
        line: str = stream.readline()
        assert line, f"the child ended before printing {prefix!r}"
        if line.startswith(prefix) or prefix in line:
            return line


def test_sigusr1_dumps_a_running_sglang_process_and_the_repl_opens_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), UNICACHE_SGLANG_DUMP_DIR=str(tmp_path / "dumps"))
    proc = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready = json.loads(_line(proc.stdout, "READY ").split(" ", 1)[1])
        proc.send_signal(signal.SIGUSR1)
        written = _line(proc.stderr, "live dump written to")
        match = re.search(r"live dump written to (\S+)", written)
        assert match, written
        done = json.loads(_line(proc.stdout, "DONE ").split(" ", 1)[1])
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    path = Path(match.group(1))
    assert done["dumps"] == [str(path)] and path.parent == (tmp_path / "dumps").resolve()
    assert re.fullmatch(r"unicache-live-\d{8}-\d{6}-\d+\.json", path.name)
    dump = load_dump(path)
    assert dump.error is None and dump.extra["live_dump"] is True and dump.extra["tree_core"] == "unicache"
    assert dump.revalidate() == [] and dump.sanity is not None and dump.sanity.ok
    script = tmp_path / "look.repl"
    script.write_text(f"pins #{ready['node']}\nleases\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["--dump", str(path), "--script", str(script), "--json"]) == 0
    pins, leases = (json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip())
    owners = [x["owner"] for x in pins["components"]["full"]["leases"]]
    assert owners == [ready["lock"]]
    assert [x["owner"] for x in leases["leases"]] == [ready["lock"]]  # the loop's own locks come and go


def test_in_process_the_signal_is_served_at_evictable_size_but_not_inside_an_eviction_walk() -> None:
    """The scheduler's idle loop calls only the sizes: the dump is taken there, once no walk is open."""
    from sglang.srt.mem_cache.unified_cache.components import ComponentType

    from tests.integrations.sglang.chains import insert_tokens
    from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
    from unicache.integrations.sglang.workload import build_cache

    setup = build_cache(backend="unicache", mamba=False, device_tokens=64, max_context_len=64)
    core = setup.cache.tree_core
    assert isinstance(core, UnicacheTreeCore) and core.live_dump.dumper is not None
    insert_tokens(setup, list(range(1, 9)))
    request = core.live_dump.request

    def asked() -> bool:
        return request.pending

    os.kill(os.getpid(), signal.SIGUSR1)  # Python runs the handler at the next bytecode of this thread
    assert asked()
    core.evict_device_start(ComponentType.FULL, 1)
    core.evictable_size()
    assert core.live_dump.written == [] and asked()  # a walk is open: wait
    core.evict_device_end(ComponentType.FULL)
    assert core.evictable_size() == 8
    (path,) = core.live_dump.written
    assert not asked()
    dump = load_dump(path)
    assert dump.extra["live_dump"] is True and dump.revalidate() == [] and len(dump.nodes) == 2
    setup.cache.release_host_resources()

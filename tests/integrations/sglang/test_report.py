"""The reset report on SGLang's real cache: sanity check, leases, locks; and its hook through SGLang's plugins.

The oracle for leases and locks is what the test itself holds: one device
lock taken through SGLang's API is one live lease in the lease cores and
its path's tokens protected in every core; after its release, none. A
corrupted leaf set is one SGLang's own sanity check names. The hook test
runs SGLang's `load_plugins()` in a fresh interpreter (it patches
`UnifiedRadixCache.reset` for the life of the process) and resets a cache
there, as a server's ``/flush_cache`` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from array import array
from pathlib import Path

import pytest
from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey

from tests.integrations.sglang.chains import X, insert_tokens
from unicache.integrations.sglang.core import LeaseTreeCore
from unicache.integrations.sglang.report import (
    RESET_REPORT_ENV,
    append_report,
    install_reset_report,
    reset_report,
)
from unicache.integrations.sglang.workload import build_cache

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("backend", ["python", "rust", "leases", "unicache"])
def test_a_held_lock_is_a_live_lease_and_protected_tokens_until_released(backend: str) -> None:
    setup = build_cache(backend=backend, mamba=False, device_tokens=256)
    cache = setup.cache
    insert_tokens(setup, X)
    idle = reset_report(cache)
    assert idle["sanity_check"] == "clean" and idle["protected_tokens"] == 0
    assert idle["live_leases"] == (None if backend in ("python", "rust") else 0)
    node = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", X)))).last_device_node
    lock = cache.lock(node)
    held = reset_report(cache)
    assert held["protected_tokens"] == len(X)
    assert held["live_leases"] == (None if backend in ("python", "rust") else 1)
    cache.unlock(lock)
    after = reset_report(cache)
    assert after["protected_tokens"] == 0 and after["sanity_check"] == "clean"
    assert after["live_leases"] == (None if backend in ("python", "rust") else 0)
    assert after["ongoing_load_back"] == 0 and after["ongoing_write_through"] == 0


def test_a_failed_sanity_check_is_reported_with_its_error() -> None:
    setup = build_cache(backend="leases", mamba=False, device_tokens=256)
    insert_tokens(setup, X)
    core = setup.cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    core.evictable_device_leaves.clear()
    report = reset_report(setup.cache)
    assert str(report["sanity_check"]).startswith("AssertionError") and "D-leaf missing" in str(
        report["sanity_check"]
    ), report


def test_append_report_writes_one_json_line_each(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    append_report(str(path), {"a": 1})
    append_report(str(path), {"b": [2]})
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"a": 1}, {"b": [2]}]


def test_an_empty_report_path_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RESET_REPORT_ENV, "")
    with pytest.raises(ValueError, match=RESET_REPORT_ENV):
        install_reset_report()


def test_load_plugins_installs_the_hook_and_each_reset_reports(tmp_path: Path) -> None:
    path = tmp_path / "report.jsonl"
    script = textwrap.dedent("""
        from sglang.srt.plugins import load_plugins
        load_plugins()
        from tests.integrations.sglang.chains import X, insert_tokens
        from unicache.integrations.sglang.workload import build_cache
        setup = build_cache(backend="unicache", mamba=False, device_tokens=256)
        insert_tokens(setup, X)
        setup.cache.reset()
        setup.cache.reset()
    """)
    env = {**os.environ, RESET_REPORT_ENV: str(path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["tree_core"], r["sanity_check"], r["live_leases"]) for r in reports] == [
        ("UnicacheTreeCore", "clean", 0), ("UnicacheTreeCore", "clean", 0)
    ], "construction's reset is not reported; each later reset is, once"
    assert reports[0]["evictable_tokens"] == len(X) and reports[1]["evictable_tokens"] == 0

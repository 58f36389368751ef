"""The `leasecheck` command: exit status, mypy's lines unchanged, options, incremental reuse."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mypy import api

from leases.check.runner import CACHE_SUBDIR, FINDINGS_FILE, main_run

LEAKY = '''from leases import LeaseLedger


class Full: ...


def work(ledger: LeaseLedger) -> int:
    lease = ledger.acquire(Full, owner="leaky")
    count: int = "three"
    return lease.id + count
'''

CLEAN = '''from leases import LeaseLedger


class Full: ...


def work(ledger: LeaseLedger) -> int:
    lease = ledger.acquire(Full, owner="clean")
    return lease.release().id
'''


def run(*argv: str) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main_run(list(argv), stdout=out, stderr=err)
    return code, out.getvalue().splitlines(), err.getvalue()


def write(directory: Path, name: str, text: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return str(path)


def common(cache: Path) -> list[str]:
    return ["--strict", "--config-file=", "--hide-error-context", f"--cache-dir={cache}"]


def test_clean_file_exits_zero_with_mypys_summary(tmp_path: Path, mypy_cache: Path) -> None:
    path = write(tmp_path, "cli_clean.py", CLEAN)
    code, lines, err = run(*common(mypy_cache), path)
    assert (code, err) == (0, "")
    assert lines == ["Success: no issues found in 1 source file"]


def test_mypy_lines_come_first_unchanged_then_ownership(tmp_path: Path, mypy_cache: Path) -> None:
    path = write(tmp_path, "cli_leaky.py", LEAKY)
    code, lines, _ = run(*common(mypy_cache), "--no-error-summary", path)
    plain_out, _, plain_status = api.run(
        ["--strict", "--config-file=", "--hide-error-context", "--no-error-summary",
         f"--cache-dir={mypy_cache}", path]
    )
    plain = plain_out.splitlines()
    assert plain_status == 1 and plain and "[assignment]" in plain[0]
    assert code == 1
    assert lines[: len(plain)] == plain
    assert lines[len(plain):] == [
        f'{path}:8: error: Lease "lease" is not released or transferred before return at line 10'
        "  [lease-leak]"
    ]


def test_summary_counts_ownership_errors(tmp_path: Path, mypy_cache: Path) -> None:
    path = write(tmp_path, "cli_summary.py", LEAKY)
    code, lines, _ = run(*common(mypy_cache), path)
    assert code == 1
    assert lines[-1] == "Found 2 errors in 1 file (checked 1 source file)"


def test_usage_errors_exit_two(tmp_path: Path, mypy_cache: Path) -> None:
    with pytest.raises(SystemExit) as bad_flag:
        run("--no-such-flag", str(tmp_path))
    assert bad_flag.value.code == 2
    code, _, err = run(*common(mypy_cache), str(tmp_path / "missing.py"))
    assert code == 2 and "missing.py" in err


def test_syntax_error_is_a_blocker(tmp_path: Path, mypy_cache: Path) -> None:
    path = write(tmp_path, "cli_broken.py", "def broken(:\n")
    code, lines, _ = run(*common(mypy_cache), path)
    assert code == 2
    assert any("[syntax]" in line for line in lines)


def test_mypy_code_options_apply_to_ownership_codes(tmp_path: Path, mypy_cache: Path) -> None:
    path = write(tmp_path, "cli_codes.py", LEAKY)
    code, lines, _ = run(*common(mypy_cache), "--no-error-summary",
                         "--disable-error-code=lease-leak", path)
    assert code == 1 and not any("lease-leak" in line for line in lines)
    code, lines, _ = run(*common(mypy_cache), "--no-error-summary", "--show-column-numbers",
                         "--output=json", path)
    records = [json.loads(line) for line in lines]
    leak = [r for r in records if r["code"] == "lease-leak"]
    assert code == 1 and len(leak) == 1
    assert (leak[0]["line"], leak[0]["column"], leak[0]["severity"]) == (8, 4, "error")


def test_warm_run_reuses_findings_and_prints_the_same(tmp_path: Path, mypy_cache: Path) -> None:
    path = write(tmp_path, "cli_warm.py", LEAKY)
    first = run(*common(mypy_cache), path)
    findings = mypy_cache / CACHE_SUBDIR / "{}.{}".format(*sys.version_info[:2]) / FINDINGS_FILE
    assert findings.exists()
    second = run(*common(mypy_cache), path)
    assert second == first
    data = json.loads(findings.read_text())
    assert "cli_warm" in data["modules"]


def test_changing_consumes_on_a_dependency_rechecks_its_users(
    tmp_path: Path, mypy_cache: Path
) -> None:
    lib = '''from leases import consumes, linear


@linear
class Token:
    @consumes
    def close(self) -> None: ...

    def peek(self) -> int:
        return 1
'''
    user = '''from cli_dep_lib import Token


def work() -> None:
    token = Token()
    token.close()
'''
    lib_path = write(tmp_path, "cli_dep_lib.py", lib)
    user_path = write(tmp_path, "cli_dep_user.py", user)
    code, lines, _ = run(*common(mypy_cache), "--no-error-summary", lib_path, user_path)
    assert (code, lines) == (0, [])
    write(tmp_path, "cli_dep_lib.py", lib.replace("    @consumes\n", ""))
    code, lines, _ = run(*common(mypy_cache), "--no-error-summary", lib_path, user_path)
    assert code == 1
    assert lines == [
        f'{user_path}:5: error: Token "token" is not consumed or transferred before the end '
        "of the function at line 6  [lease-leak]"
    ]


def test_lost_findings_file_falls_back_to_rechecking(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = write(tmp_path / "src", "cli_lost.py", LEAKY)
    first = run(*common(cache), path)
    findings = cache / CACHE_SUBDIR / "{}.{}".format(*sys.version_info[:2]) / FINDINGS_FILE
    findings.unlink()
    assert run(*common(cache), path) == first
    data = json.loads(findings.read_text())
    data["modules"]["cli_lost"]["key"] = "stale"
    findings.write_text(json.dumps(data))
    assert run(*common(cache), path) == first


def test_console_entry_points(tmp_path: Path, mypy_cache: Path) -> None:
    path = write(tmp_path, "cli_entry.py", LEAKY)
    script = Path(sys.executable).with_name("leasecheck")
    argv = [*common(mypy_cache), "--no-error-summary", path]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    module_run = subprocess.run([sys.executable, "-m", "leases.check", *argv],
                                capture_output=True, text=True, env=env, check=False)
    assert module_run.returncode == 1, module_run.stderr
    assert module_run.stdout.count("\n") == 2
    if script.exists():
        console = subprocess.run([str(script), *argv], capture_output=True, text=True, env=env,
                                 check=False)
        assert (console.returncode, console.stdout) == (1, module_run.stdout)


def test_cold_findings_two_builds_then_one(tmp_path: Path, mypy_cache: Path) -> None:
    """Without a findings file the analysed modules are re-checked from the cache mypy wrote;
    namespace packages (no __init__.py) are skipped, not crashed on."""
    from mypy.main import process_options

    from leases.check.runner import run_check

    cache = tmp_path / "cache"
    run(*common(mypy_cache), write(tmp_path / "warmup", "cli_warmup.py", CLEAN))
    shutil.copytree(mypy_cache, cache)
    for findings in cache.rglob(FINDINGS_FILE):
        findings.unlink()
    write(tmp_path / "proj" / "nspkg", "cli_ns_mod.py", LEAKY)
    outcomes = []
    for _ in range(2):
        sources, options = process_options(
            [*common(cache), "--no-error-summary", "--namespace-packages",
             "--explicit-package-bases", str(tmp_path / "proj")],
        )
        outcomes.append(run_check(sources, options, echo=False))
    cold, warm = outcomes
    assert (cold.builds, cold.analysed, cold.from_cache) == (2, 1, 0)
    assert (warm.builds, warm.analysed, warm.from_cache) == (1, 0, 1)
    assert warm.lease_messages == cold.lease_messages
    assert len(cold.lease_messages) == 1 and "[lease-leak]" in cold.lease_messages[0]


SUSPENDS = '''import asyncio

from leases import LeaseLedger


class Full: ...


async def work(ledger: LeaseLedger) -> int:
    lease = ledger.acquire(Full, owner="held across an await")
    await asyncio.sleep(0)
    return lease.release().id


async def guarded(ledger: LeaseLedger) -> int:
    lease = ledger.acquire(Full, owner="released in finally")
    try:
        await asyncio.sleep(0)
    finally:
        lease.release()
    return 0
'''


def test_lease_exits_makes_await_an_exit(tmp_path: Path, mypy_cache: Path) -> None:
    path = write(tmp_path / "exits", "cli_suspends.py", SUSPENDS)
    code, lines, _ = run(*common(mypy_cache), path)
    assert code == 0, lines
    code, lines, _ = run(*common(mypy_cache), "--lease-exits=await", path)
    assert code == 1
    leaks = [line for line in lines if line.endswith("[lease-leak]")]
    assert len(leaks) == 1 and ":10:" in leaks[0] and "suspension on line 11" in leaks[0], lines


def test_lease_exits_rejects_unknown_points(tmp_path: Path, mypy_cache: Path) -> None:
    code, _, err = run(*common(mypy_cache), "--lease-exits=await,return", str(tmp_path))
    assert code == 2 and "unknown return" in err


ESCAPES = '''from typing import Any

from leases import LeaseLedger, untracked


class Full: ...


def keep(ledger: LeaseLedger, sink: Any) -> None:
    sink.keep(untracked(ledger.acquire(Full, owner="kept"), reason="sink.close() releases it"))


def probe(ledger: LeaseLedger) -> None:
    ledger.acquire(Full, owner="probe")  # lease: ignore[lease-discarded]


def lost(ledger: LeaseLedger, sink: Any) -> None:
    sink.keep(ledger.acquire(Full, owner="lost"))
'''


def test_partial_lists_escapes_and_suppressions_and_counts_them(
    tmp_path: Path, mypy_cache: Path
) -> None:
    path = write(tmp_path / "partial", "cli_partial.py", ESCAPES)
    code, plain, _ = run(*common(mypy_cache), path)
    assert code == 1
    assert [line for line in plain if "[lease-" in line] == [
        f"{path}:18: error: Lease from \"acquire\" flows into an untyped callee or an Any "
        f"parameter, which leasecheck cannot follow; hand it on through a tracked type or "
        f"untracked(..., reason=\"...\")  [lease-untracked]"
    ]
    assert not any("note:" in line for line in plain)
    code, listed, _ = run(*common(mypy_cache), "--partial", path)
    assert code == 1
    notes = [line for line in listed if ": note: " in line]
    assert notes == [
        f"{path}:10: note: escape: untracked(...): sink.close() releases it",
        f"{path}:14: note: suppressed: [lease-discarded] Lease returned by \"acquire\" is discarded",
    ]
    assert ("leasecheck: 2 partial or escaped analyses (1 untracked() escapes, 1 suppressed "
            "findings, 0 partially analysed loops, 0 functions not analysed, 0 blocks mypy found "
            "unreachable)") in listed
    warm = run(*common(mypy_cache), "--partial", path)
    assert warm[1] == listed

"""Every REPL script under tests/repl/scripts runs clean, and together they cover every command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.repl.conftest import SCRIPTS, RunRepl
from unicache.repl.commands import REGISTRY
from unicache.repl.parser import split_line

SCRIPT_FILES = sorted(SCRIPTS.glob("*.repl"))


def test_scripts_exist() -> None:
    assert any(p.name == "production_crash.repl" for p in SCRIPT_FILES)


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=[p.stem for p in SCRIPT_FILES])
def test_script_runs_clean(repl: RunRepl, path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # `dot FILE` / `dump FILE` write here
    run = repl(path.read_text(encoding="utf-8"))
    assert run.failures() == []
    assert run.status == 0


def _lines(expect_error: bool) -> list[tuple[str, tuple[str, ...]]]:
    out = []
    for path in SCRIPT_FILES:
        for text in path.read_text(encoding="utf-8").splitlines():
            line = split_line(text)
            if line is not None and line.expect_error == expect_error:
                out.append((line.name, line.argv))
    return out


def test_scripts_cover_every_command() -> None:
    """Each registered command succeeds somewhere in the scripts, and each one that takes
    arguments also fails somewhere (its error forms are scripted, not only unit-tested)."""
    succeeded = {name for name, _ in _lines(False)}
    failed = {name for name, _ in _lines(True)}
    assert set(REGISTRY) - succeeded == set()
    no_arguments = {name for name, cmd in REGISTRY.items() if cmd.usage == name}
    assert no_arguments == {"reset", "tickets", "stats", "check", "quit"}
    assert set(REGISTRY) - failed - no_arguments == set()


def test_error_forms_fail_with_their_types(repl: RunRepl, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`error_forms.repl`: each '!' line fails with the error class that names what went wrong."""
    monkeypatch.chdir(tmp_path)
    run = repl((SCRIPTS / "error_forms.repl").read_text(encoding="utf-8"))
    assert run.status == 0
    errors = [(e["cmd"], e["error"]["type"]) for e in run.out if not e["ok"]]
    assert errors == [
        ("frobnicate", "CommandSyntaxError"), ("help", "CommandSyntaxError"), ("lock", "UnknownNameError"),
        ("new", "CommandSyntaxError"), ("new", "ConfigError"),
        ("unlock", "UnknownNameError"), ("unlock", "UnknownNameError"), ("insert", "CommandSyntaxError"),
        ("match", "CommandSyntaxError"), ("backup", "UnknownNameError"), ("load-back", "UnknownNameError"),
        ("lock", "HostOnlyNodeError"),
        ("lease", "UnknownNameError"), ("history", "UnknownNameError"), ("history", "UnknownNameError"),
        ("history", "UnknownNameError"), ("history", "CommandSyntaxError"), ("history", "CommandSyntaxError"),
        ("assert", "ConditionError"), ("assert", "ConditionError"), ("assert", "ConditionError"),
        ("run", "ConditionError"), ("run", "ConditionError"),
        ("abandon", "UnknownNameError"), ("time-out", "UnknownTicketError"), ("ack", "UnknownTicketError"),
        ("evict", "CommandSyntaxError"), ("evict", "CommandSyntaxError"), ("evict", "CommandSyntaxError"),
        ("step", "CommandSyntaxError"), ("reclaim", "CommandSyntaxError"),
        ("insert", "CapacityError"), ("insert", "CapacityError"),
        ("leases", "CommandSyntaxError"), ("events", "CommandSyntaxError"), ("overdue", "OptionRangeError"),
        ("tree", "UnknownNameError"),
        ("pins", "UnknownNameError"), ("dot", "UnknownNameError"), ("dump", "CommandSyntaxError"),
        ("dot", "OutputPathError"), ("dump", "OutputPathError"), ("dump", "OutputPathError"),
        ("withhold", "NeedsManualTransferError"),
        ("refuse-alloc", "InvalidArgumentError"), ("refuse-alloc", "CommandSyntaxError"),
    ]
    refused = [e for e in run.of("insert") if not e["ok"] and e["error"]["type"] == "CapacityError"]
    assert [e["error"]["reason"]["kind"] for e in refused] == ["in-flight", "too-large"]
    assert all("everything left is pinned" not in e["error"]["message"] for e in refused)
    assert not Path("no-such-directory").exists()


def test_production_crash_pins(repl: RunRepl) -> None:
    """At the moment of the production crash, the ancestor carries the leaf load-back's Full lease
    and the ancestor load-back's Full and Mamba leases, each owned by its own ticket."""
    run = repl((SCRIPTS / "production_crash.repl").read_text(encoding="utf-8"))
    pins = run.of("pins")[0]
    loads = [e for e in run.out if e["cmd"] == "load-back"][:2]
    leaf, ancestor = loads
    assert leaf["ticket"] == 3 and ancestor["ticket"] == 4
    assert ancestor["anchor"] == pins["node"]
    full = {lease["id"]: lease for lease in pins["components"]["full"]["leases"]}
    mamba = {lease["id"]: lease for lease in pins["components"]["mamba"]["leases"]}
    assert set(full) == {leaf["leases"]["full"], ancestor["leases"]["full"]}
    assert set(mamba) == {ancestor["leases"]["mamba"]}
    assert full[leaf["leases"]["full"]]["tickets"] == [3]
    assert mamba[ancestor["leases"]["mamba"]]["tickets"] == [4]
    assert pins["pinned_by_components"] == ["full", "mamba"]
    # the leaf's Full lease covers the whole evicted chain: ancestor and leaf
    assert full[leaf["leases"]["full"]]["nodes"] == [pins["node"], leaf["anchor"]]

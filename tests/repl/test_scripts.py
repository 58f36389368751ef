"""Every REPL script under tests/repl/scripts runs clean: each command (and each `assert`) succeeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.repl.conftest import SCRIPTS, RunRepl

SCRIPT_FILES = sorted(SCRIPTS.glob("*.repl"))


def test_scripts_exist() -> None:
    assert any(p.name == "production_crash.repl" for p in SCRIPT_FILES)


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=[p.stem for p in SCRIPT_FILES])
def test_script_runs_clean(repl: RunRepl, path: Path) -> None:
    run = repl(path.read_text(encoding="utf-8"))
    assert run.failures() == []
    assert run.status == 0


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

"""The mutation test: every consuming statement in `unicache/` is needed, and leasecheck says so.

One mypy build per run (the mutations are made on the typed tree), so the
whole of `unicache/` is checked in the default suite. A miss is allowed only
with a reason in `leases.check.mutate.EXEMPT` (its SGLang entries belong to
`tests/integrations/sglang/test_leasecheck_mutants.py`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from leases.check.mutate import EXEMPT, run_mutants

ROOT = Path(__file__).resolve().parents[2]
SGLANG = "unicache.integrations.sglang"

HOLDER = '''
from leases import Held, Lease, LeaseLedger, consumes, linear


class Full: ...


@linear
class Holder:
    def __init__(self, lease: Lease[Full, Held]) -> None:
        self.full: Lease[Full, Held] | None = lease

    @consumes
    def close(self) -> None:
        full = self.full
        if full is not None:
            self.full = None
            full.release()


def drain(table: dict[int, Lease[Full, Held]]) -> None:
    while table:
        _, lease = table.popitem()
        lease.release()


def settle(holder: Holder, ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="settle")
    holder.close()
    lease.release()
'''


def test_every_mutant_of_a_holder_module_is_caught(tmp_path: Path, mypy_cache: Path) -> None:
    module = tmp_path / "holder.py"
    module.write_text(HOLDER)
    score = run_mutants(["--strict", "--config-file=", f"--cache-dir={mypy_cache}", str(module)])
    assert score.baseline == []
    kinds = {(m.line, m.kind) for m in score.mutants}
    assert len(kinds) == len(score.mutants) == 8, [m.describe() for m in score.mutants]
    assert not score.misses(), [m.describe() for m in score.misses()]
    assert {(m.line, m.function) for m in score.mutants} == {
        (18, "Holder.close"), (24, "drain"), (29, "settle"), (30, "settle"),
    }


def test_unicache_mutants_are_caught_or_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    score = run_mutants(["--config-file", "mypy.ini", "unicache"])
    assert score.baseline == [], "unicache must be clean before it is mutated"
    assert len(score.mutants) >= 40
    assert not score.unexplained(), "\n".join(m.describe() for m in score.unexplained())
    explained = {m.key for m in score.misses()}
    core = {key for key in EXEMPT if not key[0].startswith(SGLANG)}  # the SGLang ones: its own test
    assert explained <= core
    assert core <= explained, "an exemption no longer needed: remove it"
    assert score.caught >= len(score.mutants) - 3

"""The mutation test on the SGLang integration: every consuming statement there is needed, and leasecheck says so.

Like `tests/leasecheck/test_mutate.py` for the core: one mypy build (with
`mypy-sglang.ini`, in the SGLang venv), every consuming statement of
`unicache/integrations/sglang` deleted and duplicated on the typed tree, and
each mutant must get an ownership finding the unmutated module lacks. A miss
is allowed only with a reason in `leases.check.mutate.EXEMPT`. The build
shares its cache with `leasecheck --config-file mypy-sglang.ini`: about 20 s
warm, several minutes when SGLang's sources are analysed afresh. It runs in a
process of its own (spawned): the build holds gigabytes of mypy's objects,
which in the test process would make every later garbage collection (each
workload replay runs one) crawl.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from leases.check.mutate import EXEMPT, run_mutants

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = "unicache.integrations.sglang"


def test_sglang_integration_mutants_are_caught_or_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        score = pool.submit(run_mutants, ["--config-file", "mypy-sglang.ini", "unicache/integrations/sglang"]).result()
    assert score.baseline == [], "the SGLang integration must be clean before it is mutated"
    assert len(score.mutants) >= 60
    assert not score.unexplained(), "\n".join(m.describe() for m in score.unexplained())
    explained = {m.key for m in score.misses()}
    mine = {key for key in EXEMPT if key[0].startswith(PACKAGE)}
    assert explained <= mine
    assert mine <= explained, "an exemption no longer needed: remove it"
    assert score.caught >= len(score.mutants) - 2

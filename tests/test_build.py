"""Which build the suite runs on: the compiled modules are C extensions exactly when it says so.

`make test` runs pytest twice: in the checkout (pure Python) and in the
compiled copy `build/compiled` with `UNICACHE_BUILD=compiled`. Whatever the
run, the modules of pyproject.toml's `[tool.unicache.compiled]` must all be
extensions (compiled run) or all be sources (any other run).
"""

from __future__ import annotations

import importlib
import os
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = (".so", ".pyd")


def _table() -> dict[str, object]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        table = tomllib.load(f)["tool"]["unicache"]["compiled"]
    assert isinstance(table, dict)
    return table


def _modules() -> list[str]:
    modules = _table()["modules"]
    assert isinstance(modules, list) and all(isinstance(m, str) for m in modules)
    return modules


def test_compiled_and_interpreted_lists_are_disjoint_real_modules() -> None:
    interpreted = _table()["interpreted"]
    assert isinstance(interpreted, dict)
    compiled = set(_modules())
    assert not compiled & set(interpreted)
    for name in compiled | {m for m in interpreted if not m.endswith(".*")}:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name
    assert all(isinstance(why, str) and why for why in interpreted.values())


@pytest.mark.parametrize("name", _modules())
def test_module_is_compiled_exactly_in_the_compiled_run(name: str) -> None:
    module = importlib.import_module(name)
    path = module.__file__
    assert path is not None
    compiled = os.environ.get("UNICACHE_BUILD") == "compiled"
    assert path.endswith(EXTENSION) is compiled, f"{name} loaded from {path}"
    assert Path(path).parent.resolve() == (ROOT / name.replace(".", "/")).parent.resolve()

"""Which build the SGLang tree core runs on: its compiled modules are C extensions exactly when it says so.

`make test-sglang` runs the SGLang suite in the checkout (pure Python) beside
the build of the compiled copy `build/compiled-sglang`, then
`tests/integrations/sglang/treecore` and this file in that copy with
`UNICACHE_BUILD=compiled`. Whatever the run, the
modules of pyproject.toml's `[tool.unicache.compiled.sglang]` must all be
extensions (compiled run) or all be sources (any other run), and so must the
core's (`[tool.unicache.compiled]`, whose extensions that copy reuses).
"""

from __future__ import annotations

import importlib
import os
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXTENSION = (".so", ".pyd")


def _tables() -> tuple[dict[str, object], dict[str, object]]:
    """The core's compiled table and the SGLang one."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        core = tomllib.load(f)["tool"]["unicache"]["compiled"]
    assert isinstance(core, dict)
    sglang = core["sglang"]
    assert isinstance(sglang, dict)
    return core, sglang


def _modules(table: dict[str, object]) -> list[str]:
    modules = table["modules"]
    assert isinstance(modules, list) and all(isinstance(m, str) for m in modules)
    return modules


def test_sglang_lists_are_disjoint_real_tree_core_modules() -> None:
    core, sglang = _tables()
    interpreted = sglang["interpreted"]
    assert isinstance(interpreted, dict)
    compiled = set(_modules(sglang))
    assert not compiled & set(interpreted)
    core_interpreted = core["interpreted"]
    assert isinstance(core_interpreted, dict)
    assert not (compiled | set(interpreted)) & (set(_modules(core)) | set(core_interpreted))
    package = ROOT / "unicache" / "integrations" / "sglang" / "treecore"
    listed = compiled | set(interpreted)
    for name in listed:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name
    unlisted = {f"unicache.integrations.sglang.treecore.{p.stem}" for p in package.glob("*.py")
                if p.stem != "__init__"} - listed
    assert not unlisted, f"tree core modules in neither list: {sorted(unlisted)}"
    assert all(isinstance(why, str) and why for why in interpreted.values())


@pytest.mark.parametrize("name", _modules(_tables()[1]) + _modules(_tables()[0]))
def test_module_is_compiled_exactly_in_the_compiled_run(name: str) -> None:
    module = importlib.import_module(name)
    path = module.__file__
    assert path is not None
    compiled = os.environ.get("UNICACHE_BUILD") == "compiled"
    assert path.endswith(EXTENSION) is compiled, f"{name} loaded from {path}"
    assert Path(path).parent.resolve() == (ROOT / name.replace(".", "/")).parent.resolve()

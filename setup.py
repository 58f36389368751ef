"""Packaging, plus the optional mypyc build of the hot modules.

`pip install .` (and `make setup`'s editable install) is pure Python. With
`UNICACHE_COMPILE=1` the modules listed in pyproject.toml's
`[tool.unicache.compiled]` are compiled to C extensions by mypyc (mypy's
compiler, pinned with mypy); the sources stay next to them, so `leasecheck`
and mypy analyse the same files either way. `make setup` builds the compiled
copy in `build/compiled` (see `tools/compiled_build.py`). With
`UNICACHE_COMPILE=sglang` (run with the SGLang venv's python) the modules of
`[tool.unicache.compiled.sglang]` (the SGLang tree core) are compiled instead,
type-checked against SGLang with `mypy-sglang.ini`; `make setup-sglang` builds
that copy in `build/compiled-sglang`.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


GROUPS = {"1": (), "sglang": ("sglang",)}
"""`UNICACHE_COMPILE` values: the path of the group's table below `[tool.unicache.compiled]`."""
MYPY_ARGS = {"1": [], "sglang": ["--config-file=mypy-sglang.ini"]}


def compiled_modules(group: str = "1") -> list[str]:
    """The dotted names of the modules the compiled build of `group` (an `UNICACHE_COMPILE` value) compiles."""
    with open(HERE / "pyproject.toml", "rb") as f:
        table = tomllib.load(f)["tool"]["unicache"]["compiled"]
    for key in GROUPS[group]:
        table = table[key]
    return list(table["modules"])


def ext_modules() -> list[object]:
    group = os.environ.get("UNICACHE_COMPILE")
    if group is None or group == "0":
        return []
    if group not in GROUPS:
        raise SystemExit(f"UNICACHE_COMPILE={group!r}: expected one of {sorted(GROUPS)}")
    from mypyc.build import mypycify

    paths = [name.replace(".", "/") + ".py" for name in compiled_modules(group)]
    return list(mypycify(MYPY_ARGS[group] + paths, opt_level="3", debug_level="0", multi_file=True))


setup(ext_modules=ext_modules())

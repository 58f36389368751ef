"""Packaging, plus the optional mypyc build of the hot modules.

`pip install .` (and `make setup`'s editable install) is pure Python. With
`UNICACHE_COMPILE=1` the modules listed in pyproject.toml's
`[tool.unicache.compiled]` are compiled to C extensions by mypyc (mypy's
compiler, pinned with mypy); the sources stay next to them, so `leasecheck`
and mypy analyse the same files either way. `make setup` builds the compiled
copy in `build/compiled` (see `tools/compiled_build.py`).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def compiled_modules() -> list[str]:
    """The dotted names of the modules the compiled build compiles."""
    with open(HERE / "pyproject.toml", "rb") as f:
        table = tomllib.load(f)["tool"]["unicache"]["compiled"]
    return list(table["modules"])


def ext_modules() -> list[object]:
    if os.environ.get("UNICACHE_COMPILE") != "1":
        return []
    from mypyc.build import mypycify

    paths = [name.replace(".", "/") + ".py" for name in compiled_modules()]
    return list(mypycify(paths, opt_level="3", debug_level="0", multi_file=True))


setup(ext_modules=ext_modules())

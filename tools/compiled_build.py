"""Build the compiled copies of the project: `build/compiled` (`make setup`) and `build/compiled-sglang`.

The copy holds every project file (sources, tests, benchmarks, configs) with
the modules of pyproject.toml's `[tool.unicache.compiled]` compiled by mypyc
next to their sources (`setup.py build_ext --inplace` with
`UNICACHE_COMPILE=1`). Running pytest inside the copy imports the compiled
modules: its root goes first on `sys.path`, ahead of the editable install of
the checkout. The checkout itself stays pure Python.

Without a working C compiler (checked first, honouring `CC`), the copy is not
built and `build/compiled/BUILD` says `pure`; `make test` then runs the
pure suite only. Every run syncs the copy; the compile reruns only when
its inputs changed (`BUILD_KEY`: the core sources, the compiled list, setup.py, mypy.ini,
this script and mypy's version). A build that fails with a working compiler is an error.

With `--sglang` (`make setup-sglang`, run with the SGLang venv's python) it
builds `build/compiled-sglang`: the same files, the core's extensions copied
from `build/compiled` (built first: the two venvs share one CPython), and the
SGLang tree core's modules of `[tool.unicache.compiled.sglang]` compiled as a
second group (`UNICACHE_COMPILE=sglang`: type-checked against SGLang with
`mypy-sglang.ini`). Only that group compiles here, so the copy costs the tree
core's compile alone; its modules reach the core's classes as Python objects
(the groups were compiled apart). Where `build/compiled` is pure, so is this
copy. Its `BUILD_KEY` covers every project source, the core build's key,
both lists, the configs, this script, mypy's and SGLang's versions.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".mypy_cache", ".venv", ".venv-sglang", ".hypothesis",
             ".pytest_cache", ".ruff_cache", ".grimp_cache", ".import_linter_cache", "out", "unicache-crash",
             ".mypy_cache-sglang", ".mypy_cache-sglang-check"}


def project_files() -> list[Path]:
    """The checkout's files: git's list (tracked and untracked, not ignored), or a walk without git."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT, check=True, capture_output=True,
        ).stdout.decode()
        return [Path(p) for p in out.split("\0") if p and (ROOT / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for base, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
            files += [Path(base, n).relative_to(ROOT) for n in names]
        return files


def sync(dest: Path) -> None:
    """Copy changed files into `dest`; drop copied sources that left the checkout."""
    wanted = set(project_files())
    for rel in wanted:
        src, dst = ROOT / rel, dest / rel
        st = src.stat()
        if dst.exists() and dst.stat().st_size == st.st_size and dst.stat().st_mtime_ns == st.st_mtime_ns:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    for pkg in ("leases", "unicache", "tests", "benchmarks"):
        for path in (dest / pkg).rglob("*.py") if (dest / pkg).exists() else ():
            if path.relative_to(dest) not in wanted:
                path.unlink()
                for ext in path.parent.glob(path.stem + ".cpython-*.so"):
                    ext.unlink()


def drop_stale_extensions(dest: Path) -> None:
    """Delete extensions of modules no longer in the compiled list (and old shared libraries)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        wanted = set(tomllib.load(f)["tool"]["unicache"]["compiled"]["modules"])
    for pkg in ("leases", "unicache"):
        for ext in (dest / pkg).rglob("*.cpython-*.so"):
            rel = ext.relative_to(dest)
            name = ".".join(rel.parent.parts + (ext.name.split(".")[0],))
            if name not in wanted:
                ext.unlink()
    for lib in dest.glob("*__mypyc.cpython-*.so"):
        lib.unlink()


def compiler_works() -> bool:
    """Whether the C compiler setuptools would use (`CC` or Python's own) builds an object file."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.errors import CompileError, DistutilsExecError
    from setuptools._distutils.sysconfig import customize_compiler

    cc = new_compiler()
    customize_compiler(cc)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "probe.c")
        src.write_text("int probe(void) { return 0; }\n")
        try:
            cc.compile([str(src)], output_dir=tmp)
        except (CompileError, DistutilsExecError, OSError):
            return False
    return True


INPUT_PACKAGES = ("leases", "unicache")
NOT_INPUTS = ("leases/check/", "unicache/engine/", "unicache/repl/", "unicache/dump/", "unicache/traces/",
              "unicache/integrations/", "unicache/cli.py")
"""Modules the compiled ones cannot import (the import contracts' upper layers): not build inputs."""


def build_key() -> str:
    """A hash of everything the C code depends on: core sources, the build config, mypy's version."""
    import hashlib

    import mypy.version

    with open(ROOT / "pyproject.toml", "rb") as f:
        modules = tomllib.load(f)["tool"]["unicache"]["compiled"]["modules"]
    h = hashlib.sha256(mypy.version.__version__.encode() + repr(modules).encode())
    for name in ("setup.py", "mypy.ini", "tools/compiled_build.py"):
        h.update((ROOT / name).read_bytes())
    for rel in sorted(p for p in project_files() if p.suffix == ".py" and p.parts[0] in INPUT_PACKAGES):
        if not str(rel).startswith(NOT_INPUTS):
            h.update(str(rel).encode() + b"\0" + (ROOT / rel).read_bytes())
    return h.hexdigest()


def _compile(dest: Path, group: str) -> bool:
    """`setup.py build_ext --inplace` in `dest` for `group` (an `UNICACHE_COMPILE` value); the log in build.log."""
    env = dict(os.environ, UNICACHE_COMPILE=group)
    log = dest / "build.log"
    with open(log, "w") as out:
        done = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace", "-j", str(os.cpu_count() or 1)],
            cwd=dest, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    if done.returncode != 0:
        (dest / "BUILD").write_text("failed\n")
        print(log.read_text()[-4000:], file=sys.stderr)
        print(f"compiled build failed with a working C compiler: see {log}", file=sys.stderr)
        return False
    return True


def build_core(dest: Path) -> int:
    marker = dest / "BUILD"
    if not compiler_works():
        marker.write_text("pure\n")
        print("compiled build: no working C compiler; the project stays pure Python", file=sys.stderr)
        return 0
    sync(dest)
    key = build_key()
    stamp = dest / "BUILD_KEY"
    if marker.exists() and marker.read_text() == "compiled\n" and stamp.exists() and stamp.read_text() == key:
        return 0
    drop_stale_extensions(dest)
    if not _compile(dest, "1"):
        return 1
    marker.write_text("compiled\n")
    stamp.write_text(key)
    print(f"compiled build: {dest}")
    return 0


SGLANG_CORE = ROOT / "build" / "compiled"
"""The core's compiled copy, whose extensions the SGLang copy reuses."""


def sglang_modules() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["tool"]["unicache"]["compiled"]["sglang"]["modules"])


def sglang_build_key(core_key: str) -> str:
    """A hash of the SGLang group's inputs: every project source (mypy reads what the tree core imports), the
    core build's key (its extensions are copied), both lists, the configs, this script, mypy and SGLang."""
    import hashlib
    from importlib.metadata import version

    import mypy.version

    h = hashlib.sha256(f"{mypy.version.__version__} sglang {version('sglang')}".encode())
    h.update(core_key.encode() + repr(sglang_modules()).encode())
    for name in ("setup.py", "mypy-sglang.ini", "pyproject.toml", "tools/compiled_build.py"):
        h.update((ROOT / name).read_bytes())
    for rel in sorted(p for p in project_files() if p.suffix == ".py" and p.parts[0] in INPUT_PACKAGES):
        h.update(str(rel).encode() + b"\0" + (ROOT / rel).read_bytes())
    return h.hexdigest()


def _extensions(root: Path) -> list[Path]:
    """The compiled modules and shared libraries under `root`, relative to it."""
    found = [p for pkg in INPUT_PACKAGES if (root / pkg).exists() for p in (root / pkg).rglob("*.cpython-*.so")]
    return [p.relative_to(root) for p in found + list(root.glob("*__mypyc.cpython-*.so"))]


def build_sglang(dest: Path) -> int:
    marker = dest / "BUILD"
    core_marker = SGLANG_CORE / "BUILD"
    core_state = core_marker.read_text().strip() if core_marker.exists() else "missing"
    if core_state == "pure":
        marker.write_text("pure\n")
        print("compiled sglang build: the core build is pure (no working C compiler); so is this copy",
              file=sys.stderr)
        return 0
    core_stamp = SGLANG_CORE / "BUILD_KEY"
    if core_state != "compiled" or not core_stamp.exists():
        print(f"compiled sglang build: {SGLANG_CORE} is {core_state}, not built: run `make setup` first",
              file=sys.stderr)
        return 1
    sync(dest)
    key = sglang_build_key(core_stamp.read_text())
    stamp = dest / "BUILD_KEY"
    if marker.exists() and marker.read_text() == "compiled\n" and stamp.exists() and stamp.read_text() == key:
        return 0
    for rel in _extensions(dest):
        (dest / rel).unlink()
    for rel in _extensions(SGLANG_CORE):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SGLANG_CORE / rel, dest / rel)
    if not _compile(dest, "sglang"):
        return 1
    marker.write_text("compiled\n")
    stamp.write_text(key)
    print(f"compiled sglang build: {dest}")
    return 0


def main() -> int:
    args = sys.argv[1:]
    sglang = "--sglang" in args
    rest = [a for a in args if a != "--sglang"]
    default = ROOT / "build" / ("compiled-sglang" if sglang else "compiled")
    dest = (Path(rest[0]) if rest else default).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    return build_sglang(dest) if sglang else build_core(dest)


if __name__ == "__main__":
    sys.exit(main())

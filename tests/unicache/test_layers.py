"""The core's import graph: no cycle longer than two files, no import hidden inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import unicache

ROOT = Path(unicache.__file__).parent
CORE_PACKAGES = ("ops", "tree", "components", "pools", "transfer")
OUTSIDE_CORE = {"__init__", "cli"}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _core_files() -> dict[str, Path]:
    files = {_module(p): p for p in ROOT.glob("*.py") if p.stem not in OUTSIDE_CORE}
    for pkg in CORE_PACKAGES:
        files.update({_module(p): p for p in (ROOT / pkg).glob("*.py")})
    return files


def _imports(path: Path, modules: set[str]) -> tuple[set[str], list[str]]:
    """Core modules `path` imports (annotation-only imports included), and those imported in functions."""
    found: set[str] = set()
    in_functions: list[str] = []

    def target(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                names = [child.module] + [f"{child.module}.{a.name}" for a in child.names]
            for name in names:
                hit = target(name)
                if hit is not None:
                    found.add(hit)
                    if inner:
                        in_functions.append(hit)
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found, in_functions


def _graph() -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    files = _core_files()
    names = set(files)
    edges: dict[str, set[str]] = {}
    hidden: dict[str, list[str]] = {}
    for name, path in files.items():
        found, in_functions = _imports(path, names)
        edges[name] = found - {name}
        if in_functions:
            hidden[name] = in_functions
    return edges, hidden


def _long_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Simple cycles of three files or more (each reported once, from its smallest name)."""
    out: list[list[str]] = []
    for start in sorted(edges):
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in edges.get(node, ()):
                if nxt == start and len(path) >= 3:
                    out.append(path)
                elif nxt > start and nxt not in path:
                    stack.append((nxt, [*path, nxt]))
    return out


def test_the_core_has_no_import_cycle_longer_than_two_files() -> None:
    edges, _ = _graph()
    assert "unicache.cache" in edges and "unicache.ops.load_back" in edges
    assert _long_cycles(edges) == []


def test_the_core_hides_no_import_inside_a_function() -> None:
    _, hidden = _graph()
    assert hidden == {}


def test_the_cycle_finder_sees_a_three_file_cycle() -> None:
    assert _long_cycles({"a": {"b"}, "b": {"c", "a"}, "c": {"a"}}) == [["a", "b", "c"]]

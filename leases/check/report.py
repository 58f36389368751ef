"""Ownership diagnostics and the `# lease: ignore[code, ...]` suppression comment.

The comment is separate from `# type: ignore` so that mypy's unused-ignore
check never sees it; with `--warn-unused-ignores` (on under `--strict`)
leasecheck reports its own unused suppressions the way mypy does.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Final

_IGNORE: Final = re.compile(r"#\s*lease:\s*ignore(?:\[([^\]]*)\])?")
_TAKES_FROM: Final = re.compile(r"#\s*lease:\s*takes-from\b(.*)$")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding: where, which code, what (mypy's line is 1-based, column 0-based)."""

    line: int
    column: int
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Ignore:
    """A `# lease: ignore` comment: the codes it names, or None for every code."""

    line: int
    codes: tuple[str, ...] | None


def find_ignores(source: str) -> list[Ignore]:
    """Every `# lease: ignore` comment in `source` (comments only, not strings)."""
    if "lease:" not in source:
        return []
    found: list[Ignore] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        match = _IGNORE.search(tok.string)
        if match is None:
            continue
        listed = match.group(1)
        codes = None if listed is None else tuple(
            c.strip() for c in listed.split(",") if c.strip()
        )
        found.append(Ignore(tok.start[0], codes))
    return found


def find_takes_from(source: str) -> dict[int, tuple[int, tuple[str, ...]]]:
    """Every `# lease: takes-from F, G` comment in `source`: line -> (column, the names it lists).

    The comment form of `@takes_from("F", "G")` (see `leases.check.takes`), for
    methods of mypyc-compiled classes, where a decorator costs the native call
    and crashes mypyc on a method that overrides another.
    """
    if "takes-from" not in source:
        return {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return {}
    found: dict[int, tuple[int, tuple[str, ...]]] = {}
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        match = _TAKES_FROM.search(tok.string)
        if match is not None:
            names = tuple(n.strip() for n in match.group(1).split(",") if n.strip())
            found[tok.start[0]] = (tok.start[1], names)
    return found


def apply_ignores(
    diagnostics: list[Diagnostic], ignores: list[Ignore], *, warn_unused: bool
) -> list[Diagnostic]:
    """Drop suppressed diagnostics; with `warn_unused`, add one per unused suppression."""
    if not ignores:
        return diagnostics
    by_line = {ig.line: ig for ig in ignores}
    used: dict[int, set[str]] = {}
    kept: list[Diagnostic] = []
    for diag in diagnostics:
        ig = by_line.get(diag.line)
        if ig is not None and (ig.codes is None or diag.code in ig.codes):
            used.setdefault(diag.line, set()).add(diag.code)
            continue
        kept.append(diag)
    if warn_unused:
        for ig in ignores:
            hit = used.get(ig.line, set())
            if ig.codes is None:
                if not hit:
                    kept.append(Diagnostic(ig.line, 0, "unused-ignore",
                                           'Unused "lease: ignore" comment'))
                continue
            unused = [c for c in ig.codes if c not in hit]
            if unused:
                kept.append(Diagnostic(
                    ig.line, 0, "unused-ignore",
                    f'Unused "lease: ignore[{", ".join(unused)}]" comment',
                ))
    kept.sort(key=lambda d: (d.line, d.column))
    return kept


"""Mutation test for leasecheck: delete or duplicate each consuming statement, expect a finding.

A consuming statement is one that calls a consuming method on an owned value
(`lease.release()`, `ticket.close(...)`, `t.result()`) or passes an owned
value to an owning parameter (`cache.unlock(receipt)`). Each mutant removes
one such statement, or repeats it right after itself, and the ownership pass
must report something in that module that the unmutated module does not have.

One mypy build serves every mutant: the mutation is made on the typed tree
itself (the statement leaves or enters its block's list) and only the
ownership pass runs again, so mypy's own diagnostics for the mutated source
are not counted. A mutant is caught only by an ownership finding.

    python -m leases.check.mutate [--sample N] [--seed S] [mypy options] [PATHS]   # default: unicache
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from mypy import build
from mypy.main import process_options
from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Expression,
    ExpressionStmt,
    FuncItem,
    LambdaExpr,
    MemberExpr,
    MypyFile,
    Node,
    ReturnStmt,
    Statement,
)
from mypy.types import Type

from leases.check.calls import CallModel
from leases.check.codes import PARTIAL
from leases.check.flow import check_tree
from leases.check.model import classify
from leases.check.plugin import OwnershipPlugin
from leases.check.report import Diagnostic, apply_ignores, find_ignores
from leases.check.runner import _source_text, _with_text, prepare_options
from leases.check.walk import children

EXEMPT: dict[tuple[str, str, str], str] = {
    ("unicache.ops.load_back", "LoadBacks.load_back", "return self._join(ticket, copy)"):
        "deleting the return falls through to the ordinary copy path, which still hands the "
        "ticket on (to the ticket table, or closes it on a refusal): a second copy of the same "
        "bytes, not an ownership error (tests/unicache/test_load_back.py catches it)",
    ("unicache.tickets", "TicketRecord.release_leases", "_release(holder=self)"):
        "TicketRecord.release_leases gives a timed-out ticket's leases up without consuming the record "
        "(it stays in quarantine until its late ack, when close() consumes it), so no owned value goes "
        "out of scope when the call is deleted; a duplicate is a no-op (_release resets each field "
        "before releasing it). tests/unicache/test_timeouts.py catches the deletion (leases still live "
        "after time_out)",
}
"""(module, qualified name of the enclosing function, statement text) -> why a mutant of that one
statement is not expected to be caught."""


@dataclass(slots=True)
class Mutant:
    module: str
    path: str
    line: int
    kind: str  # "delete" | "duplicate"
    text: str
    function: str = ""
    """The qualified name of the function around the statement (`Class.method`), "" at module level."""
    caught: bool = False
    findings: list[Diagnostic] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        """The statement's key in `EXEMPT`: one site, whatever other statements share its text."""
        return (self.module, self.function, self.text)

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.kind} `{self.text}`"


@dataclass(slots=True)
class Score:
    mutants: list[Mutant]
    builds: int
    baseline: list[str] = field(default_factory=list)
    """Findings in the unmutated modules: the score means little unless this is empty."""

    @property
    def caught(self) -> int:
        return sum(m.caught for m in self.mutants)

    def misses(self) -> list[Mutant]:
        return [m for m in self.mutants if not m.caught]

    def unexplained(self) -> list[Mutant]:
        """Misses without a reason in `EXEMPT`: each is a gap in the checker."""
        return [m for m in self.misses() if m.key not in EXEMPT]


def consuming_calls(stmt: Statement, calls: CallModel, types: dict[Expression, Type]) -> bool:
    """Whether `stmt` itself (not a nested function) consumes or hands on an owned value."""
    stack: list[Node] = [c for c in children(stmt)]
    while stack:
        node = stack.pop()
        if isinstance(node, (FuncItem, LambdaExpr, ClassDef, Block)):
            continue
        if isinstance(node, CallExpr):
            callee = node.callee
            receiver_type = types.get(callee.expr) if isinstance(callee, MemberExpr) else None
            if (
                isinstance(callee, MemberExpr) and calls.is_consuming(receiver_type, callee.name)
                and classify(receiver_type) is not None
            ):
                return True
            modes = calls.argument_modes(node, receiver_type)
            for arg, mode in zip(node.args, modes):
                if mode == "own" and classify(types.get(arg)) is not None:
                    return True
        stack.extend(children(node))
    return False


def blocks(tree: MypyFile) -> Iterator[tuple[str, Block]]:
    """Every block the analysis reads, with the qualified name of the function it is in."""
    stack: list[tuple[Node, str]] = [(d, "") for d in tree.defs]
    while stack:
        node, where = stack.pop()
        if isinstance(node, FuncItem) and node.expanded:
            inner = _qualified(where, node.name)
            for item in node.expanded:  # what the analysis reads (often `node` itself)
                stack.extend((c, inner) for c in children(item))
            continue
        if isinstance(node, Block):
            yield where, node
        if isinstance(node, ClassDef):
            where = _qualified(where, node.name)
        elif isinstance(node, FuncItem) and not isinstance(node, LambdaExpr):
            where = _qualified(where, node.name)
        stack.extend((c, where) for c in children(node))


def _qualified(outer: str, name: str) -> str:
    return f"{outer}.{name}" if outer else name


def _findings(tree: MypyFile, types: dict[Expression, Type], text: str) -> set[tuple[int, str, str]]:
    diags = apply_ignores([d for d in check_tree(tree, types, text=text) if d.code != PARTIAL],
                          find_ignores(text), warn_unused=False)
    return {(d.line, d.code, d.message) for d in diags}


def _statement_text(lines: list[str], stmt: Statement) -> str:
    first = lines[stmt.line - 1].strip() if 0 < stmt.line <= len(lines) else "?"
    return first if stmt.end_line in (None, stmt.line) else first + " ..."


def run_mutants(argv: Sequence[str], sample: int | None = None, seed: int = 0) -> Score:
    """Build once, then check every mutant (or a random sample of them) of the given modules."""
    sources, options = process_options(list(argv), program="leasecheck-mutate")
    prepare_options(options)
    sources = [_with_text(s) for s in sources]
    result = build.build(sources, options, None, lambda *_: None, None, sys.stdout, sys.stderr,
                         extra_plugins=[OwnershipPlugin(options)])
    types = result.types
    wanted = {s.module for s in sources}
    sites: list[tuple[str, str, MypyFile, str, Block, int, str, str]] = []
    for module_id in sorted(wanted):
        state = result.graph.get(module_id)
        if state is None or state.tree is None or state.path is None:
            continue
        tree = state.tree
        text = _source_text(state)
        lines = text.splitlines()
        calls = CallModel(types)
        for where, block in blocks(tree):
            for i, stmt in enumerate(block.body):
                if not isinstance(stmt, (ExpressionStmt, AssignmentStmt, ReturnStmt)):
                    continue
                if not consuming_calls(stmt, calls, types):
                    continue
                label = _statement_text(lines, stmt)
                sites.append((module_id, state.path, tree, where, block, i, "delete", label))
                if not isinstance(stmt, ReturnStmt):
                    sites.append((module_id, state.path, tree, where, block, i, "duplicate", label))
    if sample is not None and sample < len(sites):
        sites = random.Random(seed).sample(sites, sample)
    baselines: dict[str, set[tuple[int, str, str]]] = {}
    texts: dict[str, str] = {}
    mutants: list[Mutant] = []
    baseline: list[str] = []
    for module_id, path, tree, where, block, i, kind, label in sites:
        if module_id not in baselines:
            texts[module_id] = _source_text(result.graph[module_id])
            baselines[module_id] = _findings(tree, types, texts[module_id])
            baseline.extend(f"{path}:{line}: {msg}  [{code}]"
                            for line, code, msg in sorted(baselines[module_id]))
        stmt = block.body[i]
        original = list(block.body)
        block.body = original[:i] + original[i + 1:] if kind == "delete" else (
            original[: i + 1] + [stmt] + original[i + 1:]
        )
        try:
            found = _findings(tree, types, texts[module_id]) - baselines[module_id]
        finally:
            block.body = original
        mutant = Mutant(module_id, path, stmt.line, kind, label, where, caught=bool(found))
        mutant.findings = [Diagnostic(line, 0, code, msg) for line, code, msg in sorted(found)]
        mutants.append(mutant)
    mutants.sort(key=lambda m: (m.path, m.line, m.kind))
    return Score(mutants, 1, baseline)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leases.check.mutate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=None, help="check a random sample of mutants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="list caught mutants too")
    args, rest = parser.parse_known_args(argv)
    score = run_mutants(rest or ["unicache"], args.sample, args.seed)
    for line in score.baseline:
        print(f"finding before mutation: {line}")
    for m in score.mutants:
        if args.verbose or not m.caught:
            reason = EXEMPT.get(m.key, "missed" if not m.caught else "caught")
            print(f"{m.describe()}: {reason}")
    print(f"leasecheck mutation score: {score.caught}/{len(score.mutants)} mutants caught "
          f"({len(score.misses())} missed) in {score.builds} mypy build")
    return 0 if not score.unexplained() and not score.baseline else 1


if __name__ == "__main__":
    raise SystemExit(main())

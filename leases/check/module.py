"""The module pass of the checker: which bodies to analyse, and what they report."""

from __future__ import annotations

import copy

from collections import deque
from collections.abc import Iterator, Mapping, Sequence

from mypy.nodes import (
    ClassDef,
    Decorator,
    Expression,
    FuncDef,
    FuncItem,
    MypyFile,
    Node,
    OverloadedFuncDef,
    RefExpr,
    Statement,
    TypeInfo,
    Var,
)
from mypy.types import Type

from leases.check import codes
from leases.check.contracts import Take, decorator_contract, resolve_contract
from leases.check.model import (
    CONTEXT_MANAGER_DECORATORS,
    META_KEY,
    declared_fields,
    is_linear_info,
    owned_fields,
    unowned_fields,
)
from leases.check.report import Diagnostic, find_takes_from


class ModuleChecker:
    """One module's pass: the bodies still to analyse, the contracts and findings they share.

    `leases.check.flow.check_tree` runs a function analysis for each body
    `pending` yields; an analysis enqueues the definitions it meets.
    """

    def __init__(
        self, tree: MypyFile, types: Mapping[Expression, Type], exits_at: frozenset[str] = frozenset(),
        text: str = "",
    ) -> None:
        self.tree = tree
        self.types = types
        self.exits_at = exits_at
        self.found: dict[tuple[int, str, str], Diagnostic] = {}
        self.queue: deque[tuple[FuncItem | None, list[Statement], frozenset[Var]]] = deque()
        self.lending_generators: set[FuncItem] = set()
        self.contracts: dict[FuncItem, list[Take]] = {}
        """`@takes_from` methods -> the fields each must take an entry out of."""
        self.takes_comments = find_takes_from(text)
        """`# lease: takes-from` comments not yet matched to the `def` line they sit on."""
        self.helper_fields: dict[FuncItem, frozenset[str]] = {}
        """Helper methods of this module's classes -> the owned fields of their receiver each
        discharges on every normal exit (`leases.check.flow.FunctionChecker.discharged_by`)."""
        self.drained_params: dict[FuncItem, frozenset[int]] = {}
        """Functions of this module -> the positions of the container parameters each empties on
        every normal exit (`leases.check.flow.FunctionChecker.drained_by`)."""

    def shadow(self) -> ModuleChecker:
        """A copy that drops what is reported or enqueued through it: for analysing a body again only to
        learn what it does (a helper method's effect on its receiver's fields)."""
        other = copy.copy(self)
        other.found = {}
        other.queue = deque()
        other.takes_comments = {}
        return other

    def pending(self) -> Iterator[tuple[FuncItem | None, list[Statement], frozenset[Var]]]:
        """Each body to analyse: the module's top level first, then what analysing one enqueues."""
        if self.tree.is_stub:
            return
        self.queue.append((None, self.tree.defs, frozenset()))
        while self.queue:
            yield self.queue.popleft()

    def finish(self) -> list[Diagnostic]:
        """Every finding, sorted by position, once each pending body has been analysed."""
        for line, (column, _) in sorted(self.takes_comments.items()):
            self.report(line, column, codes.UNCHECKED.code,
                        '"# lease: takes-from" is not on the line of a "def": it names the fields '
                        "the method defined there takes an entry out of")
        return sorted(self.found.values(), key=lambda d: (d.line, d.column))

    def report(self, line: int, column: int, code: str, message: str) -> None:
        key = (line, code, message)
        if key not in self.found:
            self.found[key] = Diagnostic(line, column, code, message)

    def note(self, line: int, column: int, message: str) -> None:
        """A place analysed partially or on the code's word (`leasecheck --partial` lists it)."""
        self.report(line, column, codes.PARTIAL, message)

    def enqueue_function(self, fn: FuncItem, enclosing: frozenset[Var]) -> None:
        synthesized = (
            fn.line < 1 or fn.end_line is None or any(arg.line < 1 for arg in fn.arguments)
        )
        if synthesized or (isinstance(fn, FuncDef) and fn.is_trivial_body):
            if fn in self.contracts:
                self.report(fn.line, fn.column, codes.UNCHECKED.code,
                            f'takes_from on "{fn.name}", which has no body to check it against')
            return
        targets: Sequence[FuncItem] = fn.expanded if fn.expanded else [fn]
        for item in targets:
            if fn in self.contracts:
                self.contracts[item] = self.contracts[fn]
            self.queue.append((item, item.body.body, enclosing))

    def contract(self, fn: FuncItem, decorator: Decorator | None) -> None:
        """Record the `@takes_from` / `# lease: takes-from` contract of `fn`, if it has one."""
        names = decorator_contract(decorator, self.report) if decorator is not None else None
        comment = self.takes_comments.pop(fn.line, None)
        if comment is not None:
            column, listed = comment
            if not listed:
                self.report(fn.line, column, codes.UNCHECKED.code,
                            f'"# lease: takes-from" on "{fn.name}" names no field')
            names = (names or []) + [(name, fn.line, column) for name in listed]
        if names:
            contract = resolve_contract(fn, names, self.report)
            if contract:
                self.contracts[fn] = contract

    def enqueue_definition(self, node: Node, enclosing: frozenset[Var]) -> None:
        if isinstance(node, FuncDef):
            self.contract(node, None)
            self.enqueue_function(node, enclosing)
        elif isinstance(node, Decorator):
            if any(isinstance(d, RefExpr) and d.fullname in CONTEXT_MANAGER_DECORATORS
                   for d in node.original_decorators):
                self.lending_generators.add(node.func)
            self.contract(node.func, node)
            self.enqueue_function(node.func, enclosing)
        elif isinstance(node, OverloadedFuncDef):
            if node.impl is not None:
                self.enqueue_definition(node.impl, enclosing)
        elif isinstance(node, ClassDef):
            for field in unowned_fields(node.info):
                what = "container field" if field.container else "field"
                values = f"{field.noun} values" if field.container else f"a {field.noun}"
                self.report(field.line, 0, codes.OWNER.code,
                            f'Class "{node.name}" keeps {values} in {what} "{field.name}" but is '
                            f"not @linear: mark it @linear and discharge the field in its "
                            f"@consumes methods (or declare the field Borrowed[...])")
            self.inherited_discharge(node.info)
            self.queue.append((None, node.defs.body, enclosing))

    def inherited_discharge(self, info: TypeInfo) -> None:
        """A `@linear` subclass's new owned fields must be discharged by the `@consumes` it inherits."""
        if not is_linear_info(info):
            return
        meta = info.metadata.get(META_KEY) or {}
        own = {f.name: f for f in declared_fields(info)}
        for method in meta.get("consumes", ()):
            definer = next((b for b in info.mro if method in b.names), None)
            if definer is None or definer is info:
                continue
            known = owned_fields(definer)
            for name, field in own.items():
                if name in known:
                    continue
                self.report(field.line, 0, codes.LEAK.code,
                            f'Owned field "{name}" of "{info.name}" is not discharged by the '
                            f'@consumes method "{method}" it inherits from "{definer.name}"; '
                            f"override it to discharge the field too")

"""`@takes_from(...)`: a release method must take an owned entry out of the named container fields.

Deleting `self._unpin(self.locks.pop(key))` from a release method leaves the
lease in `self.locks`, which owns it: nothing owned goes out of scope, so the
ownership rules alone are silent. The contract names the fields; the method
must, on at least one path that returns normally, take an owned entry out of
each: `self.F.pop(k)`, `self.F.popitem()`, `self.F.popleft()`, `del self.F[k]`
(F holds leases or `@linear` values), or a pop of such a value from a
container stored in F (`self.F[k].pop()`, or `pins.pop()` where `pins` may
hold, on the path taken, what `self.F.get(k)`, `self.F[k]` or
`self.F.setdefault(k, ...)` returned). What happens to the taken value the
other rules check as usual.

A synthetic marker per field starts "not taken" (held) and becomes "taken"
(moved) at a take-out; the flow analysis carries it like any other fact, and
the method is accepted when some normal exit may have it taken.

An alias is followed through the flow too: a local bound from one of F's
items gets a marker of its own, held while it may still name that item and
moved once every path has rebound it (`if not pins: pins = []`). A local
bound any other way than by a plain assignment (a loop target, `with ... as`,
a walrus, an augmented assignment, `except ... as`, a `match` capture) is
never an alias.
"""

from __future__ import annotations

from mypy.nodes import (
    AssignmentExpr,
    AssignmentStmt,

    CallExpr,
    ClassDef,
    Expression,
    ForStmt,
    FuncItem,
    IndexExpr,
    MemberExpr,
    NameExpr,
    Node,
    OperatorAssignmentStmt,
    TryStmt,
    Var,
    WithStmt,
)

from leases.check import codes
from leases.check.contracts import Take
from leases.check.facts import HELD, MOVED, State
from leases.check.ownership import OwnershipBase
from leases.check.walk import children
from mypy.patterns import AsPattern


class TakesMixin(OwnershipBase):
    """The take-out markers of a `@takes_from` method: set up at entry, moved at a take-out."""

    def setup_takes(self, fn: FuncItem, contract: list[Take], st: State) -> None:
        self.s.takes = {}
        self_var = fn.arguments[0].variable
        for take in contract:
            marker = Var(f"{self_var.name}.{take.field} take-out", None)
            self.s.markers.add(marker)
            self.s.takes[take.field] = (take, marker)
            st[marker] = frozenset({(HELD, fn.line, fn.column, take.noun)})
        nested = {t.field for t in contract if t.nested}
        self.s.take_aliases = {}
        for var, name in (_aliases(fn, self_var, nested) if nested else {}).items():
            alias = Var(f"{var.name} aliases self.{name}[...]", None)
            self.s.markers.add(alias)
            self.s.take_aliases[var] = (name, alias)

    def alias_bound(self, target: Expression, rvalue: Expression) -> None:
        """`target = rvalue`: whether a `@takes_from` alias now names an item of its field."""
        if not self.s.take_aliases or self.s.st is None or self.s.fn is None \
                or not isinstance(target, NameExpr) or not isinstance(target.node, Var):
            return
        entry = self.s.take_aliases.get(target.node)
        if entry is None:
            return
        name, alias = entry
        names_item = _alias_source(rvalue, self.s.fn.arguments[0].variable) == name
        self.s.st[alias] = frozenset({(HELD if names_item else MOVED, target.line, target.column, "alias")})

    def took_from(self, container: Expression, line: int, column: int) -> None:
        """An owned entry was taken out of `container`: if it is a named field, the contract is met."""
        if not self.s.takes or self.s.st is None or self.s.fn is None:
            return
        self_var = self.s.fn.arguments[0].variable
        name, nested = _field_of_self(container, self_var), False
        if name is None and isinstance(container, IndexExpr):
            name, nested = _field_of_self(container.base, self_var), True
        elif name is None and isinstance(container, NameExpr) and isinstance(container.node, Var):
            alias = self.s.take_aliases.get(container.node)
            if alias is not None and any(f[0] == HELD for f in self.s.st.get(alias[1], ())):
                name, nested = alias[0], True
        entry = self.s.takes.get(name) if name is not None else None
        if entry is None or entry[0].nested != nested:
            return
        take, marker = entry
        self.s.st[marker] = frozenset({(MOVED, line, column, take.noun)})

    def check_takes(self, exits: list[tuple[str, State, int]]) -> None:
        """Report each named field that no normal exit may have taken an entry out of."""
        fn = self.s.fn
        if not self.s.takes or fn is None:
            return
        for field, (take, marker) in self.s.takes.items():
            if any(kind in ("end", "return") and any(f[0] == MOVED for f in st.get(marker, ()))
                   for kind, st, _ in exits):
                continue
            where = (f'"self.{field}[...]"' if take.nested else f'"self.{field}"')
            self.report(fn.line, fn.column, codes.LEAK.code,
                        f'"{fn.name}" declares takes_from "{field}" but no path that returns takes a '
                        f"{take.noun} out of {where}: what it should release stays there")


def _field_of_self(e: Expression, self_var: Var) -> str | None:
    if isinstance(e, MemberExpr) and isinstance(e.expr, NameExpr) and e.expr.node is self_var:
        return e.name
    return None


def _alias_source(e: Expression, self_var: Var) -> str | None:
    """F for `self.F.get(k)`, `self.F[k]`, `self.F.setdefault(k, ...)`, else None."""
    if isinstance(e, IndexExpr):
        return _field_of_self(e.base, self_var)
    if isinstance(e, CallExpr) and isinstance(e.callee, MemberExpr) \
            and e.callee.name in ("get", "setdefault"):
        return _field_of_self(e.callee.expr, self_var)
    return None


def _bound(target: Node) -> list[Var]:
    """The local variables an assignment target binds (through tuples, lists and stars)."""
    if isinstance(target, NameExpr):
        return [target.node] if isinstance(target.node, Var) else []
    if isinstance(target, (MemberExpr, IndexExpr)):
        return []
    return [v for c in children(target) for v in _bound(c)]


def _aliases(fn: FuncItem, self_var: Var, fields: set[str]) -> dict[Var, str]:
    """Locals bound only by plain assignments, at least one of them from an item of one of `fields`.

    `alias_bound` then follows, path by path, whether the local names that item.
    """
    sources: dict[Var, set[str | None]] = {}
    not_plain: set[Var] = set()  # bound somewhere other than by a plain `name = ...`
    stack: list[Node] = list(fn.body.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (FuncItem, ClassDef)):
            continue
        if isinstance(node, AssignmentStmt):
            for target in node.lvalues:
                if not isinstance(target, NameExpr):
                    not_plain.update(_bound(target))
                    continue
                for var in _bound(target):
                    sources.setdefault(var, set()).add(_alias_source(node.rvalue, self_var))
        else:
            for target in _other_bindings(node):
                not_plain.update(_bound(target))
        stack.extend(children(node))
    out: dict[Var, str] = {}
    for var, found in sources.items():
        named = found - {None}
        if len(named) == 1 and var not in not_plain:
            (only,) = named
            if only in fields:
                out[var] = only
    return out


def _other_bindings(node: Node) -> list[Expression]:
    """The targets `node` binds other than by a plain assignment statement."""
    if isinstance(node, ForStmt):
        return [node.index]
    if isinstance(node, WithStmt):
        return [t for t in node.target if t is not None]
    if isinstance(node, AssignmentExpr):
        return [node.target]
    if isinstance(node, OperatorAssignmentStmt):
        return [node.lvalue]
    if isinstance(node, TryStmt):
        return [v for v in node.vars if v is not None]
    if isinstance(node, AsPattern) and node.name is not None:
        return [node.name]
    return []

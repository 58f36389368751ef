"""`@takes_from(...)`: a release method must take an owned entry out of the named container fields.

Deleting `self._unpin(self.locks.pop(key))` from a release method leaves the
lease in `self.locks`, which owns it: nothing owned goes out of scope, so the
ownership rules alone are silent. The contract names the fields; the method
must, on at least one path that returns normally, take an owned entry out of
each: `self.F.pop(k)`, `self.F.popitem()`, `self.F.popleft()`, `del self.F[k]`
(F holds leases or `@linear` values), or a pop of such a value from a
container stored in F (`self.F[k].pop()`, or `pins.pop()` with `pins` bound
only from `self.F.get(k)`, `self.F[k]` or `self.F.setdefault(k, ...)`). What
happens to the taken value the other rules check as usual.

A synthetic marker per field starts "not taken" (held) and becomes "taken"
(moved) at a take-out; the flow analysis carries it like any other fact, and
the method is accepted when some normal exit may have it taken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

from mypy.nodes import (
    FUNC_NO_INFO,
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Decorator,
    Expression,
    ForStmt,
    FuncItem,
    IndexExpr,
    MemberExpr,
    NameExpr,
    Node,
    RefExpr,
    StrExpr,
    TypeInfo,
    Var,
)
from mypy.types import Instance, get_proper_type

from leases.check import codes
from leases.check.facts import HELD, MOVED, State
from leases.check.model import classify, container_item, is_borrowed
from leases.check.ownership import OwnershipBase
from leases.check.walk import children

TAKES_FROM_DECORATOR: Final = "leases.linear.takes_from"
ReportFn: TypeAlias = Callable[[int, int, str, str], None]
"""`ModuleChecker.report`: (line, column, code, message)."""


@dataclass(frozen=True, slots=True)
class Take:
    """One field a `@takes_from` method must take an entry out of."""

    field: str
    nested: bool
    """The field holds containers of owned values (`dict[K, list[Lease]]`), not owned values."""
    noun: str


def decorator_contract(dec: Decorator, report: ReportFn) -> list[tuple[str, int, int]] | None:
    """The field names `dec`'s `@takes_from(...)` lists, with their positions (None without one)."""
    found: list[tuple[str, int, int]] | None = None
    for d in dec.original_decorators:
        callee = d.callee if isinstance(d, CallExpr) else d
        if not (isinstance(callee, RefExpr) and callee.fullname == TAKES_FROM_DECORATOR):
            continue
        found = found if found is not None else []
        if not isinstance(d, CallExpr) or not d.args:
            report(d.line, d.column, codes.UNCHECKED.code,
                   f'@takes_from on "{dec.func.name}" names no field; write @takes_from("field", ...)')
            continue
        for arg in d.args:
            if isinstance(arg, StrExpr):
                found.append((arg.value, arg.line, arg.column))
            else:
                report(arg.line, arg.column, codes.UNCHECKED.code,
                       f'@takes_from on "{dec.func.name}" takes field names as string literals')
    return found


def resolve_contract(fn: FuncItem, names: list[tuple[str, int, int]], report: ReportFn) -> list[Take]:
    """The contract `names` spell for `fn`; a name that is no owning container of its class is reported."""
    if not names:
        return []
    info = fn.info if fn.info is not FUNC_NO_INFO else None
    if info is None or fn.is_static or fn.is_class or not fn.arguments:
        _, line, column = names[0]
        report(line, column, codes.UNCHECKED.code,
               f'takes_from on "{fn.name}", which is not an instance method: it names fields of self')
        return []
    out: list[Take] = []
    for name, line, column in names:
        take = owning_container(info, name)
        if take is None:
            report(line, column, codes.UNCHECKED.code,
                   f'takes_from on "{fn.name}" names "{name}", which is not an owning container '
                   f'field of "{info.name}" (a container of leases or @linear values, or of such '
                   f"containers)")
        else:
            out.append(take)
    return out


def owning_container(info: TypeInfo, name: str) -> Take | None:
    """The field `name` of `info` as a take-out target, if it is an owning container (or holds them)."""
    sym = info.get(name)
    node = sym.node if sym is not None else None
    if not isinstance(node, Var) or node.is_property or node.is_classvar or is_borrowed(node.type):
        return None
    item = container_item(node.type)
    if item is None or is_borrowed(item):
        return None
    kind = classify(item)
    if kind is not None:
        return Take(name, False, kind.noun)
    inner = container_item(item)
    kind = classify(inner) if inner is not None and not is_borrowed(inner) else None
    if kind is not None and isinstance(get_proper_type(item), Instance):
        return Take(name, True, kind.noun)
    return None


class TakesMixin(OwnershipBase):
    """The take-out markers of a `@takes_from` method: set up at entry, moved at a take-out."""

    takes: dict[str, tuple[Take, Var]]
    """Field name -> its contract and marker."""
    take_aliases: dict[Var, str]
    """Local bound only from `self.F.get(k)` / `self.F[k]` / `self.F.setdefault(k, ...)` -> F."""

    def setup_takes(self, fn: FuncItem, contract: list[Take], st: State) -> None:
        self.takes = {}
        self_var = fn.arguments[0].variable
        for take in contract:
            marker = Var(f"{self_var.name}.{take.field} take-out", None)
            self.markers.add(marker)
            self.takes[take.field] = (take, marker)
            st[marker] = frozenset({(HELD, fn.line, fn.column, take.noun)})
        nested = {t.field for t in contract if t.nested}
        self.take_aliases = _aliases(fn, self_var, nested) if nested else {}

    def took_from(self, container: Expression, line: int, column: int) -> None:
        """An owned entry was taken out of `container`: if it is a named field, the contract is met."""
        if not self.takes or self.st is None or self.fn is None:
            return
        self_var = self.fn.arguments[0].variable
        name, nested = _field_of_self(container, self_var), False
        if name is None and isinstance(container, IndexExpr):
            name, nested = _field_of_self(container.base, self_var), True
        elif name is None and isinstance(container, NameExpr) and isinstance(container.node, Var):
            name, nested = self.take_aliases.get(container.node), True
        entry = self.takes.get(name) if name is not None else None
        if entry is None or entry[0].nested != nested:
            return
        take, marker = entry
        self.st[marker] = frozenset({(MOVED, line, column, take.noun)})

    def check_takes(self, exits: list[tuple[str, State, int]]) -> None:
        """Report each named field that no normal exit may have taken an entry out of."""
        fn = self.fn
        if not self.takes or fn is None:
            return
        for field, (take, marker) in self.takes.items():
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
    """Locals every assignment of which binds them from one of `fields`' items."""
    sources: dict[Var, set[str | None]] = {}
    stack: list[Node] = list(fn.body.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (FuncItem, ClassDef)):
            continue
        if isinstance(node, AssignmentStmt):
            for target in node.lvalues:
                single = isinstance(target, NameExpr)
                source = _alias_source(node.rvalue, self_var) if single else None
                for var in _bound(target):
                    sources.setdefault(var, set()).add(source)
        elif isinstance(node, ForStmt):
            for var in _bound(node.index):
                sources.setdefault(var, set()).add(None)
        stack.extend(children(node))
    out: dict[Var, str] = {}
    for var, found in sources.items():
        if len(found) == 1:
            (only,) = found
            if only is not None and only in fields:
                out[var] = only
    return out

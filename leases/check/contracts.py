"""The `@takes_from` contract of a method: the fields it names, read from the decorator or the comment.

`leases.check.takes` checks a method against its contract; this module only
reads and resolves it (a field named must be an owning container of the
method's class, or hold such containers), so the module pass can record
contracts before any function is analysed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

from mypy.nodes import FUNC_NO_INFO, CallExpr, Decorator, FuncItem, RefExpr, StrExpr, TypeInfo, Var
from mypy.types import Instance, get_proper_type

from leases.check import codes
from leases.check.model import classify, container_item, is_borrowed

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

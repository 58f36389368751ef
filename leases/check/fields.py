"""Owned fields: leases and `@linear` values kept in attributes of `self` and other parameters.

A field `p.f` of a parameter `p` is analysed like a local variable named
`p.f`. It starts held (nothing in `__init__`), `x = p.f` moves its value to
`x` and `p.f = None` completes the move; `x = p.f` without the reset only
borrows. At a normal exit of a `@consumes` method every owned field of `self`
must be discharged (released, handed on, or moved out); at every other exit a
field must not be left holding a released or moved value.
"""

from __future__ import annotations

from collections.abc import Sequence

from mypy.nodes import (
    FUNC_NO_INFO,
    ClassDef,
    FuncItem,
    MemberExpr,
    NameExpr,
    Node,
    Var,
)
from mypy.types import Instance, Type, UnionType, get_proper_type

from leases.check import codes
from leases.check.facts import HELD, MOVED, RELEASED, State, verb
from leases.check.model import (
    Field,
    consuming_method,
    field_of,
    is_linear_info,
    owned_fields,
)
from leases.check.ownership import OwnershipBase
from leases.check.walk import children


class FieldsMixin(OwnershipBase):
    """Field variables: set up at function entry, checked at every exit."""

    def setup_places(self, fn: FuncItem, st: State) -> None:
        self.s.discharging = set()
        params = {arg.variable for arg in fn.arguments}
        info = fn.info if fn.info is not FUNC_NO_INFO else None
        self_var = (
            fn.arguments[0].variable if info is not None and fn.arguments and not fn.is_static
            else None
        )
        for node in _members(fn.body.body):
            base = node.expr.node if isinstance(node.expr, NameExpr) else None
            if not isinstance(base, Var) or base not in self.s.locals:
                continue
            key = (base, node.name)
            if key in self.s.places:
                continue
            field = field_of(base.type, node.name)
            if field is None:
                continue
            place = Var(f"{base.name}.{node.name}", None)
            self.s.places[key] = place
            self.s.place_bases[place] = base
            self.s.place_nouns[place] = field.noun
            if field.container:
                self.s.container_places.add(place)
            if base in params and not (base is self_var and fn.name == "__init__"):
                st[place] = frozenset({(HELD, fn.line, fn.column, field.noun)})
        if (
            info is not None and self_var is not None and is_linear_info(info)
            and consuming_method(info, fn.name)
        ):
            self.discharge_all(self_var, owned_fields(info), fn, st)
        for arg in fn.arguments:
            var = arg.variable
            if var is self_var or not any(f[0] == HELD for f in st.get(var, ())):
                continue
            fields = _fields_of_type(var.type)
            if fields:
                self.discharge_all(var, fields, fn, st)

    def discharge_all(self, base: Var, fields: dict[str, Field], fn: FuncItem, st: State) -> None:
        """Every owned field of `base` must be discharged at normal exits."""
        self.s.discharging.add(base)
        for name, field in fields.items():
            if (base, name) in self.s.places:
                continue
            place = Var(f"{base.name}.{name}", None)
            self.s.places[(base, name)] = place
            self.s.place_bases[place] = base
            self.s.place_nouns[place] = field.noun
            if field.container:
                self.s.container_places.add(place)
            st[place] = frozenset({(HELD, fn.line, fn.column, field.noun)})

    def check_fields(self, st: State, kind: str, line: int) -> None:
        """Fields at an exit: discharged (consuming method), or not left dangling (any other)."""
        params = {arg.variable for arg in self.s.fn.arguments} if self.s.fn is not None else set()
        for place, base in self.s.place_bases.items():
            facts = st.get(place)
            if not facts or base not in params:
                continue
            pair = any(self.s.links.get(v) is place and any(f[0] == HELD for f in st.get(v, ()))
                       for v in self.s.links)
            if base in self.s.discharging and kind not in ("raise", "cancel"):
                held = sorted({(f[1], f[2], f[3]) for f in facts
                               if f[0] == HELD or (pair and f[0] == MOVED)})
                modal = "is not" if len(held) == len(facts) else "may not be"
                for hline, hcol, noun in held:
                    self.report(
                        hline, hcol, codes.LEAK.code,
                        f'{noun} field "{place.name}" {modal} {verb(noun)} or transferred '
                        f"before {self.where(kind, line)} (a @consumes method discharges every "
                        f"owned field)",
                    )
                continue
            alias = place in self.s.container_places  # `locks = self.locks` aliases the container
            through = sorted(  # `lease = self.lease; lease.release()` with the field never reset
                (f[1], v.name, f[3]) for v, linked in self.s.links.items() if linked is place
                for f in st.get(v, ()) if f[0] == RELEASED
            ) if any(f[0] == MOVED for f in facts) and not alias else []
            for at, name, noun in through[:1]:
                modal = "is" if all(f[0] == RELEASED for v, linked in self.s.links.items() if linked is place
                                    for f in st.get(v, ())) else "may be"
                self.report(
                    at, 0, codes.DANGLING.code,
                    f'{noun} field "{place.name}" {modal} {verb(noun)} through "{name}" at line {at} but '
                    f"still stored at {self.where(kind, line)}; set it to None or to a new value",
                )
            if through:
                continue
            gone = sorted({(f[0], f[1], f[3]) for f in facts
                           if f[0] == RELEASED or (f[0] == MOVED and not pair and not alias)})
            for what, at, noun in gone:
                modal = "is" if len(gone) == len(facts) else "may be"
                how = verb(noun) if what == RELEASED else "moved out"
                self.report(
                    at, 0, codes.DANGLING.code,
                    f'{noun} field "{place.name}" {modal} {how} at line {at} but still stored at '
                    f"{self.where(kind, line)}; set it to None or to a new value",
                )


def _members(body: Sequence[Node]) -> list[MemberExpr]:
    out: list[MemberExpr] = []
    stack: list[Node] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (FuncItem, ClassDef)):
            continue
        if isinstance(node, MemberExpr):
            out.append(node)
        stack.extend(children(node))
    out.sort(key=lambda m: (m.line, m.column))
    return out


def _fields_of_type(t: Type | None) -> dict[str, Field]:
    p = get_proper_type(t) if t is not None else None
    items = p.items if isinstance(p, UnionType) else [p]
    out: dict[str, Field] = {}
    for item in items:
        ip = get_proper_type(item) if item is not None else None
        if isinstance(ip, Instance):
            out.update(owned_fields(ip.type))
    return out


"""Conditions: the states where a test is true and false, narrowing owned names."""

from __future__ import annotations

from mypy.nodes import (
    AssignmentExpr,
    CallExpr,
    ComparisonExpr,
    Expression,
    IntExpr,
    MemberExpr,
    NameExpr,
    Node,
    OpExpr,
    RefExpr,
    TypeInfo,
    UnaryExpr,
    Var,
)
from mypy.types import Instance, NoneType, UnionType, get_proper_type

from leases.check.facts import HELD, NOTHING_FACTS, State, join, slot_of, spelled
from leases.check.model import KEYED_CONTAINERS, LEASE, classify, is_borrowed, is_linear_info, tracked_instance
from leases.check.ownership import OwnershipBase
from leases.check.walk import children


class ConditionsMixin(OwnershipBase):
    """Condition analysis and narrowing of owned names."""

    def cond(self, e: Expression) -> tuple[State | None, State | None]:
        """Evaluate a condition; return the states where it is true and false."""
        if self.s.st is None:
            return None, None
        if self.s.pop_markers:
            self.pop_tested(spellings(e))
        t, f = self.test(e)
        names = counted(e)
        if names:
            after = self.s.st
            for st in (t, f):
                self.s.st = st
                self.pop_counted(names)
            self.s.st = after
        return t, f

    def test(self, e: Expression) -> tuple[State | None, State | None]:
        """`cond` without the bookkeeping of containers tested for pops."""
        if self.s.st is None:
            return None, None
        if isinstance(e, UnaryExpr) and e.op == "not":
            t, f = self.cond(e.expr)
            return f, t
        if isinstance(e, OpExpr) and e.op in ("and", "or"):
            t1, f1 = self.cond(e.left)
            if e.op == "and":
                self.s.st = t1
                t2, f2 = self.cond(e.right)
                return t2, join(f1, f2)
            self.s.st = f1
            t2, f2 = self.cond(e.right)
            return join(t1, t2), f2
        test = self.none_test(e)
        if test is not None:
            var, true_means_value = test
            st = self.current()
            if st is None:
                return None, None
            return (
                self.narrow(st, var, present=true_means_value),
                self.narrow(st, var, present=not true_means_value),
            )
        emptied, when = self.emptiness_test(e)
        self.lend(self.rules.ev(e))
        st = self.current()  # the evaluation may have ended the path (a call that never returns)
        if st is None:
            return None, None
        t, f = st, dict(st)
        if emptied is not None:
            empty = t if when else f
            empty[emptied] = NOTHING_FACTS  # `while pins:` exits, `if not pins:` holds: an empty container owns nothing
        member = self.membership(e)
        if member is not None:
            marker, noun, true_means_present = member
            present, absent = (t, f) if true_means_present else (f, t)
            present[marker] = frozenset({(HELD, e.line, e.column, noun)})  # `if k in self.lru:` finds it stored
            absent[marker] = NOTHING_FACTS
        return t, f

    def membership(self, e: Expression) -> tuple[Var, str, bool] | None:
        """For `k in c` / `k not in c` over a mapping of owned values: the marker of slot `c[k]`, the noun of
        its values, and whether the test's true branch finds the key present."""
        if not (isinstance(e, ComparisonExpr) and len(e.operators) == 1 and e.operators[0] in ("in", "not in")):
            return None
        key, container = e.operands
        t = self.s.types.get(container)
        p = get_proper_type(t) if t is not None else None
        if not (isinstance(p, Instance) and p.type.fullname in KEYED_CONTAINERS and p.args):
            return None
        kind = classify(p.args[-1])
        if kind is None or is_borrowed(p.args[-1]):
            return None
        slot = slot_of(container, key)
        if not slot:
            return None
        return self.marker(slot), kind.noun, e.operators[0] == "in"

    def emptiness_test(self, e: Expression) -> tuple[Var | None, bool]:
        """For `c`, `len(c)`, `len(c) == 0`, `len(c) > 0` (and the like) over a local container of owned
        values: the container, and whether the test's true branch (else its false one) finds it empty."""
        if isinstance(e, CallExpr) and isinstance(e.callee, NameExpr) and e.callee.fullname == "builtins.len" \
                and len(e.args) == 1:
            return self.held_local_container(e.args[0]) or self.held_contents(e.args[0]), False
        if isinstance(e, ComparisonExpr) and len(e.operators) == 1:
            left, right = e.operands
            op = e.operators[0]
            if isinstance(left, IntExpr):
                left, right = right, left
                op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            var, _ = self.emptiness_test(left) if isinstance(left, CallExpr) else (None, False)
            if var is None or not isinstance(right, IntExpr):
                return None, False
            n = right.value
            if (op == "==" and n == 0) or (op == "<=" and n == 0) or (op == "<" and n == 1):
                return var, True
            if (op == "!=" and n == 0) or (op == ">" and n == 0) or (op == ">=" and n == 1):
                return var, False
            return None, False
        return self.held_local_container(e) or self.held_contents(e), False

    def none_test(self, e: Expression) -> tuple[Var, bool] | None:
        """For `x is None`, `x is not None`, `x` and walrus forms: (x, true-means-not-None)."""
        if isinstance(e, ComparisonExpr) and len(e.operators) == 1 and e.operators[0] in (
            "is", "is not", "==", "!="
        ):
            left, right = e.operands
            if _is_none(left):
                left, right = right, left
            if not _is_none(right):
                return None
            var = self.tested_var(left)
            if var is None:
                return None
            return var, e.operators[0] in ("is not", "!=")
        if (
            isinstance(e, CallExpr) and isinstance(e.callee, NameExpr)
            and e.callee.fullname == "builtins.isinstance" and len(e.args) == 2
            and isinstance(e.args[1], RefExpr) and isinstance(e.args[1].node, TypeInfo)
        ):
            info = e.args[1].node
            var = self.local_var(e.args[0])
            if var is not None and (info.fullname == LEASE or is_linear_info(info)):
                return var, True
            return None
        if isinstance(e, MemberExpr) and self.s.container_places:
            var = self.local_var(e)
            if var in self.s.container_places:
                return var, True
        if isinstance(e, (NameExpr, AssignmentExpr, MemberExpr)):
            name = e.target if isinstance(e, AssignmentExpr) else e
            if not self.truthiness_is_presence(name):
                return None
            var = self.tested_var(e)
            return None if var is None else (var, True)
        return None

    def tested_var(self, e: Expression) -> Var | None:
        if isinstance(e, AssignmentExpr):
            self.rules.ev(e)
            return self.local_var(e.target)
        return self.local_var(e)

    def truthiness_is_presence(self, e: Expression) -> bool:
        t = self.s.types.get(e)
        p = get_proper_type(t) if t is not None else None
        if not isinstance(p, UnionType):
            return False
        seen_none = False
        for item in p.items:
            ip = get_proper_type(item)
            if isinstance(ip, NoneType):
                seen_none = True
            elif not (isinstance(ip, Instance) and tracked_instance(ip) is not None
                      and ip.type.get("__bool__") is None and ip.type.get("__len__") is None):
                return False
        return seen_none


def spellings(e: Node) -> list[str]:
    """The spelling of every name and attribute chain in `e` (`len(self.q) > 1`: "self.q", "self")."""
    out: list[str] = []
    stack: list[Node] = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, (NameExpr, MemberExpr)) and (name := spelled(node)) is not None:
            out.append(name)
        stack.extend(children(node))
    return out


def counted(e: Node) -> list[str]:
    """The containers whose length `e` tests (`len(self.q) >= 2`): "self.q"."""
    out: list[str] = []
    stack: list[Node] = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, CallExpr) and isinstance(node.callee, NameExpr) \
                and node.callee.fullname == "builtins.len" and len(node.args) == 1 \
                and (name := spelled(node.args[0])) is not None:
            out.append(name)
        stack.extend(children(node))
    return out


def _is_none(e: Expression) -> bool:
    return isinstance(e, NameExpr) and e.fullname == "builtins.None"

"""Simple statements, `if`, `assert`, `del` and nested definitions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from mypy.nodes import (
    FloatExpr,
    IntExpr,
    StrExpr,
    AssertStmt,
    AssignmentStmt,
    Block,
    BreakStmt,
    ClassDef,
    ContinueStmt,
    Decorator,
    DelStmt,
    Expression,
    CallExpr,
    ExpressionStmt,
    ForStmt,
    FuncDef,
    FuncItem,
    IfStmt,
    IndexExpr,
    ListExpr,
    MatchStmt,
    MemberExpr,
    NameExpr,
    Node,
    OperatorAssignmentStmt,
    OverloadedFuncDef,
    RaiseStmt,
    ReturnStmt,
    StarExpr,
    Statement,
    TempNode,
    TryStmt,
    TupleExpr,
    TypeInfo,
    Var,
    WhileStmt,
    WithStmt,
)
from mypy.types import (
    CallableType,
    FunctionLike,
    Instance,
    Type,
    TypeType,
    UninhabitedType,
    get_proper_type,
)

from leases.check import codes
from leases.check.compound import CompoundMixin
from leases.check.facts import (
    BORROWED,
    HELD,
    NOTHING_FACTS,
    OTHER,
    State,
    Value,
    dropped_message,
    exception_state,
    join_all,
    slot_of,
    spelled,
    verb,
)
from leases.check.model import LEASE, classify, container_item, holds_owned, is_borrowed, owned_item
from leases.check.walk import children


class StatementsMixin(CompoundMixin):
    """Statement dispatch and simple statements."""

    def stmts(self, body: Sequence[Statement]) -> None:
        for s in body:
            if self.s.st is None:
                return
            self.stmt(s)

    def block(self, b: Block) -> None:
        if b.is_unreachable or (b.body and self._block_unreachable_by_types(b.body)):
            if self.s.st is not None and b.body and not b.is_unreachable:
                self.s.mod.note(b.body[0].line, 0, f"skipped: the block at line {b.body[0].line} "
                                                 f"(mypy found it unreachable and typed nothing there)")
            self.s.st = None
            return
        self.stmts(b.body)

    def _block_unreachable_by_types(self, body: Sequence[Statement]) -> bool:
        """mypy skipped this block (unreachable after narrowing): none of its expressions has a type.

        Every expression of the block is looked at, not only the first
        statement's rvalue: mypy records no type for some containers it checks
        item by item (the right side of `a, b = x, y`). A block without any
        expression (`pass`, `break`) counts as reachable.
        """
        stack: list[Node] = list(reversed(body))
        seen_expression = False
        while stack:
            node = stack.pop()
            if isinstance(node, (FuncItem, ClassDef, Decorator, OverloadedFuncDef)):
                continue
            if isinstance(node, DelStmt) and not isinstance(node.expr, IndexExpr):
                continue  # mypy types no `del name` / `del a.b` target, reachable or not
            if isinstance(node, Expression) and not isinstance(node, TempNode):
                if node in self.s.types:
                    return False
                seen_expression = True
            stack.extend(children(node))
        return seen_expression

    def lease_release(self, s: Statement) -> bool:
        """`lease.release()` as a statement: it raises only on misuse (a second release, another
        thread), so its handlers are not asked to release the lease again (`try: old.release();
        old = new  finally: old.release()` is the swap idiom)."""
        if not (isinstance(s, ExpressionStmt) and isinstance(s.expr, CallExpr)
                and isinstance(s.expr.callee, MemberExpr) and s.expr.callee.name == "release"):
            return False
        t = self.s.types.get(s.expr.callee.expr)
        p = get_proper_type(t) if t is not None else None
        return isinstance(p, Instance) and p.type.fullname == LEASE

    def stmt(self, s: Statement) -> None:
        if not self.s.frames:
            self.dispatch(s)
        elif isinstance(s, SIMPLE_STATEMENTS):
            pre = None if self.s.st is None else dict(self.s.st)
            self.s.exit_state = None
            self.dispatch(s)
            post = self.s.st if self.s.st is not None else self.s.exit_state
            if pre is not None and not _cannot_raise(s) and not self.lease_release(s):
                self.record_exception(exception_state(pre, post))
        else:
            if not isinstance(s, (TryStmt, Block)):
                self.record_exception()
            self.dispatch(s)

    def dispatch(self, s: Statement) -> None:
        if isinstance(s, ExpressionStmt):
            self.expression_stmt(s)
        elif isinstance(s, AssignmentStmt):
            self.assignment(s)
        elif isinstance(s, ReturnStmt):
            self.return_stmt(s)
        elif isinstance(s, IfStmt):
            self.if_stmt(s)
        elif isinstance(s, ForStmt):
            self.for_stmt(s)
        elif isinstance(s, WhileStmt):
            self.while_stmt(s)
        elif isinstance(s, TryStmt):
            self.try_stmt(s)
        elif isinstance(s, WithStmt):
            self.with_stmt(s)
        elif isinstance(s, RaiseStmt):
            self.raise_stmt(s)
        elif isinstance(s, (BreakStmt, ContinueStmt)):
            assert self.s.st is not None
            self.unwind("break" if isinstance(s, BreakStmt) else "continue", self.s.st, s.line)
            self.s.st = None
        elif isinstance(s, OperatorAssignmentStmt):
            self.lend(self.rules.ev(s.rvalue))
            self.lend(self.rules.ev(s.lvalue))
        elif isinstance(s, DelStmt):
            self.del_stmt(s.expr, s.line)
        elif isinstance(s, AssertStmt):
            self.assert_stmt(s)
        elif isinstance(s, MatchStmt):
            self.match_stmt(s)
        elif isinstance(s, Block):
            self.block(s)
        elif isinstance(s, (FuncDef, Decorator, OverloadedFuncDef, ClassDef)):
            self.definition(s)

    def expression_stmt(self, s: ExpressionStmt) -> None:
        v = self.rules.ev(s.expr)
        if v.kind in ("fresh", "tuple"):
            self.lend(v)
        elif v.kind == "display":  # `self.pins.pop(node)`: the container and the values it holds go
            self.report(v.line, v.column, codes.DISCARDED.code,
                        f'{v.noun} container returned by "{v.source}" is discarded')
        elif v.kind == "awaitable":  # `asyncio.create_task(fetch())`, `fetch()` as a statement
            self.untracked_flow(v, "a statement that drops it (await it, or keep the task and await it)")
        t = self.s.types.get(s.expr)
        if t is not None and isinstance(get_proper_type(t), UninhabitedType):
            self.s.st = None

    def assignment(self, s: AssignmentStmt) -> None:
        if s.is_alias_def or isinstance(s.rvalue, TempNode):
            return
        first = s.lvalues[0]
        rvalue = s.rvalue
        if (
            isinstance(first, (TupleExpr, ListExpr))
            and isinstance(rvalue, (TupleExpr, ListExpr))
            and len(first.items) == len(rvalue.items)
            and not any(isinstance(i, StarExpr) for i in first.items + rvalue.items)
        ):
            values = [self.rules.ev(item) for item in rvalue.items]
            self.bind_simultaneously(first.items, values, s.line)
        else:
            views = self.declares_views(first)
            self.s.view_displays += views
            try:
                self.sink(rvalue, lambda v: self.bind(first, v, s.line))
            finally:
                self.s.view_displays -= views
        for extra in s.lvalues[1:]:
            self.bind(extra, OTHER, s.line)
        for target in s.lvalues:
            self.rules.alias_bound(target, rvalue)
            self.rules.container_view(target, rvalue)
            self.rules.copy_bound(target, rvalue)
        if self.s.st is not None:
            t = self.s.types.get(rvalue)
            if t is not None and isinstance(get_proper_type(t), UninhabitedType):
                self.s.st = None

    def declares_views(self, target: Expression) -> int:
        """1 when `target` is a name declared as a container of views (`list[Borrowed[...]]`), else 0."""
        var = self.local_var(target) if isinstance(target, NameExpr) else None
        return int(var is not None and is_borrowed(container_item(var.type)))

    def returned_copy(self, e: Expression) -> None:
        """`return list(self.pins)` from a function declared to hand over a container of owned values:
        the entries are still the field's, so caller and field would both release them."""
        fn = self.s.fn
        ret = fn.type.ret_type if fn is not None and isinstance(fn.type, CallableType) else None
        if self.s.st is None or not holds_owned(ret):
            return
        if isinstance(e, NameExpr):
            copy = self.copy_held_by(self.local_var(e))
            if copy is None or not any(place.name == copy[0] for place in self.s.container_places):
                return
            name = copy[0]
        else:
            source = self.rules.copy_source(e)
            spelling = spelled(source) if source is not None else None
            if source is None or spelling is None \
                    or self.rules.spendable("entry", source) not in self.s.container_places:
                return  # a parameter's container: the caller decides (`sorted(pins, key=...)` returns views)
            name = spelling
        self.report(e.line, e.column, codes.DANGLING.code,
                    f'The container returned holds the entries of "{name}", which still holds them, so '
                    f"the caller and it would both release them; move them out (pop each, or take the "
                    f"container and reset the field), or declare the items Borrowed[...]")

    def bind_simultaneously(self, targets: list[Expression], values: list[Value], line: int) -> None:
        """`a, b = b, a`: every value is read before any target is bound."""
        if self.s.st is None:
            return
        rebound = {self.local_var(t) for t in targets} - {None}
        staged: list[Var] = []
        for i, v in enumerate(values):
            src = v.var
            if v.kind == "var" and src is not None and src in rebound:
                self.check_use(src, v.line, v.column)
                temp = Var(src.name, src.type)
                self.s.st[temp] = self.facts(src)
                self.s.st[src] = NOTHING_FACTS
                values[i] = Value("var", v.line, v.column, var=temp)
                staged.append(temp)
        for target, value in zip(targets, values):
            self.bind(target, value, line)
        for temp in staged:
            if self.s.st is not None:
                self.s.st.pop(temp, None)

    def return_stmt(self, s: ReturnStmt) -> None:
        if s.expr is not None:
            if self.s.returns_any:
                self.sink(s.expr, lambda v: self.untracked_flow(v, "a return typed Any"))
            elif not self.s.return_tracks:
                self.sink(s.expr, lambda v: self.untracked_flow(
                    v, "a return whose declared type owns nothing"))
            elif self.s.return_lends:
                self.sink(s.expr, self.lend)
            else:
                self.returned_copy(s.expr)
                fn = self.s.fn
                views = int(fn is not None and isinstance(fn.type, CallableType)
                            and is_borrowed(container_item(fn.type.ret_type)))
                self.s.view_displays += views
                try:
                    self.sink(s.expr, lambda v: self.transfer(v, "returning it", s.line))
                finally:
                    self.s.view_displays -= views
        if self.s.st is not None:
            self.unwind("return", self.s.st, s.line)
        self.s.st = None

    def raise_stmt(self, s: RaiseStmt) -> None:
        raised: list[TypeInfo] | None = None
        if s.expr is not None:
            self.lend(self.rules.ev(s.expr))
            raised = self.exception_classes(s.expr)
        if s.from_expr is not None:
            self.lend(self.rules.ev(s.from_expr))
        if self.s.st is not None:
            self.unwind("raise", self.s.st, s.line, raised)
        self.s.st = None

    def exception_classes(self, e: Expression) -> list[TypeInfo] | None:
        t = self.s.types.get(e)
        if t is None:
            return None
        p = get_proper_type(t)
        if isinstance(p, Instance):
            return [p.type]
        if isinstance(p, TypeType):
            item = get_proper_type(p.item)
            return [item.type] if isinstance(item, Instance) else None
        if isinstance(p, FunctionLike) and p.is_type_obj():
            return [p.type_object()]
        return None

    def if_stmt(self, s: IfStmt) -> None:
        outs: list[State | None] = []
        for cond, body in zip(s.expr, s.body):
            t, f = self.rules.cond(cond)
            self.s.st = t
            if t is not None:
                self.block(body)
            outs.append(self.s.st)
            self.s.st = f
            if f is None:
                break
        if self.s.st is not None and s.else_body is not None:
            self.block(s.else_body)
        outs.append(self.s.st)
        self.s.st = join_all(outs)

    def assert_stmt(self, s: AssertStmt) -> None:
        if isinstance(s.expr, NameExpr) and s.expr.fullname == "builtins.False":
            self.s.st = None
            return
        t, f = self.rules.cond(s.expr)
        if s.msg is not None and f is not None:
            self.s.st = f
            self.lend(self.rules.ev(s.msg))
        self.s.st = t

    def del_stmt(self, e: Expression, line: int) -> None:
        if isinstance(e, TupleExpr):
            for item in e.items:
                self.del_stmt(item, line)
            return
        var = self.local_var(e)
        if var is not None and self.s.st is not None:
            facts = self.facts(var)
            held = [f for f in facts if f[0] == HELD]
            self.forget_slots(var.name)
            if held:
                self.report(line, e.column, codes.LEAK.code,
                            dropped_message(var, facts, held, "deleted"))
            self.s.st[var] = NOTHING_FACTS
        elif isinstance(e, MemberExpr):
            self.lend(self.rules.ev(e.expr))
        elif isinstance(e, IndexExpr):
            self.lend(self.rules.ev(e.base))
            self.lend(self.rules.ev(e.index))
            slot = slot_of(e.base, e.index)
            taker = self.taken_out(slot, line, e.column)
            entry = container_item(self.s.types.get(e.base))
            if entry is not None and not is_borrowed(entry) and classify(entry) is not None:
                self.rules.took_from(e.base, line, e.column)
                if not taker:
                    kind = classify(entry)
                    noun = kind.noun if kind is not None else "Lease"
                    self.report(line, e.column, codes.LEAK.code,
                                f'Deleting "{slot or "an item"}" drops the {noun} stored there, which is then never '
                                f"{verb(noun)}; pop it instead (x = d.pop(k)) and release it, or read it "
                                f"first (x = d[k]) so that x owns it after the del")
            elif entry is not None and owned_item(container_item(entry)):
                self.deleted_inner(slot, container_item(entry), line, e.column)
            for spelling in (slot, f"{slot}[*]"):  # the slot, and entries of the list it held released in a loop
                if slot and spelling in self.s.slot_markers and self.s.st is not None:
                    self.s.st[self.s.slot_markers[spelling]] = NOTHING_FACTS

    def deleted_inner(self, slot: str, item: Type | None, line: int, column: int) -> None:
        """`del self.pins[node]` where the item is a container of owned values: what it may still hold.

        A local view of the item (`pins = self.pins.get(node)`) that a test
        found empty, or a loop spent, says it holds nothing; one that may
        still hold values takes them over (a local container it must then
        drain or hand on). With no view the values are lost.
        """
        if self.s.st is None:
            return
        kind = classify(item)
        noun = kind.noun if kind is not None else "Lease"
        views = [var for var, at in self.s.view_slots.items() if slot and at == slot]
        if not views:
            self.report(line, column, codes.LEAK.code,
                        f'Deleting "{slot or "an item"}" drops the {noun} values it may still hold; release '
                        f"them first (pop each), or take the container out (pins = d.pop(k)) and drain it")
            return
        for var in views:
            marker = self.s.contents.get(var)
            facts = self.s.st.get(marker, ()) if marker is not None else ()
            if any(f[0] == HELD for f in facts):
                assert marker is not None
                self.s.st[var] = frozenset({(HELD, line, column, f"{noun} container")})
                self.s.st[marker] = NOTHING_FACTS
                del self.s.contents[var]
            del self.s.view_slots[var]

    def taken_out(self, slot: str, line: int, column: int) -> bool:
        """`del d[k]` after `x = d[k]` (or `d.get(k)`): `x` now owns what the container held.

        Returns whether some name took it over."""
        if not slot or self.s.st is None:
            return False
        taker = False
        for var, borrowed_from in list(self.s.slots.items()):
            facts = self.s.st.get(var, ())
            if borrowed_from == slot and any(f[0] == BORROWED for f in facts):
                noun = next(f[3] for f in facts if f[0] == BORROWED)
                self.s.st[var] = frozenset(
                    (HELD, line, column, noun) if f[0] == BORROWED else f for f in facts
                )
                del self.s.slots[var]
                taker = True
        return taker

    def definition(self, s: Statement) -> None:
        scope = self.s.enclosing | frozenset(self.s.locals)
        if isinstance(s, Decorator):
            for dec in s.original_decorators:
                self.lend(self.rules.ev(dec))
            self.capture_check(s.func, "a closure")
        elif isinstance(s, FuncDef):
            self.capture_check(s, "a closure")
        elif isinstance(s, OverloadedFuncDef):
            if s.impl is not None:
                impl = s.impl.func if isinstance(s.impl, Decorator) else s.impl
                self.capture_check(impl, "a closure")
        elif isinstance(s, ClassDef):
            self.capture_check(s, "a nested class")
        self.s.mod.enqueue_definition(s, scope)


SIMPLE_STATEMENTS: Final = (
    ExpressionStmt, AssignmentStmt, OperatorAssignmentStmt, DelStmt, AssertStmt, ReturnStmt,
    RaiseStmt,
)


def _cannot_raise(s: Statement) -> bool:
    """`mask = nxt`, `a, b = b, a`, `slot = None`: binding names to names or constants raises nothing,
    so the state before it reaches no handler."""
    if not isinstance(s, AssignmentStmt) or s.type is not None:
        return False
    plain = (NameExpr, IntExpr, StrExpr, FloatExpr)
    targets = [t for lv in s.lvalues for t in (lv.items if isinstance(lv, TupleExpr) else [lv])]
    values = s.rvalue.items if isinstance(s.rvalue, TupleExpr) else [s.rvalue]
    return all(isinstance(t, NameExpr) for t in targets) and all(isinstance(v, plain) for v in values)

"""Expressions and calls: what each evaluation lends, moves or consumes."""

from __future__ import annotations

from mypy.nodes import (
    AssertTypeExpr,
    AssignmentExpr,
    AwaitExpr,
    CallExpr,
    CastExpr,
    ComparisonExpr,
    ConditionalExpr,
    DictExpr,
    DictionaryComprehension,
    Expression,
    GeneratorExpr,
    IndexExpr,
    LambdaExpr,
    ListComprehension,
    ListExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OpExpr,
    RefExpr,
    RevealExpr,
    SetComprehension,
    SetExpr,
    StarExpr,
    TupleExpr,
    TypeInfo,
    UnaryExpr,
    Var,
    YieldExpr,
    YieldFromExpr,
)
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    TupleType,
    Type,
    UninhabitedType,
    get_proper_type,
)

from leases.check import codes
from leases.check.facts import (
    BORROWED,
    HELD,
    MAX_ITERATIONS,
    NEW,
    NONE,
    NOTHING_FACTS,
    OTHER,
    State,
    Value,
    join,
    join_all,
    same,
    slot_of,
)
from leases.check.model import (
    GENERATOR_TYPES,
    LEASE_CONSUMING,
    MOVE_OUT_METHODS,
    classify,
    container_item,
    is_borrowed,
)
from leases.check.ownership import OwnershipBase
from leases.check.walk import children


class ExpressionsMixin(OwnershipBase):
    """Expression and call analysis."""

    def ev(self, e: Expression) -> Value:
        """Evaluate `e` for its ownership effects; return where its value comes from."""
        if self.st is None:
            return OTHER
        if isinstance(e, NameExpr):
            var = self.local_var(e)
            if var is not None:
                self.narrowed_away(var, e)
                return Value("var", e.line, e.column, var=var)
            if e.fullname == "builtins.None":
                return NONE
            return OTHER
        if isinstance(e, MemberExpr):
            if isinstance(e.expr, RefExpr) and isinstance(e.expr.node, MypyFile):
                return OTHER
            place = self.local_var(e) if self.places else None
            if place is not None:
                self.narrowed_away(place, e)
                return Value("var", e.line, e.column, var=place)
            receiver = self.ev(e.expr)
            if receiver.kind == "var" and self.calls.is_consuming(self.types.get(e.expr), e.name):
                self.transfer(receiver, "binding its consuming method", e.line)
            else:
                self.lend(receiver)
            return OTHER
        if isinstance(e, CallExpr):
            return self.call(e)
        if isinstance(e, (TupleExpr, ListExpr, SetExpr)):
            for item in e.items:
                if isinstance(item, StarExpr):
                    self.lend(self.ev(item.expr))
                else:
                    self.sink(item, lambda v: self.store(v, e.line))
            return OTHER
        if isinstance(e, DictExpr):
            for key, value in e.items:
                if key is not None:
                    self.lend(self.ev(key))
                self.sink(value, lambda v: self.store(v, e.line))
            return OTHER
        if isinstance(e, ComparisonExpr):
            for op, operand in zip(["" ] + list(e.operators), e.operands):
                if isinstance(operand, (TupleExpr, ListExpr, SetExpr)):
                    for item in operand.items:
                        self.lend(self.ev(item))
                    continue
                v = self.ev(operand)
                if v.kind == "var" and ("is" in e.operators or "is not" in e.operators):
                    continue
                self.lend(v)
            return OTHER
        if isinstance(e, OpExpr):
            if e.op in ("and", "or"):
                t, f = self.cond(e.left)
                self.st = t if e.op == "and" else f
                skipped = f if e.op == "and" else t
                self.lend(self.ev(e.right))
                self.st = join(self.st, skipped)
                return OTHER
            self.lend(self.ev(e.left))
            self.lend(self.ev(e.right))
            return OTHER
        if isinstance(e, ConditionalExpr):
            t, f = self.cond(e.cond)
            self.st = t
            self.lend(self.ev(e.if_expr))
            after = self.st
            self.st = f
            self.lend(self.ev(e.else_expr))
            self.st = join(after, self.st)
            return OTHER
        if isinstance(e, (CastExpr, AssertTypeExpr)):
            return self.ev(e.expr)
        if isinstance(e, AssignmentExpr):
            self.sink(e.value, lambda v: self.bind(e.target, v, e.line))
            var = self.local_var(e.target)
            return Value("var", e.line, e.column, var=var) if var is not None else OTHER
        if isinstance(e, AwaitExpr):
            inner = self.ev(e.expr)
            self.lend(inner)
            self.suspension("await", e.line)
            if isinstance(e.expr, CallExpr):
                return self.call_result(e.expr, self.types.get(e), e)
            return OTHER
        if isinstance(e, YieldExpr):
            self.suspension("yield", e.line)
            if e.expr is not None and self.yields_owned():
                self.sink(e.expr, lambda v: self.transfer(v, "yielding it", e.line))
            elif e.expr is not None:
                v = self.ev(e.expr)
                if v.kind != "fresh":
                    self.lend(v)
            return OTHER
        if isinstance(e, (ListComprehension, SetComprehension)):
            self.comprehension(e.generator, None)
            return OTHER
        if isinstance(e, GeneratorExpr):
            self.comprehension(e, None)
            return OTHER
        if isinstance(e, DictionaryComprehension):
            self.comprehension(e, e)
            return OTHER
        if isinstance(e, LambdaExpr):
            self.capture_check(e, "a lambda")
            self.mod.enqueue_function(e, self.enclosing | frozenset(self.locals))
            return OTHER
        if isinstance(e, IndexExpr):
            self.lend(self.ev(e.base))
            self.lend(self.ev(e.index))
            kind = classify(self.types.get(e))
            if kind is not None:
                return Value("borrowed", e.line, e.column, noun=kind.noun, source="a subscript",
                             slot=slot_of(e.base, e.index))
            return OTHER
        if isinstance(e, (UnaryExpr, StarExpr, YieldFromExpr)):
            self.lend(self.ev(e.expr))
            return OTHER
        if isinstance(e, RevealExpr):
            if e.expr is not None:
                self.lend(self.ev(e.expr))
            return OTHER
        for child in children(e):
            if isinstance(child, Expression):
                self.lend(self.ev(child))
        return OTHER

    def comprehension(self, g: GeneratorExpr | DictionaryComprehension,
                      dict_comp: DictionaryComprehension | None) -> None:
        self.lend(self.ev(g.sequences[0]))
        if self.st is None:
            return
        entry = self.st
        line = g.line

        def one_pass(head: State) -> State | None:
            self.st = dict(head)
            skipped: list[State | None] = []
            for i, (index, seq, conds) in enumerate(zip(g.indices, g.sequences, g.condlists)):
                if i > 0:
                    self.lend(self.ev(seq))
                self.bind(index, OTHER, line)
                for c in conds:
                    t, f = self.cond(c)
                    skipped.append(f)
                    self.st = t
            if dict_comp is not None:
                if dict_comp.key is not None:
                    self.lend(self.ev(dict_comp.key))
                self.sink(dict_comp.value,
                          lambda v: self.transfer(v, "storing it in a container", line))
            elif isinstance(g, GeneratorExpr):
                self.sink(g.left_expr, lambda v: self.transfer(v, "storing it in a container", line))
            return join_all([self.st, *skipped])

        head = entry
        self.muted += 1
        try:
            for _ in range(MAX_ITERATIONS):
                end = one_pass(head)
                new_head = join(entry, end)
                assert new_head is not None
                if same(new_head, head):
                    break
                head = new_head
        finally:
            self.muted -= 1
        one_pass(head)
        self.st = head


    def call(self, e: CallExpr) -> Value:
        callee = e.callee
        receiver: Value | None = None
        receiver_type: Type | None = None
        if isinstance(callee, MemberExpr) and not (
            isinstance(callee.expr, RefExpr) and isinstance(callee.expr.node, MypyFile)
        ):
            receiver = self.ev(callee.expr)
            receiver_type = self.types.get(callee.expr)
        elif not isinstance(callee, (NameExpr, MemberExpr)):
            self.lend(self.ev(callee))
        modes = self.calls.argument_modes(e, receiver_type)
        handed: list[Value] = []
        for arg, mode in zip(e.args, modes):
            if self.st is None:
                return OTHER
            if mode == "own" and not isinstance(arg, ConditionalExpr):
                handed.append(self.ev(arg))
            elif mode == "own":
                self.sink(arg, lambda v: self.transfer(v, "passing it to an owning parameter", e.line))
            elif mode == "untyped":
                self.sink(arg, self.untyped_argument)
            else:
                self.sink(arg, self.lend)
        moved_in = any(self.owns(v) for v in handed)
        for v in handed:
            self.transfer(v, "passing it to an owning parameter", e.line)
        if receiver is not None and self.st is not None:
            assert isinstance(callee, MemberExpr)
            if self.calls.is_consuming(receiver_type, callee.name):
                self.consume(receiver, callee.line, callee.column)
            elif callee.name == "clear" and receiver.var in self.container_places:
                self.lend(receiver)
                self.st[receiver.var] = NOTHING_FACTS
            elif (
                callee.name in LEASE_CONSUMING and receiver.kind == "var" and receiver.var is not None
                and isinstance(get_proper_type(receiver_type), AnyType)
                and self.not_owning_parameter(receiver.var)
            ):
                self.report(callee.line, callee.column, codes.NOT_OWNED.code,
                            f'"{receiver.var.name}" is typed Any, so "{callee.name}()" may consume '
                            f"a value this function does not own; declare its type")
            else:
                self.lend(receiver)
            if moved_in and isinstance(callee, MemberExpr):
                self.filled(callee.expr, receiver_type, e.line)
        if isinstance(callee, MemberExpr) and callee.name in MOVE_OUT_METHODS:
            moved = self.moved_out(e, receiver_type)
            if moved is not None:
                return moved
        if isinstance(callee, MemberExpr) and callee.name == "get" and e.args:
            item = container_item(receiver_type)
            kind = classify(self.types.get(e))
            if item is not None and not is_borrowed(item) and classify(item) and kind:
                return Value("borrowed", e.line, e.column, noun=kind.noun, source="get",
                             slot=slot_of(callee.expr, e.args[0]))
        result = self.call_result(e, self.types.get(e), e)
        if result is OTHER and isinstance(callee, RefExpr) and isinstance(callee.node, TypeInfo):
            return NEW
        return result

    def suspension(self, kind: str, line: int) -> None:
        """With `--lease-exits`, an `await`/`yield` may leave the function (cancel, close)."""
        if kind in self.mod.exits_at and self.st is not None:
            self.unwind("cancel", dict(self.st), line, raised=[])

    def narrowed_away(self, var: Var, e: Expression) -> None:
        """mypy's narrowed type at this read owns nothing (None, an untracked class): nothing held."""
        facts = self.facts(var)
        if var in self.container_places or not any(f[0] == HELD for f in facts):
            return
        t = self.types.get(e)
        if t is None:
            return
        p = get_proper_type(t)
        if isinstance(p, (AnyType, UninhabitedType)) or classify(t) is not None:
            return
        assert self.st is not None
        self.st[var] = NOTHING_FACTS

    def moved_out(self, e: CallExpr, receiver_type: Type | None) -> Value | None:
        """`d.pop(k)`, `d.popitem()`, `q.popleft()` on a container of owned values: a fresh owner."""
        item = container_item(receiver_type)
        if item is None or is_borrowed(item) or classify(item) is None:
            return None
        t = self.types.get(e)
        p = get_proper_type(t) if t is not None else None
        source = self.calls.callee_name(e)
        if isinstance(p, TupleType):
            nouns = tuple((k.noun if (k := classify(x)) else None) for x in p.items)
            return Value("tuple", e.line, e.column, items=nouns, source=source)
        kind = classify(t)
        if kind is None:
            return None
        return Value("fresh", e.line, e.column, noun=kind.noun, source=source)

    def yields_owned(self) -> bool:
        """Whether this generator hands what it yields to its consumer (`Iterator[Lease[...]]`).

        A `@contextmanager` generator lends what it yields to the `with` block.
        """
        fn = self.fn
        if fn is None or fn in self.mod.lending_generators:
            return False
        sig = get_proper_type(fn.type) if fn.type is not None else None
        if not isinstance(sig, CallableType):
            return False
        ret = get_proper_type(sig.ret_type)
        if not (isinstance(ret, Instance) and ret.type.fullname in GENERATOR_TYPES and ret.args):
            return False
        return not is_borrowed(ret.args[0]) and classify(ret.args[0]) is not None

    def untyped_argument(self, v: Value) -> None:
        if v.kind == "var" and v.var is not None and any(
            f[0] in (HELD, BORROWED) for f in self.facts(v.var)
        ):
            self.report(v.line, v.column, codes.ESCAPE.code,
                        f'"{v.var.name}" is passed to an untyped callee; '
                        f"its ownership cannot be followed")
            assert self.st is not None
            self.st[v.var] = NOTHING_FACTS
        elif v.kind == "fresh":
            self.report(v.line, v.column, codes.ESCAPE.code,
                        f'{v.noun} returned by "{v.source}" is passed to an untyped callee; '
                        f"its ownership cannot be followed")
        else:
            self.lend(v)

    def call_result(self, call: CallExpr, t: Type | None, at: Expression) -> Value:
        if self.st is None or t is None:
            return OTHER
        p = get_proper_type(t)
        if isinstance(p, TupleType):
            nouns = tuple((k.noun if (k := classify(item)) else None) for item in p.items)
            if any(nouns) and self.calls.returns_owned(call) == "owned":
                return Value("tuple", at.line, at.column, items=nouns, source=self.calls.callee_name(call))
            return OTHER
        kind = classify(t)
        if kind is None:
            return OTHER
        owned = self.calls.returns_owned(call)
        if owned == "owned":
            return Value("fresh", at.line, at.column, noun=kind.noun, source=self.calls.callee_name(call))
        if owned == "borrowed":
            return Value("borrowed", at.line, at.column, noun=kind.noun, source=self.calls.callee_name(call))
        return OTHER



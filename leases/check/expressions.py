"""Expressions and calls: what each evaluation lends, moves or consumes."""

from __future__ import annotations

from typing import Final

from mypy.nodes import (
    ARG_POS,
    ARG_STAR,
    Node,
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
    FuncDef,
    GeneratorExpr,
    IndexExpr,
    IntExpr,
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
    StrExpr,
    SuperExpr,
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
    FunctionLike,
    Instance,
    TupleType,
    Type,
    TypeType,
    UninhabitedType,
    UnionType,
    get_proper_type,
)

from leases.check import codes
from leases.check.facts import (
    TryFrame,
    BORROWED,
    ENTRY,
    HELD,
    MOVED,
    NOTHING,
    RELEASED,
    MAX_ITERATIONS,
    TUPLE_NOUN,
    borrowed,
    dropped_message,
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
    spelled,
    verb,
)
from leases.check.model import (
    CASTS,
    DYNAMIC_CALLEES,
    GENERATOR_TYPES,
    KEYED_CONTAINERS,
    holds_owned,
    item_noun,
    items_noun,
    property_return,
    LEASE,
    UNTRACKED_ESCAPE,
    awaited_kind,
    LEASE_CONSUMING,
    MOVE_OUT_METHODS,
    classify,
    consuming_method,
    container_item,
    is_borrowed,
    mentions_owned,
    owned_fields,
    owned_item,
    owned_tuple,
    param_mode,
    tuple_or_none,
    without_none,
    is_weak_owner,
)
from leases.check.calls import STDLIB_CONTAINERS, takes_out_of_self
from leases.check.compound import ONE_SHOT
from leases.check.ownership import OwnershipBase
from leases.check.walk import children, target_names

HEAP_TAKES: Final = frozenset({f"{module}.{name}" for module in ("heapq", "_heapq")
                              for name in ("heappop", "heappushpop", "heapreplace")})
"""`heapq` functions that take the smallest item out of the heap they are given (a move, as `pop()`)."""
FILLING_METHODS: Final = frozenset({"extend", "extendleft", "update"})
"""Methods of the standard containers that store every item of the container they are given."""
MUTABLE_CONTAINERS: Final = ("typing.MutableSequence", "typing.MutableMapping", "typing.MutableSet")
"""A parameter declared one of these (a `list`, `dict`, `set`, `deque` ...) may be stored into."""


class ExpressionsMixin(OwnershipBase):
    """Expression and call analysis."""

    def ev(self, e: Expression) -> Value:
        """Evaluate `e` for its ownership effects; return where its value comes from."""
        if self.s.st is None:
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
            place = self.local_var(e) if self.s.places else None
            if place is not None:
                holder = self.local_var(e.expr) if isinstance(e.expr, NameExpr) else None
                if holder is not None:
                    self.check_use(holder, e.line, e.column)  # `g.close(); g.leases.append(x)`
                self.narrowed_away(place, e)
                return Value("var", e.line, e.column, var=place)
            receiver = self.ev(e.expr)
            if receiver.kind == "var" and self.s.calls.is_consuming(self.s.types.get(e.expr), e.name):
                self.transfer(receiver, "binding its consuming method", e.line)
            else:
                self.lend(receiver)
            kind = classify(self.s.types.get(e))
            if kind is not None and self.borrowed_attribute(e):  # `lease = self.last_checked`: a view
                return Value("borrowed", e.line, e.column, noun=kind.noun, source=f'the Borrowed field "{e.name}"',
                             declared_view=True)
            getter = property_return(self.s.types.get(e.expr), e.name) if kind is not None else None
            if kind is not None and getter is not None and is_borrowed(getter):  # `p.head`: a view
                return Value("borrowed", e.line, e.column, noun=kind.noun, source=f'the property "{e.name}"',
                             declared_view=True)
            if kind is not None and getter is not None and mentions_owned(getter):
                return Value("fresh", e.line, e.column, noun=kind.noun, source=f'the property "{e.name}"')
            return OTHER
        if isinstance(e, CallExpr):
            return self.call(e)
        if isinstance(e, (TupleExpr, ListExpr, SetExpr, DictExpr)):
            nouns: list[str] = []

            shape = tuple_or_none(self.s.types.get(e)) if isinstance(e, TupleExpr) else None
            holds_containers = shape is not None and any(holds_owned(x) for x in shape.items)

            def store(v: Value) -> None:
                if isinstance(e, TupleExpr) and self.container_value(v) and not holds_containers:
                    self.untracked_flow(v, "a tuple as one of its items")
                    return
                if v.kind == "display":
                    nouns.append(v.noun)
                elif holds_containers and self.container_value(v):
                    nouns.append(items_noun(v.var.type if v.var is not None else None))  # `(small, large)`
                elif self.owns(v):
                    nouns.append(v.noun or _noun(self.facts(v.var)) if v.var else v.noun)
                self.store(v, e.line)

            pending: list[Value] = []  # every item is read before the display takes any
            if isinstance(e, DictExpr):
                for key, value in e.items:
                    if key is not None:
                        self.lend(self.ev(key))
                    if isinstance(value, ConditionalExpr):
                        self.sink(value, store)
                    else:
                        pending.append(self.ev(value))
            else:
                for item in e.items:
                    if isinstance(item, StarExpr):
                        self.lend(self.ev(item.expr))
                    elif isinstance(item, ConditionalExpr):
                        self.sink(item, store)
                    else:
                        pending.append(self.ev(item))
            for v in pending:
                store(v)
            if nouns:
                return Value("display", e.line, e.column, noun=nouns[0], source="a display")
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
            member = self.rules.membership(e)
            if member is not None and self.s.st is not None:  # `retried = rid in self.inflight`
                marker, noun, _ = member
                self.s.st[marker] = self.s.st.get(marker, NOTHING_FACTS) | NOTHING_FACTS | frozenset(
                    {(HELD, e.line, e.column, noun)})  # the key may be there: a store after may overwrite
            return OTHER
        if isinstance(e, OpExpr):
            if e.op in ("and", "or"):
                t, f = self.rules.cond(e.left)
                self.s.st = t if e.op == "and" else f
                skipped = f if e.op == "and" else t
                self.lend(self.ev(e.right))
                self.s.st = join(self.s.st, skipped)
                return OTHER
            self.lend(self.ev(e.left))
            self.lend(self.ev(e.right))
            return OTHER
        if isinstance(e, ConditionalExpr):
            t, f = self.rules.cond(e.cond)
            self.s.st = t
            self.lend(self.ev(e.if_expr))
            after = self.s.st
            self.s.st = f
            self.lend(self.ev(e.else_expr))
            self.s.st = join(after, self.s.st)
            return OTHER
        if isinstance(e, CastExpr) and isinstance(get_proper_type(e.type), AnyType):
            self.sink(e.expr, lambda v: self.untracked_flow(v, "a cast to Any"))
            return OTHER
        if isinstance(e, (CastExpr, AssertTypeExpr)):
            return self.ev(e.expr)
        if isinstance(e, AssignmentExpr):
            self.sink(e.value, lambda v: self.bind(e.target, v, e.line))
            var = self.local_var(e.target)
            return Value("var", e.line, e.column, var=var) if var is not None else OTHER
        if isinstance(e, AwaitExpr):
            self.s.awaited.add(e.expr)
            inner = self.ev(e.expr)
            if inner.kind == "awaitable":
                self.suspension("await", e.line)
                if inner.items:
                    return Value("tuple", e.line, e.column, items=inner.items, source=inner.source)
                return Value("fresh", e.line, e.column, noun=inner.noun, source=inner.source)
            self.lend(inner)
            self.suspension("await", e.line)
            if isinstance(e.expr, CallExpr):
                return self.call_result(e.expr, self.s.types.get(e), e)
            return OTHER
        if isinstance(e, YieldExpr):
            self.suspension("yield", e.line)
            if e.expr is not None and self.yields_owned():
                self.sink(e.expr, lambda v: self.transfer(v, "yielding it", e.line))
            elif e.expr is not None:
                self.lend(self.ev(e.expr))
            return OTHER
        if isinstance(e, (ListComprehension, SetComprehension)):
            noun = self.comprehension(e.generator, None)
            return Value("display", e.line, e.column, noun=noun, source="a comprehension") if noun else OTHER
        if isinstance(e, GeneratorExpr):
            self.comprehension(e, None, built=False)
            return OTHER
        if isinstance(e, DictionaryComprehension):
            noun = self.comprehension(e, e)
            return Value("display", e.line, e.column, noun=noun, source="a comprehension") if noun else OTHER
        if isinstance(e, LambdaExpr):
            self.capture_check(e, "a lambda")
            self.s.mod.enqueue_function(e, self.s.enclosing | frozenset(self.s.locals))
            return OTHER
        if isinstance(e, IndexExpr):
            base = self.ev(e.base)
            if base.kind == "tuple" and isinstance(e.index, IntExpr):
                return self.tuple_item(base, e.index.value, e)
            self.lend(base)
            self.lend(self.ev(e.index))
            item_type = self.s.types.get(e)
            kind = classify(item_type)
            if kind is not None:
                return Value("borrowed", e.line, e.column, noun=kind.noun, source="a subscript",
                             slot=slot_of(e.base, e.index))
            p = get_proper_type(item_type) if item_type is not None else None
            if isinstance(p, TupleType) and any(classify(item) is not None for item in p.items):
                return Value("borrowed", e.line, e.column, noun=TUPLE_NOUN, source="a subscript")
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

    def tuple_item(self, t: Value, index: int, at: Expression) -> Value:
        """`f()[i]` of a call returning owned values: item `i` is owned, the others are dropped."""
        nouns = t.items
        if not -len(nouns) <= index < len(nouns):
            self.lend(t)
            return OTHER
        picked = nouns[index]
        for i, noun in enumerate(nouns):
            if noun and i != index % len(nouns):
                self.report(t.line, t.column, codes.DISCARDED.code,
                            f'{noun} at index {i} of the tuple returned by "{t.source}" is discarded')
        if picked is None:
            return OTHER
        return Value("fresh", at.line, at.column, noun=picked, source=t.source)

    def comprehension(self, g: GeneratorExpr | DictionaryComprehension,
                      dict_comp: DictionaryComprehension | None, built: bool = True) -> str:
        """Analyse a comprehension; the noun of the owned values it stores in its result ("" if none).
        `built`: a list, set or dict comprehension (all its items exist at once), not a generator."""
        modes = [self.rules.iteration(seq) for seq in g.sequences]
        first = self.ev(g.sequences[0])
        # `max(p.id for p in make_batch())`: the batch a call handed over is this comprehension's to spend
        anonymous = self.rules.anonymous_container(first) if modes[0][0] == "entry" else None
        if anonymous is None:
            self.lend(first)
        if self.s.st is None:
            return ""
        entry = self.s.st
        line = g.line
        stored: list[str] = []

        def store(v: Value) -> None:
            if self.owns(v):
                stored.append(v.noun or (_noun(self.facts(v.var)) if v.var else "") or "Lease")
            if (v.kind == "borrowed" and v.declared_view) or (self.s.view_displays and self.is_borrow(v)):
                self.lend(v)  # `[p.lease for p in pins]` over `Borrowed` fields, or into a list of views
                return
            self.transfer(v, "storing it in a container", line)

        earlier = self.rules.earlier_releases(*modes[0])

        def one_pass(head: State) -> State | None:
            self.s.st = dict(head)
            skipped: list[State | None] = []
            for i, (index, seq, conds) in enumerate(zip(g.indices, g.sequences, g.condlists)):
                if i > 0:
                    self.lend(self.ev(seq))
                self.rules.bind_loop_target(index, *modes[i], line)
                if i == 0:
                    self.rules.released_before(
                        [v for v in map(self.local_var, target_names(index)) if v is not None], earlier)
                for c in conds:
                    t, f = self.rules.cond(c)
                    skipped.append(f)
                    self.s.st = t
            if dict_comp is not None:
                if dict_comp.key is not None:
                    self.lend(self.ev(dict_comp.key))
                self.sink(dict_comp.value, store)
            elif isinstance(g, GeneratorExpr):
                self.sink(g.left_expr, store)
            return join_all([self.s.st, *skipped])

        head = entry
        self.s.muted += 1
        try:
            for _ in range(MAX_ITERATIONS):
                end = one_pass(head)
                new_head = join(entry, end)
                assert new_head is not None
                if same(new_head, head):
                    break
                head = new_head
        finally:
            self.s.muted -= 1
        end = one_pass(head)
        self.s.st = head
        if stored and built:
            self.partial_comprehension(g, stored[0])
        spent = (anonymous or self.rules.spendable(*modes[0])) if len(g.sequences) == 1 and not g.condlists[0] \
            else None
        targets = [v for v in map(self.local_var, target_names(g.indices[0])) if v is not None]
        if spent is not None and targets and end is not None \
                and not any(f[0] == ENTRY for v in targets for f in end.get(v, ())):
            head[spent] = NOTHING_FACTS  # `out.extend(p for p in self.pins)`, `[p.release() for p in pins]`
        return stored[0] if stored else ""


    def partial_comprehension(self, g: GeneratorExpr | DictionaryComprehension, noun: str) -> None:
        """`leases = [acquire(r) for r in ranks]` inside a `try`: if a later item's call raises, the
        items already made are in no name the handler can reach, so they are never released."""
        made = g.value if isinstance(g, DictionaryComprehension) else g.left_expr
        if not any(isinstance(f, TryFrame) and f.in_body for f in self.s.frames) \
                or not _has_call(made):
            return
        self.report(g.line, g.column, codes.LEAK.code,
                    f"If a call in this comprehension raises, the {noun} values it already made are "
                    f"dropped, and the handler cannot release them; build the container in a loop, "
                    f"so the handler sees what it holds")

    def call(self, e: CallExpr) -> Value:
        special = self.special_call(e)
        if special is not None:
            return special
        callee = e.callee
        receiver: Value | None = None
        receiver_type: Type | None = None
        if isinstance(callee, MemberExpr) and isinstance(callee.expr, (ConditionalExpr, OpExpr)) \
                and self.s.calls.is_consuming(self.s.types.get(callee.expr), callee.name):
            self.sink(callee.expr, lambda v: self.consume(v, callee.line, callee.column))
            for arg in e.args:
                self.sink(arg, self.lend)
            return self.call_result(e, self.s.types.get(e), e)
        if isinstance(callee, MemberExpr) and not (
            isinstance(callee.expr, RefExpr) and isinstance(callee.expr.node, MypyFile)
        ):
            receiver = self.ev(callee.expr)
            receiver_type = self.s.types.get(callee.expr)
        elif not isinstance(callee, (NameExpr, MemberExpr)):
            self.lend(self.ev(callee))
        if isinstance(callee, SuperExpr):
            self.super_call(callee)
        if isinstance(callee, MemberExpr) and callee.name == "setdefault" and receiver is not None:
            return self.setdefault(e, callee, receiver, receiver_type)
        modes = self.s.calls.argument_modes(e, receiver_type)
        generic = self.generic_shape(e)
        handed: list[Value] = []
        absorbed = False
        pure = isinstance(callee, NameExpr) and callee.fullname.startswith("builtins.")  # len(q)
        removed = self.entry_removed_by(e)
        may_fill: list[Expression] = []
        for index, (arg, mode) in enumerate(zip(e.args, modes)):
            if self.s.st is None:
                return OTHER
            if arg is removed:
                continue  # `self.pins.remove(p)` after `p.release()`: only its identity is looked up
            if mode == "own" and not isinstance(arg, ConditionalExpr):
                handed.append(self.ev(arg))
            elif mode == "own":
                self.sink(arg, lambda v: self.transfer(v, "passing it to an owning parameter", e.line))
            elif mode == "untyped" and isinstance(arg, (ListExpr, TupleExpr, SetExpr, DictExpr)):
                shown = [v for _, v in arg.items] if isinstance(arg, DictExpr) else arg.items
                for shown_item in shown:
                    inner = shown_item.expr if isinstance(shown_item, StarExpr) else shown_item
                    self.sink(inner, self.untyped_argument)
            elif mode == "untyped":
                self.sink(arg, self.untyped_argument)
            elif not pure and self.held_local_container(arg) is not None:
                if self.hands_container(e, index):
                    self.transfer(self.ev(arg), "passing it on", e.line)
                else:
                    self.lend(self.ev(arg))  # still the caller's: it may still hold them all
            elif not pure and isinstance(arg, (ListExpr, SetExpr, DictExpr, ConditionalExpr)) \
                    and self.hands_container(e, index):
                self.sink(arg, lambda v: self.transfer(v, "passing it on", e.line))  # `settle_all([a, b])`
            elif not pure and self.fillable(e, index, arg):
                self.lend(self.ev(arg))
                may_fill.append(arg)
            elif generic is not None and not isinstance(arg, ConditionalExpr):
                v = self.ev(arg)
                if v.kind == "awaitable":
                    absorbed = True
                else:
                    self.lend_argument(v)
            else:
                self.sink(arg, self.lend_argument)
            if mode != "own" and not pure:  # `len(pins)`, `print(pins)` change nothing
                self.forget_container(arg, e, index)
            if (name := spelled(arg)) is not None and not pure:
                self.pop_tested([name])
        moved_in = any(self.owns(v) for v in handed)
        for arg in may_fill:
            self.filled(arg, self.s.types.get(arg), e.line)  # `fill(batch)`: it may now hold what the callee put in
        self.deferred_release(e, receiver_type)
        if removed is not None:
            self.removed_entry(removed)
        if generic is not None and sum(1 for v in handed if self.owns(v)) > 1 \
                and classify(generic) is not None:
            self.report(e.line, e.column, codes.UNTRACKED.code,
                        f'"{self.s.calls.callee_name(e)}" takes several owned values and returns one; '
                        f"leasecheck cannot follow the others: release them here or hand each on")
        if moved_in and e not in self.s.awaited and _is_coroutine(self.s.types.get(e)):
            self.report(e.line, e.column, codes.UNTRACKED.code,
                        f'"{self.s.calls.callee_name(e)}" takes an owned value into a coroutine that is not '
                        f"awaited where it is made; if it never runs (a task cancelled before it starts, "
                        f"a coroutine dropped) nothing releases the value: await the call here")
        if moved_in and isinstance(callee, MemberExpr) and self.module_level(callee.expr):
            self.report(e.line, e.column, codes.UNTRACKED.code,
                        f'"{spelled(callee.expr)}" is a module-level container: nothing discharges what '
                        f"it holds, so leasecheck cannot follow the owned value stored there; keep it "
                        f'in a @linear holder, or say untracked(..., reason="...")')
        for v in handed:
            self.transfer(v, "passing it to an owning parameter", e.line)
        if receiver is not None and self.s.st is not None:
            assert isinstance(callee, MemberExpr)
            if self.s.calls.is_consuming(receiver_type, callee.name):
                if receiver.kind == "other" and isinstance(callee.expr, MemberExpr):
                    self.report(callee.line, callee.column, codes.UNTRACKED.code,
                                f'"{callee.name}()" consumes a value reached through '
                                f'"{spelled(callee.expr) or "an expression"}", whose owner '
                                f"leasecheck does not follow; move it into a local first")
                self.consume(receiver, callee.line, callee.column)
            elif callee.name == "clear" and receiver.var in self.s.container_places:
                self.lend(receiver)
                self.cleared_holding(receiver.var, callee.expr, callee.line, callee.column)
                self.cleared(callee.expr)
            elif callee.name in LEASE_CONSUMING and receiver.kind == "var" and receiver.var is not None \
                    and self.unowned_receiver(receiver_type) is not None \
                    and (self.not_owning_parameter(receiver.var) or not self.owns(receiver)):
                self.report(callee.line, callee.column, codes.NOT_OWNED.code,
                            f'"{receiver.var.name}" is typed {self.unowned_receiver(receiver_type)}, '
                            f'so "{callee.name}()" may consume a value this function does not own; '
                            f"declare its type")
            elif callee.name in LEASE_CONSUMING and receiver.kind == "other" \
                    and self.unowned_receiver(receiver_type) is not None:
                self.report(callee.line, callee.column, codes.NOT_OWNED.code,
                            f'"{callee.name}()" is called on a value typed '
                            f"{self.unowned_receiver(receiver_type)}, which may consume a value "
                            f"nobody here owns; declare its type")
            else:
                if not (callee.name == "clear" and self.handed_on_container(receiver)):
                    self.lend(receiver)  # `ring.free.extend(fresh); fresh.clear()` empties what was handed on
                marker = self.held_contents(callee.expr) if callee.name == "clear" else None
                if marker is not None:
                    self.cleared_holding(marker, callee.expr, callee.line, callee.column)
                if callee.name == "clear":
                    self.cleared(callee.expr)
            if receiver.kind == "var" and receiver.var is not None and self.s.places:
                self.helper_discharges(receiver.var, callee.name, receiver_type)
            if moved_in and isinstance(callee, MemberExpr):
                self.filled(callee.expr, receiver_type, e.line)
            if callee.name in ("extend", "update") and len(e.args) == 1 and self.items_track(callee.expr) \
                    and (source := self.rules.copy_source(e.args[0], values=callee.name == "update")) is not None:
                into = self.local_var(callee.expr) if isinstance(callee.expr, NameExpr) else None
                self.copied(source, into, e.line, e.column)  # `self.done.extend(self.pins)`
        if isinstance(callee, RefExpr) and callee.fullname in HEAP_TAKES and e.args:
            moved = self.moved_out(e, self.s.types.get(e.args[0]))  # `_, lease = heapq.heappop(self.heap)`
            if moved is not None:
                self.rules.took_from(e.args[0], e.line, e.column)
                return moved
        if isinstance(callee, MemberExpr) and callee.name in MOVE_OUT_METHODS:
            moved = self.moved_out(e, receiver_type)
            if moved is not None:
                self.rules.took_from(callee.expr, e.line, e.column)
                if callee.name == "pop" and e.args:
                    self.popped(callee.expr, e, receiver_type)
                elif not e.args:
                    self.popped_untested(callee.expr, e)
                return moved
        elif isinstance(callee, MemberExpr) and (name := spelled(callee.expr)) is not None:
            self.pop_tested([name])
        if isinstance(callee, MemberExpr) and callee.name == "get" and e.args:
            item = container_item(receiver_type)
            kind = classify(self.s.types.get(e))
            if item is not None and not is_borrowed(item) and classify(item) and kind:
                return Value("borrowed", e.line, e.column, noun=kind.noun, source="get",
                             slot=slot_of(callee.expr, e.args[0]))
            if item is not None and is_borrowed(item) and kind:  # a lookup in an index of views
                return Value("borrowed", e.line, e.column, noun=kind.noun, source="get")
        if generic is not None and not (isinstance(callee, MemberExpr) and callee.name == "get"
                                        and _mapping_lookup(receiver_type)):
            return self.generic_result(e, generic, moved_in or absorbed)
        result = self.call_result(e, self.s.types.get(e), e)
        if result is OTHER and isinstance(callee, RefExpr) and isinstance(callee.node, TypeInfo):
            if moved_in:
                self.report(e.line, e.column, codes.UNTRACKED.code,
                            f'"{callee.node.name}" keeps the owned value it is given but is not '
                            f"@linear, so nothing tracks it afterwards; make it @linear")
            return NEW
        return result

    def container_value(self, v: Value) -> bool:
        """Whether `v` is a container of owned values this function answers for: a display of them,
        or a local holding them (`batch` after `batch = [ledger.acquire(...)]`)."""
        if v.kind == "display":
            return True
        return v.kind == "var" and v.var is not None and v.var not in self.s.container_places \
            and holds_owned(v.var.type) and any(f[0] == HELD for f in self.facts(v.var))

    def lend_argument(self, v: Value) -> None:
        """An argument the callee only reads: a display of owned values made for it is discarded after."""
        if v.kind == "display" and v.source == "a display":
            self.report(v.line, v.column, codes.DISCARDED.code,
                        f"{v.noun} put in a display at line {v.line} is discarded with it: the call "
                        f"only lends the container; name it, or hand the values on")
        self.lend(v)

    def hands_container(self, e: CallExpr, index: int) -> bool:
        """Whether passing a local container of owned values as argument `index` of `e` hands it on:
        to the constructor of a `@linear` class (the instance keeps it), or to a parameter that a
        function of this module empties on every normal exit (`FunctionChecker.drained_by`). Passed
        anywhere else it is lent: a container parameter is its caller's, who still answers for what
        is left in it."""
        callee = e.callee
        if isinstance(callee, RefExpr) and isinstance(callee.node, TypeInfo):
            return classify(self.s.types.get(e)) is not None and holds_owned(self.s.calls.formal_type(e, index))
        if isinstance(callee, MemberExpr) and callee.name in FILLING_METHODS:
            recv = self.s.types.get(callee.expr)
            rp = get_proper_type(recv) if recv is not None else None
            if isinstance(rp, Instance) and rp.type.module_name in STDLIB_CONTAINERS:
                return True  # `self.pending.extend(fresh)`, `keyed.update({k: lease})`
        if e.arg_kinds[index] == ARG_STAR:  # `settle_all(*batch)` into `*leases: Lease[...]`
            t = self.s.types.get(callee)
            ct = get_proper_type(t) if t is not None else None
            return isinstance(ct, CallableType) and any(
                kind == ARG_STAR and param_mode(formal) == "own" for kind, formal in zip(ct.arg_kinds, ct.arg_types))
        found = self.s.calls.parameter_of(e, index)
        return found is not None and found[1] in self.rules.drained_by(found[0])

    def fillable(self, e: CallExpr, index: int, arg: Expression) -> bool:
        """Whether argument `index` of `e` is a local container of owned values, not yet holding any,
        that the callee may store owned values into: its parameter is declared a mutable container
        of them (`def fill(out: list[Lease[Full, Held]])`), and it is not one the callee empties."""
        if not isinstance(arg, NameExpr) or self.local_var(arg) is None or not holds_owned(self.s.types.get(arg)):
            return False
        found = self.s.calls.parameter_of(e, index)
        formal = get_proper_type(found[2]) if found is not None and found[2] is not None else None
        return isinstance(formal, Instance) and holds_owned(formal) and any(
            formal.type.has_base(base) for base in MUTABLE_CONTAINERS) \
            and not (found is not None and found[1] in self.rules.drained_by(found[0]))  # empty after

    def handed_on_container(self, v: Value) -> bool:
        """Whether `v` names a local container of owned values handed on whole on every path."""
        if v.kind != "var" or v.var is None or self.s.st is None or not holds_owned(v.var.type):
            return False
        facts = self.s.st.get(v.var, ())
        return bool(facts) and all(f[0] == MOVED for f in facts)

    def helper_discharges(self, receiver: Var, name: str, receiver_type: Type | None) -> None:
        """`self._drop()`: a helper method of this module that releases and resets fields of its
        receiver leaves them discharged here too (see `FunctionChecker.discharged_by`)."""
        p = get_proper_type(receiver_type) if receiver_type is not None else None
        if not isinstance(p, Instance) or consuming_method(p.type, name) or self.s.st is None:
            return
        sym = p.type.get(name)
        if sym is None or not isinstance(sym.node, FuncDef):
            return
        fields = self.rules.discharged_by(sym.node)
        for (owner, field), place in self.s.places.items():
            if owner is receiver and field in fields and self.s.st is not None:
                self.s.st[place] = NOTHING_FACTS

    def entry_removed_by(self, e: CallExpr) -> NameExpr | None:
        """`self.pins.remove(p)` / `.discard(p)` of a loop target `p` over entries of `self.pins`."""
        callee = e.callee
        if not (isinstance(callee, MemberExpr) and callee.name in ("remove", "discard") and len(e.args) == 1
                and isinstance(e.args[0], NameExpr)) or self.s.st is None:
            return None
        var = self.local_var(e.args[0])
        marker = self.s.entry_of.get(var) if var is not None else None
        if marker is None or self.s.entries.get(marker) != spelled(callee.expr):
            return None
        return e.args[0]

    def removed_entry(self, arg: NameExpr) -> None:
        """The entry `arg` names is out of its container.

        Before `p.release()`, `p` becomes the owner; after it, the released entry
        is no longer stored, so the container need not be emptied for it."""
        var = self.local_var(arg)
        marker = self.s.entry_of.get(var) if var is not None else None
        if var is None or marker is None or self.s.st is None:
            return
        facts = self.facts(var)
        if any(f[0] == ENTRY for f in facts):
            del self.s.entry_of[var]
            self.s.st[var] = frozenset({(HELD, arg.line, arg.column, _noun(facts))})
            return
        released = {f[1] for f in facts if f[0] == RELEASED}
        if released:
            self.s.st[marker] = frozenset(f for f in self.s.st.get(marker, ()) if f[1] not in released) \
                or NOTHING_FACTS

    def deferred_release(self, e: CallExpr, receiver_type: Type | None) -> None:
        """`stack.callback(probe.release)`: the exit stack releases `probe` when it unwinds, so until then
        `probe` is a view (readable, not to be released or handed on again)."""
        callee = e.callee
        recv = get_proper_type(receiver_type) if receiver_type is not None else None
        if not (isinstance(callee, MemberExpr) and callee.name in ("callback", "push_async_callback")
                and isinstance(recv, Instance) and recv.type.fullname in EXIT_STACKS and e.args):
            return
        bound = e.args[0]
        if not (isinstance(bound, MemberExpr) and isinstance(bound.expr, NameExpr)
                and self.s.calls.is_consuming(self.s.types.get(bound.expr), bound.name)):
            return
        var = self.local_var(bound.expr)
        if var is not None and self.s.st is not None and any(f[0] == MOVED for f in self.facts(var)):
            self.s.st[var] = borrowed(_noun(self.facts(var)))

    def super_call(self, callee: SuperExpr) -> None:
        """`super().close()` from a `@consumes` override hands every owned field of `self` on."""
        fn = self.s.fn
        if fn is None or not fn.arguments or callee.info is None:
            return
        if consuming_method(callee.info, callee.name):
            # the inherited method discharges the fields its own class knows; a subclass's own stay here
            defining = next((base for base in callee.info.mro[1:] if callee.name in base.names), None)
            known = frozenset(owned_fields(defining)) if defining is not None else None
            self.fields_gone(fn.arguments[0].variable, (callee.line, callee.column),
                             f'"super().{callee.name}()"', only=known)

    def unowned_receiver(self, t: Type | None) -> str | None:
        """"Any" or "protocol X" for a receiver whose `release()` the checker cannot see."""
        p = get_proper_type(t) if t is not None else None
        if isinstance(p, AnyType):
            return "Any"
        if isinstance(p, Instance) and p.type.is_protocol:
            return f'the protocol "{p.type.name}"'
        return None

    def setdefault(self, e: CallExpr, callee: MemberExpr, receiver: Value,
                   receiver_type: Type | None) -> Value:
        """`d.setdefault(k, v)` keeps the stored value when `k` is present: an owned `v` is dropped."""
        self.lend(receiver)
        item = container_item(receiver_type)
        owning = item is not None and not is_borrowed(item) and classify(item) is not None
        for i, arg in enumerate(e.args):
            if i == 0 or not owning:
                self.sink(arg, self.lend)
                continue
            v = self.ev(arg)
            if self.owns(v):
                if v.var is not None:
                    what = f'{_noun(self.facts(v.var))} "{v.var.name}"'
                else:
                    what = f'{v.noun} returned by "{v.source}"'
                self.report(v.line, v.column, codes.LEAK.code,
                            f"{what} is dropped by "
                            f"setdefault when the key is already present; test the key and "
                            f"store it, or release the value that was not kept")
            self.transfer(v, "passing it to an owning parameter", e.line)
        kind = classify(self.s.types.get(e))
        if owning and kind is not None and e.args:
            return Value("borrowed", e.line, e.column, noun=kind.noun, source="setdefault",
                         slot=slot_of(callee.expr, e.args[0]))
        return OTHER

    def forget_container(self, arg: Expression, e: CallExpr, index: int) -> None:
        """A container handed to a call (as argument `index` of `e`) may be refilled or drained
        there: its slots are unknown, and where the callee empties it (`hands_container`; for
        `extend` / `update` the copy rules decide) it holds nothing after."""
        if not isinstance(arg, (NameExpr, MemberExpr)) or container_item(self.s.types.get(arg)) is None:
            return
        contents = self.held_contents(arg)
        if contents is not None and self.s.st is not None and not (
                isinstance(e.callee, MemberExpr) and e.callee.name in FILLING_METHODS) \
                and self.hands_container(e, index):
            self.s.st[contents] = NOTHING_FACTS
        name = spelled(arg)
        if name is not None:
            self.forget_slots(name)

    def cleared_holding(self, holder: Var, container: Expression, line: int, column: int) -> None:
        """`c.clear()` while `c` may still hold owned values (like `self.c = {}` for a field): they are lost.

        `holder` is what says so: an owning container field (spent when a loop
        released or handed on every entry on every path through its body, or a
        test found it empty), or the contents marker of a parameter holding the
        caller's values. Clearing right after copying every entry elsewhere
        completes a move (`copy_completes`).
        """
        assert self.s.st is not None
        facts = self.s.st.get(holder, NOTHING_FACTS)
        held = [f for f in facts if f[0] == HELD]
        name = spelled(container) or holder.name
        self.s.st[holder] = NOTHING_FACTS
        if not held or self.copy_completes(name, line, column):
            return  # `self.done.extend(self.pins); self.pins.clear()`: a move
        if holder in self.s.container_places:
            self.report(line, column, codes.LEAK.code,
                        dropped_message(holder, facts, held, "cleared")
                        + "; release or hand on its entries first (a loop over it, or pop each)")
            return
        modal = "holds" if all(f[0] == HELD for f in facts) else "may hold"
        self.report(line, column, codes.LEAK.code,
                    f'"{name}" {modal} {held[0][3]} values owned elsewhere when it is cleared, and '
                    f"they are never {verb(held[0][3])}; release or hand on each first (a loop over it, or pop each)")

    def cleared(self, container: Expression) -> None:
        """`c.clear()`: released entries of `c` are gone, and so is whatever its slots held."""
        name = spelled(container)
        if name is None or self.s.st is None:
            return
        self.forget_slots(name)
        for marker, spelling in self.s.entries.items():
            if spelling == name and marker in self.s.st:
                self.s.st[marker] = NOTHING_FACTS

    def stored(self, container: Expression, key: Expression, line: int, column: int) -> None:
        """`c[k] = owned`: a second store under the same live key drops the first value."""
        slot = slot_of(container, key)
        if not slot or self.s.st is None:
            return
        if self.overwrites_list_item(container, line, column):
            return
        marker = self.marker(slot)
        facts = self.s.st.get(marker, NOTHING_FACTS)
        held = sorted(f[1] for f in facts if f[0] == HELD)
        if held:
            modal = "overwrites" if all(f[0] == HELD for f in facts) else "may overwrite"
            noun = next(f[3] for f in facts if f[0] == HELD)
            self.report(line, column, codes.LEAK.code,
                        f'Storing under "{slot}" {modal} the {noun} already there (stored or found by a test '
                        f"at line {held[0]}), which is then never released")
        else:
            self.stored_over_view(slot, line, column)
        noun = _noun_of_container(self.s.types.get(container))
        self.s.st[marker] = frozenset({(HELD, line, column, noun)})

    def overwrites_list_item(self, container: Expression, line: int, column: int) -> bool:
        """`self.leases[rank] = lease` on a list (or deque) of owned values that cannot be None:
        every index holds a live value, which the store drops."""
        t = self.s.types.get(container)
        p = get_proper_type(t) if t is not None else None
        item = container_item(t)
        if not (isinstance(p, Instance) and p.type.has_base("typing.MutableSequence")) or item is None \
                or not owned_item(item) or isinstance(get_proper_type(item), UnionType):
            return False
        self.report(line, column, codes.LEAK.code,
                    f'Storing under an index of "{spelled(container) or "the list"}" drops the '
                    f"{items_noun(t)} live there (its items cannot be None); pop it out and release it, "
                    f"or make the items optional")
        return True

    def stored_over_view(self, slot: str, line: int, column: int) -> None:
        """`cur = c.get(k)`, then `c[k] = owned` on a path where `cur` may be what is there: the store
        drops it (a test that found it None, or `del c[k]` first, makes the store safe)."""
        assert self.s.st is not None
        popped = self.s.st.get(self.marker(slot), NOTHING_FACTS)
        if popped and all(f[0] == MOVED for f in popped):
            return  # `old = c.pop(k, None)` first: what the view saw is out
        for var, borrowed_from in self.s.slots.items():
            facts = self.s.st.get(var, NOTHING_FACTS)
            live = (BORROWED, ENTRY)  # a `get()` view, or a loop's entry (`for i, p in enumerate(c)`)
            if borrowed_from != slot or not any(f[0] in live for f in facts):
                continue
            modal = "overwrites" if all(f[0] in live for f in facts) else "may overwrite"
            noun = next(f[3] for f in facts if f[0] in live) or "value"
            self.report(line, column, codes.LEAK.code,
                        f'Storing under "{slot}" {modal} the {noun} "{var.name}" read from there, which '
                        f"is then never released; take it out first (old = "
                        f"{slot.partition('[')[0]}.pop(...)) and release it")
            return

    def popped(self, container: Expression, e: CallExpr, receiver_type: Type | None) -> None:
        """`d.pop(k)` of a dict: popping the same key again takes nothing this function stored."""
        p = get_proper_type(receiver_type) if receiver_type is not None else None
        if not (isinstance(p, Instance) and p.type.fullname in KEYED_CONTAINERS) or self.s.st is None:
            return
        slot = slot_of(container, e.args[0])
        if not slot:
            return
        marker = self.marker(slot)
        facts = self.s.st.get(marker, NOTHING_FACTS)
        before = sorted(f[1] for f in facts if f[0] == MOVED)
        if before and len(e.args) == 1:
            modal = "is" if all(f[0] == MOVED for f in facts) else "may be"
            self.report(e.line, e.column, codes.DOUBLE_RELEASE.code,
                        f'Entry "{slot}" {modal} popped twice (first at line {before[0]}); the '
                        f"second pop takes a value this function never saw stored")
        noun = _noun_of_container(receiver_type)
        self.s.st[marker] = frozenset({(MOVED, e.line, e.column, noun)})
        entries = self.s.slot_markers.get(f"{slot}[*]")
        if entries is not None:
            self.s.st[entries] = NOTHING_FACTS  # the list whose entries a loop released is out of the field

    def released_slot(self, e: CallExpr) -> bool:
        """`self.by_gen.pop(gen)` after a loop released every entry of `self.by_gen[gen]`."""
        callee = e.callee
        if not (isinstance(callee, MemberExpr) and callee.name == "pop" and e.args) or self.s.st is None:
            return False
        entries = self.s.slot_markers.get(f"{slot_of(callee.expr, e.args[0])}[*]")
        facts = self.s.st.get(entries, ()) if entries is not None else ()
        return any(f[0] in (RELEASED, MOVED) for f in facts) and all(f[0] in (RELEASED, MOVED, NOTHING)
                                                                    for f in facts)

    def popped_untested(self, container: Expression, e: CallExpr) -> None:
        """`c.pop()` twice with no test of `c` between: the second takes an item nobody checked is there.

        A duplicated `pins.pop().release()` in a `while pins:` drain releases two
        leases per test (and raises on the last odd one).
        """
        name = spelled(container)
        if name is None or self.s.st is None:
            return
        marker = self.s.pop_markers.get(name)
        if marker is None:
            marker = self.s.pop_markers[name] = self.marker(f"{name}.pop()")
        facts = self.s.st.get(marker, NOTHING_FACTS)
        if any(f[0] == HELD for f in facts):
            return
        before = sorted(f[1] for f in facts if f[0] == MOVED)
        if before:
            modal = "is" if all(f[0] == MOVED for f in facts) else "may be"
            assert isinstance(e.callee, MemberExpr)
            self.report(e.line, e.column, codes.DOUBLE_RELEASE.code,
                        f'"{name}" {modal} popped again (first at line {before[0]}) with no test '
                        f'that it still holds an item; test it before each "{e.callee.name}()"')
        self.s.st[marker] = frozenset({(MOVED, e.line, e.column, _noun_of_container(self.s.types.get(container)))})

    def gathered(self, e: CallExpr, awaited: Type) -> Type:
        """`asyncio.gather(a(), b())`: each item typed by its own awaitable where mypy inferred `Any`
        (it does for an item unpacked into `_`: `first, _ = await gather(...)`)."""
        p = get_proper_type(awaited)
        callee = e.callee
        if not (isinstance(p, TupleType) and isinstance(callee, RefExpr) and callee.fullname == "asyncio.tasks.gather"
                and len(e.args) == len(p.items) and all(k == ARG_POS for k in e.arg_kinds)):
            return awaited
        items: list[Type] = []
        for item, arg in zip(p.items, e.args):
            own = awaited_kind(self.s.types.get(arg)) if isinstance(get_proper_type(item), AnyType) else None
            items.append(own if own is not None else item)
        return p.copy_modified(items=items)

    def awaitable_of(self, awaited: Type, at: Expression, source: str) -> Value:
        """An awaitable producing an owned value (or a tuple of them), else OTHER."""
        p = get_proper_type(awaited)
        if isinstance(p, TupleType):
            nouns = tuple((k.noun if (k := classify(x)) else None) for x in p.items)
            if any(nouns):
                return Value("awaitable", at.line, at.column, items=nouns, source=source)
            return OTHER
        kind = classify(awaited)
        if kind is None or is_borrowed(awaited):
            return OTHER
        return Value("awaitable", at.line, at.column, noun=kind.noun, source=source)

    def generic_shape(self, e: CallExpr) -> Type | None:
        """The inferred result type of a call to a generic helper that comes out tracked.

        The declared return type names only type variables (`identity(x: T) -> T`,
        `asyncio.gather`, `next`), so the result is owned only if owned values went
        in; `None` when the result is not tracked or the callee declares ownership.
        """
        t = self.s.types.get(e)
        if t is None:
            return None
        p = get_proper_type(t)
        awaited = awaited_kind(t)
        awaited_p = get_proper_type(awaited) if awaited is not None else None
        tracked = (
            classify(t) is not None
            or (awaited is not None and (classify(awaited) is not None or (
                isinstance(awaited_p, TupleType) and any(classify(x) for x in awaited_p.items))))
            or (isinstance(p, TupleType) and any(classify(x) is not None for x in p.items))
        )
        if not tracked or is_borrowed(t):
            return None
        callee = e.callee
        if isinstance(callee, RefExpr) and isinstance(callee.node, TypeInfo):
            return None  # a constructor, not a generic helper
        if isinstance(callee, MemberExpr):
            recv = self.s.types.get(callee.expr)
            rp = get_proper_type(recv) if recv is not None else None
            if isinstance(rp, Instance) and rp.type.module_name in STDLIB_CONTAINERS:
                return None
        if self.s.calls.returns_owned(e) is not None:
            return None
        return t

    def generic_result(self, e: CallExpr, t: Type, owned_in: bool) -> Value:
        """What a generic helper returns: owned when owned values went in, else of unknown owner."""
        source = self.s.calls.callee_name(e)
        awaited = awaited_kind(t)
        if classify(t) is None and awaited is not None:
            return self.awaitable_of(self.gathered(e, awaited), e, source) if owned_in else OTHER
        p = get_proper_type(t)
        if isinstance(p, TupleType):
            nouns = tuple((k.noun if (k := classify(x)) else None) for x in p.items)
            return Value("tuple", e.line, e.column, items=nouns, source=source) if owned_in else OTHER
        kind = classify(t)
        assert kind is not None
        if self.weak_deref(e):
            return Value("borrowed", e.line, e.column, noun=kind.noun, source=source)
        if owned_in or self.builds(e, t) or self.next_of_stream(e) or self.module_take_out(e):
            return Value("fresh", e.line, e.column, noun=kind.noun, source=source)
        return Value("unknown", e.line, e.column, noun=kind.noun, source=source)

    def module_take_out(self, e: CallExpr) -> bool:
        """`bag.take()` on a generic container class of this module whose method pops the item out of a
        field (`calls.takes_out_of_self`). Only this module's classes: a cached module's bodies are not
        loaded, and the answer must not change between a cold run and a warm one."""
        callee = e.callee
        recv = self.s.types.get(callee.expr) if isinstance(callee, MemberExpr) else None
        p = get_proper_type(recv) if recv is not None else None
        if not isinstance(callee, MemberExpr) or not isinstance(p, Instance) \
                or p.type.module_name != self.s.mod.tree.fullname:
            return False
        sym = p.type.get(callee.name)
        return sym is not None and isinstance(sym.node, FuncDef) and takes_out_of_self(sym.node)

    def next_of_stream(self, e: CallExpr) -> bool:
        """`next(it)` of an iterator held in a name (`it: Iterator[Lease[...]]`): it hands the
        item over, as a generator declared that way does; `next(iter(c))` only reads `c`."""
        callee = e.callee
        if not (isinstance(callee, NameExpr) and callee.fullname in ("builtins.next", "builtins.anext")
                and e.args and isinstance(e.args[0], (NameExpr, MemberExpr))):
            return False
        t = self.s.types.get(e.args[0])
        p = get_proper_type(t) if t is not None else None
        return isinstance(p, Instance) and p.type.fullname in ONE_SHOT and bool(p.args) \
            and not is_borrowed(p.args[0])

    def weak_deref(self, e: CallExpr) -> bool:
        """`ref()` of a weak reference: what it returns is lent, never owned."""
        t = self.s.types.get(e.callee)
        p = get_proper_type(t) if t is not None else None
        if isinstance(p, Instance) and is_weak_owner(p.type.fullname):
            return True
        return isinstance(p, CallableType) and is_weak_owner(p.definition.fullname
                                                             if p.definition is not None else None)

    def builds(self, e: CallExpr, t: Type) -> bool:
        """A generic factory handed the class itself (`Lease.__new__(Lease)`, `make(Ticket)`)."""
        p = get_proper_type(t)
        if not isinstance(p, Instance):
            return False
        for arg in e.args:
            at = get_proper_type(self.s.types.get(arg)) if self.s.types.get(arg) is not None else None
            if isinstance(at, FunctionLike) and at.is_type_obj() and at.type_object() is p.type:
                return True
            if isinstance(at, TypeType):
                item = get_proper_type(at.item)
                if isinstance(item, Instance) and item.type is p.type:
                    return True
        return False

    def special_call(self, e: CallExpr) -> Value | None:
        """The documented escape, and callees that hide where their arguments go."""
        callee = e.callee
        if not isinstance(callee, RefExpr):
            return None
        name = callee.fullname
        if name in CASTS and len(e.args) == 2:
            if isinstance(get_proper_type(self.s.types.get(e)), AnyType):
                self.sink(e.args[1], lambda v: self.untracked_flow(v, "a cast to Any"))
                return OTHER
            return self.ev(e.args[1])
        if name == UNTRACKED_ESCAPE:
            reason = next((a for a, n in zip(e.args, e.arg_names) if n == "reason"), None)
            text = reason.value.strip() if isinstance(reason, StrExpr) else ""
            if not text:
                self.report(e.line, e.column, codes.UNTRACKED.code,
                            'untracked(...) needs a literal, non-empty reason="..." saying who '
                            "owns the value now")
            for arg, arg_name in zip(e.args, e.arg_names):
                if arg_name == "reason":
                    continue
                self.sink(arg, lambda v: None if v.kind == "awaitable" else
                          self.transfer(v, "handing it to untracked code", e.line))
            self.s.mod.note(e.line, e.column, f"escape: untracked(...): {text or '(no reason)'}")
            return OTHER
        what = DYNAMIC_CALLEES.get(name)
        if what is None:
            t = self.s.types.get(callee)
            ct = get_proper_type(t) if t is not None else None
            if isinstance(ct, FunctionLike) and ct.is_type_obj():
                what = DYNAMIC_CALLEES.get(ct.type_object().fullname)
        if what is None:
            return None
        for arg in e.args:
            self.sink(arg, lambda v: self.untracked_flow(v, what))
        return OTHER

    def suspension(self, kind: str, line: int) -> None:
        """With `--lease-exits`, an `await`/`yield` may leave the function (cancel, close)."""
        if kind in self.s.mod.exits_at and self.s.st is not None:
            self.unwind("cancel", dict(self.s.st), line, raised=[])

    def narrowed_away(self, var: Var, e: Expression) -> None:
        """mypy's narrowed type at this read owns nothing (None, an untracked class): nothing held."""
        facts = self.facts(var)
        if var in self.s.container_places or not any(f[0] == HELD for f in facts):
            return
        t = self.s.types.get(e)
        if t is None:
            return
        p = get_proper_type(t)
        if isinstance(p, (AnyType, UninhabitedType)) or classify(t) is not None:
            return
        if isinstance(p, TupleType) and any(item_noun(item) is not None for item in p.items):
            return  # a tuple of owned values (or of containers of them) owns them until unpacked or passed on
        if holds_owned(t) and var not in self.s.links:
            return  # a local container of owned values owns them until it is drained, emptied or handed on
        if isinstance(p, Instance) and p.type.fullname == LEASE and any(
            isinstance(get_proper_type(a), AnyType) for a in p.args
        ):
            return  # `case Lease() as x:` narrows to Lease[Any, Any]: still whatever it was
        assert self.s.st is not None
        self.s.st[var] = NOTHING_FACTS

    def moved_out(self, e: CallExpr, receiver_type: Type | None) -> Value | None:
        """`d.pop(k)`, `d.popitem()`, `q.popleft()` on a container of owned values: a fresh owner."""
        item = container_item(receiver_type)
        if item is not None and classify(item) is None and not owned_tuple(item) and owned_item(container_item(item)):
            if self.released_slot(e):
                return OTHER  # a loop released every entry of that list: it holds nothing owned
            inner = classify(container_item(item))  # `pins = self.pins.pop(node)`: the list and what it holds
            return Value("display", e.line, e.column, noun=inner.noun if inner is not None else "Lease",
                         source=self.s.calls.callee_name(e))
        if item is None or is_borrowed(item) or (classify(item) is None and not owned_tuple(item)):
            return None  # a deque or list of (seq, lease) pairs pops a pair
        t = self.s.types.get(e)
        p = get_proper_type(t) if t is not None else None
        source = self.s.calls.callee_name(e)
        if isinstance(p, TupleType):
            nouns = tuple((k.noun if (k := classify(x)) else None) for x in p.items)
            return Value("tuple", e.line, e.column, items=nouns, source=source)
        if isinstance(p, UnionType):  # `popitem()` of a union of dicts: a union of pairs
            tuples = [x for x in map(get_proper_type, p.items) if isinstance(x, TupleType)]
            if len(tuples) == len(p.items) and len({len(x.items) for x in tuples}) == 1:
                nouns = tuple(next((k.noun for x in column if (k := classify(x))), None)
                              for column in zip(*(x.items for x in tuples)))
                return Value("tuple", e.line, e.column, items=nouns, source=source)
        kind = classify(t)
        if kind is None:
            return None
        return Value("fresh", e.line, e.column, noun=kind.noun, source=source)

    def yields_owned(self) -> bool:
        """Whether this generator hands what it yields to its consumer (`Iterator[Lease[...]]`).

        A `@contextmanager` generator lends what it yields to the `with` block.
        """
        fn = self.s.fn
        if fn is None or fn in self.s.mod.lending_generators:
            return False
        sig = get_proper_type(fn.type) if fn.type is not None else None
        if not isinstance(sig, CallableType):
            return False
        ret = get_proper_type(sig.ret_type)
        if not (isinstance(ret, Instance) and ret.type.fullname in GENERATOR_TYPES and ret.args):
            return False
        return not is_borrowed(ret.args[0]) and classify(ret.args[0]) is not None

    def untyped_argument(self, v: Value) -> None:
        """An argument to an untyped callee or an `Any` parameter: its ownership is lost."""
        self.untracked_flow(v, "an untyped callee or an Any parameter")

    def call_result(self, call: CallExpr, t: Type | None, at: Expression) -> Value:
        if self.s.st is None or t is None:
            return OTHER
        p = tuple_or_none(t) or get_proper_type(t)
        if isinstance(p, TupleType):  # `-> tuple[Lease[...], Lease[...]] | None`: held until tested or unpacked
            nouns = tuple(item_noun(item) for item in p.items)  # a container item is owned with what it holds
            if any(nouns) and self.s.calls.returns_owned(call) == "owned":
                return Value("tuple", at.line, at.column, items=nouns, source=self.s.calls.callee_name(call))
            return OTHER
        kind = classify(t)
        receiver = self.s.types.get(call.callee.expr) if isinstance(call.callee, MemberExpr) else None
        if kind is None and holds_owned(without_none(t)) and (self.s.calls.returns_owned_container(call, receiver)
                                                              or self.module_take_out(call)):
            return Value("display", at.line, at.column, noun=items_noun(without_none(t)),
                         source=self.s.calls.callee_name(call))
        if kind is None:
            awaited = awaited_kind(t)
            if awaited is not None and self.s.calls.returns_owned(call) == "owned":
                return self.awaitable_of(awaited, at, self.s.calls.callee_name(call))
            return OTHER
        owned = self.s.calls.returns_owned(call)
        if owned == "owned":
            return Value("fresh", at.line, at.column, noun=kind.noun, source=self.s.calls.callee_name(call))
        if owned == "borrowed":
            return Value("borrowed", at.line, at.column, noun=kind.noun, source=self.s.calls.callee_name(call))
        return OTHER




EXIT_STACKS: Final = frozenset({"contextlib.ExitStack", "contextlib.AsyncExitStack"})


def _noun_of_container(t: Type | None) -> str:
    kind = classify(container_item(t))
    return kind.noun if kind is not None else "Lease"


def _mapping_lookup(t: Type | None) -> bool:
    """Whether `.get(k)` on a value of type `t` is a mapping's lookup (a `Mapping`, a weak mapping)."""
    p = get_proper_type(t) if t is not None else None
    return isinstance(p, Instance) and (p.type.has_base("typing.Mapping") or is_weak_owner(p.type.fullname))


def _noun(facts: frozenset[tuple[str, int, int, str]]) -> str:
    return next((f[3] for f in facts if f[3]), "Lease")


def _is_coroutine(t: Type | None) -> bool:
    """Whether `t` is the coroutine a call of an `async def` returns."""
    p = get_proper_type(t) if t is not None else None
    return isinstance(p, Instance) and p.type.fullname == "typing.Coroutine"


def _has_call(e: Node) -> bool:
    """Whether evaluating `e` calls something (which may raise); a lambda's body does not run here."""
    if isinstance(e, CallExpr):
        return True
    return not isinstance(e, LambdaExpr) and any(_has_call(child) for child in children(e))

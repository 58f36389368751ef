"""Flow-sensitive ownership analysis over one module's typed mypy AST.

Abstract interpretation per function: every local variable maps to a set of
facts (held since line N, released at N, moved at N, borrowed, nothing),
joined by union where paths merge, iterated to a fixpoint around loops.
Exits (fall-through, return, explicit raise, break/continue out of a loop
for loop-local names) must leave nothing held. Implicit exceptions are
modelled only into local handlers and `finally` blocks: each statement's
entry state may reach them. Types come from mypy's type map; what counts as
owned comes from `leases.check.model`.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from mypy.nodes import (
    ARG_STAR,
    ARG_STAR2,
    FUNC_NO_INFO,
    LDEF,
    AssertStmt,
    AssertTypeExpr,
    AssignmentExpr,
    AssignmentStmt,
    AwaitExpr,
    Block,
    BreakStmt,
    CallExpr,
    CastExpr,
    ClassDef,
    ComparisonExpr,
    ConditionalExpr,
    ContinueStmt,
    Decorator,
    DelStmt,
    DictExpr,
    DictionaryComprehension,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncBase,
    FuncDef,
    FuncItem,
    GeneratorExpr,
    IfStmt,
    IndexExpr,
    IntExpr,
    LambdaExpr,
    ListComprehension,
    ListExpr,
    MatchStmt,
    MemberExpr,
    MypyFile,
    NameExpr,
    Node,
    NonlocalDecl,
    OperatorAssignmentStmt,
    OpExpr,
    OverloadedFuncDef,
    RaiseStmt,
    RefExpr,
    ReturnStmt,
    RevealExpr,
    SetComprehension,
    SetExpr,
    StarExpr,
    Statement,
    TempNode,
    TryStmt,
    TupleExpr,
    TypeInfo,
    UnaryExpr,
    Var,
    WhileStmt,
    WithStmt,
    YieldExpr,
    YieldFromExpr,
)
from mypy.patterns import AsPattern, OrPattern, Pattern
from mypy.types import (
    CallableType,
    FunctionLike,
    Instance,
    NoneType,
    TupleType,
    Type,
    TypeType,
    UninhabitedType,
    UnionType,
    get_proper_type,
)

from leases.check import codes
from leases.check.calls import CallModel
from leases.check.facts import (
    BORROWED,
    HELD,
    MOVED,
    NONE,
    NOTHING,
    NOTHING_FACTS,
    OTHER,
    RELEASED,
    Facts,
    Frame,
    LoopFrame,
    Pending,
    State,
    TryFrame,
    Value,
    WithFrame,
    borrowed,
    dropped_message,
    exception_state,
    join,
    join_all,
    same,
    verb,
)
from leases.check.model import (
    Tracked,
    classify,
    is_borrowed,
    param_mode,
    tracked_instance,
)
from leases.check.report import Diagnostic
from leases.check.walk import children, name_refs

MAX_ITERATIONS: Final = 32


class ModuleChecker:
    """Runs the function analysis over every function body of one module."""

    def __init__(self, tree: MypyFile, types: Mapping[Expression, Type]) -> None:
        self.tree = tree
        self.types = types
        self.found: dict[tuple[int, str, str], Diagnostic] = {}
        self.queue: deque[tuple[FuncItem | None, list[Statement], frozenset[Var]]] = deque()

    def run(self) -> list[Diagnostic]:
        if self.tree.is_stub:
            return []
        self.queue.append((None, self.tree.defs, frozenset()))
        while self.queue:
            fn, body, enclosing = self.queue.popleft()
            FunctionChecker(self, fn, body, enclosing).run()
        return sorted(self.found.values(), key=lambda d: (d.line, d.column))

    def report(self, line: int, column: int, code: str, message: str) -> None:
        key = (line, code, message)
        if key not in self.found:
            self.found[key] = Diagnostic(line, column, code, message)

    def enqueue_function(self, fn: FuncItem, enclosing: frozenset[Var]) -> None:
        synthesized = (
            fn.line < 1 or fn.end_line is None or any(arg.line < 1 for arg in fn.arguments)
        )
        if synthesized or (isinstance(fn, FuncDef) and fn.is_trivial_body):
            return
        targets: Sequence[FuncItem] = fn.expanded if fn.expanded else [fn]
        for item in targets:
            self.queue.append((item, item.body.body, enclosing))

    def enqueue_definition(self, node: Node, enclosing: frozenset[Var]) -> None:
        if isinstance(node, FuncDef):
            self.enqueue_function(node, enclosing)
        elif isinstance(node, Decorator):
            self.enqueue_function(node.func, enclosing)
        elif isinstance(node, OverloadedFuncDef):
            if node.impl is not None:
                self.enqueue_definition(node.impl, enclosing)
        elif isinstance(node, ClassDef):
            self.queue.append((None, node.defs.body, enclosing))


def _collect_locals(fn: FuncItem, body: list[Statement]) -> tuple[set[Var], Counter[Var]]:
    """This function's own variables, and how often each is referenced in its body."""
    nonlocal_names: set[str] = set()
    found: set[Var] = {arg.variable for arg in fn.arguments}
    refs: Counter[Var] = Counter()
    for stmt in body:
        for name in name_refs(stmt, into_functions=False):
            node = name.node
            if isinstance(node, Var) and name.kind == LDEF:
                found.add(node)
                refs[node] += 1
        if isinstance(stmt, NonlocalDecl):
            nonlocal_names.update(stmt.names)
    for stmt in body:
        _scan_nonlocals(stmt, nonlocal_names)
    if nonlocal_names:
        found = {v for v in found if v.name not in nonlocal_names}
    return found, refs


def _scan_nonlocals(node: Node, names: set[str]) -> None:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, NonlocalDecl):
            names.update(current.names)
        elif isinstance(current, FuncItem):
            continue
        stack.extend(children(current))


class FunctionChecker:
    """The analysis of one function body (or of module/class level statements)."""

    def __init__(
        self,
        module: ModuleChecker,
        fn: FuncItem | None,
        body: list[Statement],
        enclosing: frozenset[Var],
    ) -> None:
        self.mod = module
        self.types = module.types
        self.calls = CallModel(module.types)
        self.fn = fn
        self.body = body
        self.enclosing = enclosing
        self.muted = 0
        self.frames: list[Frame] = []
        self.exits: list[tuple[str, State, int]] = []
        self.st: State | None = {}
        self.loop_locals_cache: dict[int, frozenset[Var]] = {}
        if fn is not None:
            self.locals, self.refs = _collect_locals(fn, body)
            self.locals -= enclosing
        else:
            self.locals, self.refs = set(), Counter()
        self.return_lends = False
        self.exit_state: State | None = None

    # --- driver -------------------------------------------------------------

    def run(self) -> None:
        fn = self.fn
        st: State = {}
        if fn is not None:
            sig = get_proper_type(fn.type) if fn.type is not None else None
            if isinstance(sig, CallableType):
                self.return_lends = is_borrowed(sig.ret_type)
                for i, arg in enumerate(fn.arguments):
                    var = arg.variable
                    if var.is_self or var.is_cls or i >= len(sig.arg_types):
                        continue
                    if arg.kind in (ARG_STAR, ARG_STAR2):
                        continue
                    if i == 0 and fn.info is not FUNC_NO_INFO and not fn.is_static:
                        continue
                    mode = param_mode(sig.arg_types[i])
                    kind = classify(sig.arg_types[i])
                    noun = kind.noun if kind is not None else "Value"
                    if mode == "borrow":
                        st[var] = borrowed(noun)
                    elif mode == "own":
                        st[var] = frozenset({(HELD, arg.line, arg.column, noun)})
        self.st = st
        if self.body and self._block_unreachable_by_types(self.body):
            return
        self.stmts(self.body)
        if fn is None:
            return
        if self.st is not None:
            end = fn.end_line if fn.end_line is not None else (self.body[-1].line if self.body else fn.line)
            self.exits.append(("end", self.st, end))
        for exit_kind, state, line in self.exits:
            self.check_exit(state, exit_kind, line)

    # --- reporting ----------------------------------------------------------

    def report(self, line: int, column: int, code: str, message: str) -> None:
        if not self.muted:
            self.mod.report(line, column, code, message)

    def where(self, kind: str, line: int) -> str:
        if kind == "end":
            return f"the end of the function at line {line}"
        if kind == "loop-end":
            return f"the end of the loop body at line {line}"
        return f"{kind} at line {line}"

    def check_exit(self, st: State, kind: str, line: int, only: Iterable[Var] | None = None) -> None:
        targets = only if only is not None else list(st)
        for var in targets:
            facts = st.get(var)
            if not facts:
                continue
            held = sorted({(f[1], f[2], f[3]) for f in facts if f[0] == HELD})
            if not held:
                continue
            definite = all(f[0] == HELD for f in facts)
            for hline, hcol, noun in held:
                modal = "is not" if definite else "may not be"
                self.report(
                    hline, hcol, codes.LEAK.code,
                    f'{noun} "{var.name}" {modal} {verb(noun)} or transferred before '
                    f"{self.where(kind, line)}",
                )

    # --- state helpers ------------------------------------------------------

    def current(self) -> State | None:
        """The state now (a call, so mypy does not keep narrowing across evaluations)."""
        return self.st

    def facts(self, var: Var) -> Facts:
        assert self.st is not None
        return self.st.get(var, NOTHING_FACTS)

    def local_var(self, e: Expression) -> Var | None:
        if isinstance(e, NameExpr) and isinstance(e.node, Var) and e.node in self.locals:
            return e.node
        return None

    def record_exception(self, state: State | None = None) -> None:
        """The current state may reach the innermost handler: any statement may raise."""
        st = self.st if state is None else state
        if st is None:
            return
        for frame in reversed(self.frames):
            if isinstance(frame, WithFrame):
                frame.swallowed = join(frame.swallowed, st)
            elif isinstance(frame, TryFrame):
                if frame.in_body:
                    frame.body_exc = join(frame.body_exc, st)
                else:
                    frame.escaping = join(frame.escaping, st)
                return

    def unwind(self, kind: str, st: State, line: int, raised: list[TypeInfo] | None = None) -> None:
        """Send an abrupt exit to whatever catches it: a loop, a handler, a finally, the caller."""
        self.exit_state = st
        for frame in reversed(self.frames):
            if isinstance(frame, LoopFrame):
                if kind in ("break", "continue"):
                    self.loop_exit_check(frame, st, kind, line)
                    (frame.breaks if kind == "break" else frame.continues).append(st)
                    return
            elif isinstance(frame, TryFrame):
                if kind == "raise" and frame.in_body:
                    index = frame.handler_for(raised)
                    if index is not None:
                        frame.caught[index] = join(frame.caught[index], st)
                        return
                if frame.has_finally:
                    frame.pending.append(Pending(kind, st, line, raised))
                    return
        if kind in ("return", "raise") and not self.muted:
            self.exits.append((kind, st, line))

    def loop_exit_check(self, frame: LoopFrame, st: State, kind: str, line: int) -> None:
        held = [v for v in frame.loop_locals if any(f[0] == HELD for f in st.get(v, ()))]
        if not held:
            return
        self.check_exit(st, kind, line, only=held)
        for var in held:
            st[var] = NOTHING_FACTS

    def loop_locals(self, loop: Node, body: Iterable[Node]) -> frozenset[Var]:
        key = id(loop)
        cached = self.loop_locals_cache.get(key)
        if cached is not None:
            return cached
        inside: Counter[Var] = Counter()
        for node in body:
            for name in name_refs(node, into_functions=False):
                if isinstance(name.node, Var) and name.node in self.locals:
                    inside[name.node] += 1
        result = frozenset(v for v, n in inside.items() if n == self.refs.get(v, 0))
        self.loop_locals_cache[key] = result
        return result

    # --- ownership events ---------------------------------------------------

    def check_use(self, var: Var, line: int, column: int) -> None:
        facts = self.facts(var)
        for kind, what in ((RELEASED, "release"), (MOVED, "move")):
            hits = sorted((f[1], f[3]) for f in facts if f[0] == kind)
            if not hits:
                continue
            at, noun = hits[0]
            noun = noun or "Lease"
            definite = all(f[0] == kind for f in facts)
            if kind == RELEASED:
                code = codes.USE_AFTER_RELEASE.code
                happened = f"{verb(noun)} at line {at}"
                if definite:
                    msg = f'{noun} "{var.name}" is used after it was {happened}'
                else:
                    msg = f'{noun} "{var.name}" may be used after it was {happened}'
            else:
                code = codes.USE_AFTER_MOVE.code
                if definite:
                    msg = f'{noun} "{var.name}" is used after its ownership moved at line {at}'
                else:
                    msg = f'{noun} "{var.name}" may be used after its ownership moved at line {at}'
            self.report(line, column, code, msg)
            return

    def lend(self, v: Value) -> None:
        """A use that keeps ownership where it is (reading, a plain parameter)."""
        if self.st is None:
            return
        if v.kind == "fresh":
            self.report(v.line, v.column, codes.DISCARDED.code,
                        f'{v.noun} returned by "{v.source}" is discarded')
        elif v.kind == "tuple":
            self.report(v.line, v.column, codes.DISCARDED.code,
                        f'Tuple of owned values returned by "{v.source}" is discarded')
        elif v.kind == "var" and v.var is not None:
            self.check_use(v.var, v.line, v.column)

    def transfer(self, v: Value, how: str, line: int) -> None:
        """Ownership leaves the current holder (return, store, owning parameter)."""
        if self.st is None or v.kind not in ("var", "borrowed"):
            return
        if v.kind == "borrowed":
            self.report(v.line, v.column, codes.ESCAPE.code,
                        f'Borrowed value returned by "{v.source}" cannot be transferred by {how}')
            return
        var = v.var
        assert var is not None
        facts = self.facts(var)
        if any(f[0] == BORROWED for f in facts):
            noun = next((f[3] for f in facts if f[3]), "Value")
            self.report(v.line, v.column, codes.ESCAPE.code,
                        f'{noun} "{var.name}" is borrowed and cannot be transferred by {how}')
            return
        self.check_use(var, v.line, v.column)
        owned = [f for f in facts if f[0] in (HELD, RELEASED, MOVED)]
        if owned:
            noun = owned[0][3]
            self.st[var] = frozenset({(MOVED, line, 0, noun)})

    def consume(self, v: Value, line: int, column: int) -> None:
        if self.st is None:
            return
        if v.kind == "borrowed":
            self.report(line, column, codes.DOUBLE_RELEASE.code,
                        f'Borrowed value returned by "{v.source}" cannot be {verb(v.noun)} '
                        f"(its owner does that)")
            return
        if v.kind != "var" or v.var is None:
            return
        var = v.var
        facts = self.facts(var)
        owned = [f for f in facts if f[0] != NOTHING]
        if any(f[0] == BORROWED for f in facts):
            noun = next((f[3] for f in facts if f[3]), "Lease")
            self.report(line, column, codes.DOUBLE_RELEASE.code,
                        f'{noun} "{var.name}" is borrowed and cannot be {verb(noun)} here '
                        f"(its owner does that)")
            return
        released = sorted((f[1], f[3]) for f in facts if f[0] == RELEASED)
        if released:
            at, noun = released[0]
            if all(f[0] == RELEASED for f in facts):
                msg = f'{noun} "{var.name}" is {verb(noun)} twice (first at line {at})'
            else:
                msg = f'{noun} "{var.name}" may be {verb(noun)} twice (first at line {at})'
            self.report(line, column, codes.DOUBLE_RELEASE.code, msg)
        else:
            self.check_use(var, line, column)
        if owned:
            noun = v.noun or owned[0][3] or "Lease"
            self.st[var] = frozenset({(RELEASED, line, column, noun)})

    def bind_local(self, var: Var, v: Value, line: int, column: int) -> None:
        """`var = <value>`: the old value must not be held; the new one may be."""
        assert self.st is not None
        if v.kind == "var" and v.var is var:
            return
        old = self.facts(var)
        held = [f for f in old if f[0] == HELD]
        if held:
            self.report(line, column, codes.LEAK.code,
                        dropped_message(var, old, held, "overwritten"))
        if v.kind == "fresh":
            self.st[var] = frozenset({(HELD, line, column, v.noun)})
        elif v.kind == "var" and v.var is not None:
            src = v.var
            self.check_use(src, v.line, v.column)
            facts = self.facts(src)
            if any(f[0] in (HELD, RELEASED, MOVED) for f in facts):
                self.st[var] = frozenset(
                    (HELD, line, column, f[3]) if f[0] == HELD else f for f in facts
                )
                noun = next((f[3] for f in facts if f[3]), "Lease")
                self.st[src] = frozenset({(MOVED, line, column, noun)})
            else:
                self.st[var] = facts
        elif v.kind == "borrowed":
            self.st[var] = borrowed(v.noun)
        else:
            self.st[var] = NOTHING_FACTS

    def bind(self, target: Expression, v: Value, line: int) -> None:
        """Assign an evaluated value to an assignment target."""
        if self.st is None:
            return
        if isinstance(target, NameExpr):
            var = self.local_var(target)
            if var is not None:
                if target.name == "_" and v.kind in ("fresh", "tuple"):
                    self.lend(v)
                    return
                self.bind_local(var, v, target.line, target.column)
            elif self.fn is not None or not isinstance(target.node, Var):
                self.transfer(v, "storing it outside the function", line)
            else:
                self.transfer(v, "storing it", line)
        elif isinstance(target, MemberExpr):
            self.lend(self.ev(target.expr))
            if self.borrowed_attribute(target):
                self.lend(v)
            else:
                self.transfer(v, "storing it in an attribute", line)
        elif isinstance(target, IndexExpr):
            self.lend(self.ev(target.base))
            self.lend(self.ev(target.index))
            if self.borrowed_items(target.base):
                self.lend(v)
            else:
                self.transfer(v, "storing it in a container", line)
        elif isinstance(target, (TupleExpr, ListExpr)):
            if v.kind == "tuple" and len(v.items) == len(target.items):
                for item, noun in zip(target.items, v.items):
                    sub = Value("fresh", v.line, v.column, noun=noun, source=v.source) if noun else OTHER
                    self.bind(item, sub, line)
            else:
                self.lend(v)
                for item in target.items:
                    self.bind(item, OTHER, line)
        elif isinstance(target, StarExpr):
            self.bind(target.expr, OTHER, line)
        else:
            self.lend(self.ev(target))

    def borrowed_attribute(self, target: MemberExpr) -> bool:
        """Whether the attribute is declared `Borrowed[...]`: storing there lends."""
        if target.def_var is not None and is_borrowed(target.def_var.type):
            return True
        t = self.types.get(target.expr)
        p = get_proper_type(t) if t is not None else None
        if isinstance(p, Instance):
            sym = p.type.get(target.name)
            if sym is not None and isinstance(sym.node, Var):
                return is_borrowed(sym.node.type)
        return False

    def borrowed_items(self, container: Expression) -> bool:
        """Whether a container's item type (its last type argument) is `Borrowed[...]`."""
        t = self.types.get(container)
        p = get_proper_type(t) if t is not None else None
        return isinstance(p, Instance) and bool(p.args) and is_borrowed(p.args[-1])

    def sink(self, e: Expression, action: Callable[[Value], None]) -> None:
        """Evaluate `e` and hand its value to `action`, path by path for `a if c else b`."""
        if self.st is None:
            return
        if isinstance(e, ConditionalExpr):
            t, f = self.cond(e.cond)
            self.st = t
            self.sink(e.if_expr, action)
            after_true = self.st
            self.st = f
            self.sink(e.else_expr, action)
            self.st = join(after_true, self.st)
            return
        action(self.ev(e))

    # --- statements ---------------------------------------------------------

    def stmts(self, body: Sequence[Statement]) -> None:
        for s in body:
            if self.st is None:
                return
            self.stmt(s)

    def block(self, b: Block) -> None:
        if b.is_unreachable or (b.body and self._block_unreachable_by_types(b.body)):
            self.st = None
            return
        self.stmts(b.body)

    def _block_unreachable_by_types(self, body: Sequence[Statement]) -> bool:
        """mypy skipped this block (unreachable after narrowing): nothing in it has a type."""
        first = body[0]
        probe: Expression | None = None
        if isinstance(first, ExpressionStmt):
            probe = first.expr
        elif isinstance(first, AssignmentStmt) and not isinstance(first.rvalue, TempNode):
            probe = first.rvalue
        elif isinstance(first, (ReturnStmt, RaiseStmt)):
            probe = first.expr
        elif isinstance(first, IfStmt):
            probe = first.expr[0]
        return probe is not None and probe not in self.types

    def stmt(self, s: Statement) -> None:
        if not self.frames:
            self.dispatch(s)
        elif isinstance(s, SIMPLE_STATEMENTS):
            pre = None if self.st is None else dict(self.st)
            self.exit_state = None
            self.dispatch(s)
            post = self.st if self.st is not None else self.exit_state
            if pre is not None:
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
            assert self.st is not None
            self.unwind("break" if isinstance(s, BreakStmt) else "continue", self.st, s.line)
            self.st = None
        elif isinstance(s, OperatorAssignmentStmt):
            self.lend(self.ev(s.rvalue))
            self.lend(self.ev(s.lvalue))
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
        v = self.ev(s.expr)
        if v.kind in ("fresh", "tuple"):
            self.lend(v)
        t = self.types.get(s.expr)
        if t is not None and isinstance(get_proper_type(t), UninhabitedType):
            self.st = None

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
            values = [self.ev(item) for item in rvalue.items]
            for target, value in zip(first.items, values):
                self.bind(target, value, s.line)
        else:
            self.sink(rvalue, lambda v: self.bind(first, v, s.line))
        for extra in s.lvalues[1:]:
            self.bind(extra, OTHER, s.line)
        if self.st is not None:
            t = self.types.get(rvalue)
            if t is not None and isinstance(get_proper_type(t), UninhabitedType):
                self.st = None

    def return_stmt(self, s: ReturnStmt) -> None:
        if s.expr is not None:
            if self.return_lends:
                self.sink(s.expr, self.lend)
            else:
                self.sink(s.expr, lambda v: self.transfer(v, "returning it", s.line))
        if self.st is not None:
            self.unwind("return", self.st, s.line)
        self.st = None

    def raise_stmt(self, s: RaiseStmt) -> None:
        raised: list[TypeInfo] | None = None
        if s.expr is not None:
            self.lend(self.ev(s.expr))
            raised = self.exception_classes(s.expr)
        if s.from_expr is not None:
            self.lend(self.ev(s.from_expr))
        if self.st is not None:
            self.unwind("raise", self.st, s.line, raised)
        self.st = None

    def exception_classes(self, e: Expression) -> list[TypeInfo] | None:
        t = self.types.get(e)
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
            t, f = self.cond(cond)
            self.st = t
            if t is not None:
                self.block(body)
            outs.append(self.st)
            self.st = f
            if f is None:
                break
        if self.st is not None and s.else_body is not None:
            self.block(s.else_body)
        outs.append(self.st)
        self.st = join_all(outs)

    def assert_stmt(self, s: AssertStmt) -> None:
        if isinstance(s.expr, NameExpr) and s.expr.fullname == "builtins.False":
            self.st = None
            return
        t, f = self.cond(s.expr)
        if s.msg is not None and f is not None:
            self.st = f
            self.lend(self.ev(s.msg))
        self.st = t

    def del_stmt(self, e: Expression, line: int) -> None:
        if isinstance(e, TupleExpr):
            for item in e.items:
                self.del_stmt(item, line)
            return
        var = self.local_var(e)
        if var is not None and self.st is not None:
            facts = self.facts(var)
            held = [f for f in facts if f[0] == HELD]
            if held:
                self.report(line, e.column, codes.LEAK.code,
                            dropped_message(var, facts, held, "deleted"))
            self.st[var] = NOTHING_FACTS
        elif isinstance(e, MemberExpr):
            self.lend(self.ev(e.expr))
        elif isinstance(e, IndexExpr):
            self.lend(self.ev(e.base))
            self.lend(self.ev(e.index))

    def definition(self, s: Statement) -> None:
        scope = self.enclosing | frozenset(self.locals)
        if isinstance(s, Decorator):
            for dec in s.original_decorators:
                self.lend(self.ev(dec))
            self.capture_check(s.func, "a closure")
        elif isinstance(s, FuncDef):
            self.capture_check(s, "a closure")
        elif isinstance(s, OverloadedFuncDef):
            if s.impl is not None:
                impl = s.impl.func if isinstance(s.impl, Decorator) else s.impl
                self.capture_check(impl, "a closure")
        elif isinstance(s, ClassDef):
            self.capture_check(s, "a nested class")
        self.mod.enqueue_definition(s, scope)

    def capture_check(self, node: Node, what: str) -> None:
        if self.st is None or not self.locals:
            return
        seen: set[Var] = set()
        for name in name_refs(node):
            var = name.node
            if not isinstance(var, Var) or var not in self.locals or var in seen:
                continue
            seen.add(var)
            facts = self.facts(var)
            tracked = any(f[0] in (HELD, BORROWED) for f in facts) or (
                classify(var.type) is not None and any(f[0] != NOTHING for f in facts)
            )
            if not tracked:
                continue
            noun = next((f[3] for f in facts if f[3]), "Lease")
            self.report(name.line, name.column, codes.ESCAPE.code,
                        f'{noun} "{var.name}" is captured by {what}; pass it explicitly')
            self.st[var] = NOTHING_FACTS

    # --- loops --------------------------------------------------------------

    def run_loop(
        self,
        entry: State,
        one_pass: Callable[[State], tuple[State | None, State | None]],
        frame_locals: frozenset[Var],
        end_line: int,
    ) -> tuple[State | None, LoopFrame]:
        """Iterate a loop body to a fixpoint (silently), then once more reporting.

        `one_pass(head)` runs one iteration from the loop head and returns
        (state when the loop exits from the head, state at the end of the body).
        Returns the head-exit state of the final pass and its frame.
        """
        head = entry
        self.muted += 1
        try:
            for _ in range(MAX_ITERATIONS):
                frame = LoopFrame(frame_locals)
                self.frames.append(frame)
                try:
                    _, end = one_pass(dict(head))
                finally:
                    self.frames.pop()
                if end is not None:
                    self.loop_exit_check(frame, end, "loop-end", end_line)
                new_head = join_all([entry, end, *frame.continues])
                assert new_head is not None
                if same(new_head, head):
                    break
                head = new_head
        finally:
            self.muted -= 1
        frame = LoopFrame(frame_locals)
        self.frames.append(frame)
        try:
            exit_state, end = one_pass(dict(head))
        finally:
            self.frames.pop()
        if end is not None:
            self.loop_exit_check(frame, end, "loop-end", end_line)
        return exit_state, frame

    def while_stmt(self, s: WhileStmt) -> None:
        assert self.st is not None
        entry = self.st
        forever = (isinstance(s.expr, NameExpr) and s.expr.fullname == "builtins.True") or (
            isinstance(s.expr, IntExpr) and s.expr.value != 0
        )
        loop_locals = self.loop_locals(s, [s.body])

        def one_pass(head: State) -> tuple[State | None, State | None]:
            self.st = head
            t, f = self.cond(s.expr)
            self.st = t
            if t is not None:
                self.block(s.body)
            return (None if forever else f), self.st

        exit_state, frame = self.run_loop(entry, one_pass, loop_locals, self._last_line(s.body))
        self.st = exit_state
        if self.st is not None and s.else_body is not None:
            self.block(s.else_body)
        self.st = join_all([self.st, *frame.breaks])

    def for_stmt(self, s: ForStmt) -> None:
        self.lend(self.ev(s.expr))
        if self.st is None:
            return
        entry = self.st
        loop_locals = self.loop_locals(s, [s.index, s.body])

        def one_pass(head: State) -> tuple[State | None, State | None]:
            self.st = dict(head)
            self.bind(s.index, OTHER, s.line)
            self.block(s.body)
            return head, self.st

        exit_state, frame = self.run_loop(entry, one_pass, loop_locals, self._last_line(s.body))
        self.st = exit_state
        if self.st is not None and s.else_body is not None:
            self.block(s.else_body)
        self.st = join_all([self.st, *frame.breaks])

    @staticmethod
    def _last_line(b: Block) -> int:
        if not b.body:
            return b.line
        last = b.body[-1]
        return last.end_line if last.end_line is not None else last.line

    # --- try / with / match -------------------------------------------------

    def try_stmt(self, s: TryStmt) -> None:
        handlers: list[list[TypeInfo] | None] = []
        for texpr in s.types:
            handlers.append(None if texpr is None else self.handler_classes(texpr))
        frame = TryFrame(handlers, s.finally_body is not None)
        self.frames.append(frame)
        try:
            self.block(s.body)
            body_out = self.st
            frame.in_body = False
            outs: list[State | None] = []
            for i, handler in enumerate(s.handlers):
                self.st = join(frame.body_exc, frame.caught[i])
                if self.st is None:
                    continue
                target = s.vars[i]
                if target is not None:
                    self.bind(target, OTHER, handler.line)
                self.block(handler)
                outs.append(self.st)
            if not frame.catch_all():
                frame.escaping = join(frame.escaping, frame.body_exc)
            self.st = body_out
            if self.st is not None and s.else_body is not None:
                self.block(s.else_body)
            outs.append(self.st)
            normal = join_all(outs)
        finally:
            self.frames.pop()
        if s.finally_body is None:
            self.st = frame.escaping
            self.record_exception()
            self.st = normal
            return
        fin = s.finally_body
        everything = join_all([normal, frame.escaping, *(p.state for p in frame.pending)])
        if everything is None:
            self.st = None
            return
        self.st = everything
        self.block(fin)
        self.muted += 1
        try:
            escaping = self.run_block_from(fin, frame.escaping)
            resumed = [(p, self.run_block_from(fin, p.state)) for p in frame.pending]
            after_normal = self.run_block_from(fin, normal)
        finally:
            self.muted -= 1
        if escaping is not None:
            self.st = escaping
            self.record_exception()
        for p, st in resumed:
            if st is not None:
                self.unwind(p.kind, st, p.line, p.raised)
        self.st = after_normal

    def run_block_from(self, b: Block, st: State | None) -> State | None:
        if st is None:
            return None
        self.st = dict(st)
        self.block(b)
        return self.st

    def handler_classes(self, e: Expression) -> list[TypeInfo] | None:
        items = e.items if isinstance(e, TupleExpr) else [e]
        out: list[TypeInfo] = []
        for item in items:
            if isinstance(item, RefExpr) and isinstance(item.node, TypeInfo):
                out.append(item.node)
            else:
                return []
        return out

    def with_stmt(self, s: WithStmt) -> None:
        after_block: list[Var] = []
        swallows = False
        for expr, target in zip(s.expr, s.target):
            v = self.ev(expr)
            if self.st is None:
                return
            if v.kind == "var" and v.var is not None:
                self.check_use(v.var, v.line, v.column)
                held = [f for f in self.facts(v.var) if f[0] == HELD]
                if held:
                    self.st[v.var] = borrowed(held[0][3])
                    after_block.append(v.var)
            swallows = swallows or self.exit_swallows(expr, s.is_async)
            if target is not None:
                var = self.local_var(target)
                kind = classify(var.type) if var is not None else None
                if var is not None and kind is not None:
                    self.bind_local(var, OTHER, target.line, target.column)
                    self.st[var] = borrowed(kind.noun)
                    after_block.append(var)
                else:
                    self.bind(target, OTHER, s.line)
        frame = WithFrame() if swallows else None
        if frame is not None:
            self.frames.append(frame)
        try:
            self.block(s.body)
        finally:
            if frame is not None:
                self.frames.pop()
        if frame is not None:
            self.st = join(self.st, frame.swallowed)
        if self.st is not None:
            for var in after_block:
                noun = "Lease" if var.type is None else (classify(var.type) or Tracked("Lease", True)).noun
                self.st[var] = frozenset({(RELEASED, s.line, s.column, noun)})

    def exit_swallows(self, cm: Expression, is_async: bool) -> bool:
        """Whether the context manager's `__exit__` is declared to return `bool`."""
        t = self.types.get(cm)
        p = get_proper_type(t) if t is not None else None
        if not isinstance(p, Instance):
            return False
        method = p.type.get_method("__aexit__" if is_async else "__exit__")
        sig = get_proper_type(method.type) if isinstance(method, FuncBase) and method.type else None
        if isinstance(method, Decorator):
            sig = get_proper_type(method.func.type) if method.func.type else None
        if not isinstance(sig, CallableType):
            return False
        ret = get_proper_type(sig.ret_type)
        if is_async and isinstance(ret, Instance) and ret.args:
            ret = get_proper_type(ret.args[-1])
        return isinstance(ret, Instance) and ret.type.fullname == "builtins.bool"

    def match_stmt(self, s: MatchStmt) -> None:
        self.lend(self.ev(s.subject))
        if self.st is None:
            return
        remaining: State | None = self.st
        outs: list[State | None] = []
        for pattern, guard, body in zip(s.patterns, s.guards, s.bodies):
            if remaining is None:
                break
            self.st = dict(remaining)
            self.bind_pattern(pattern)
            if guard is not None:
                t, f = self.cond(guard)
                remaining = join(remaining, f)
                self.st = t
            elif self.irrefutable(pattern):
                remaining = None
            if self.st is not None:
                self.block(body)
            outs.append(self.st)
        outs.append(remaining)
        self.st = join_all(outs)

    def irrefutable(self, p: Pattern) -> bool:
        if isinstance(p, AsPattern):
            return p.pattern is None or self.irrefutable(p.pattern)
        if isinstance(p, OrPattern):
            return any(self.irrefutable(sub) for sub in p.patterns)
        return False

    def bind_pattern(self, p: Pattern) -> None:
        for name in name_refs(p):
            if isinstance(name.node, Var) and name.node in self.locals and name.is_new_def:
                self.bind(name, OTHER, name.line)

    # --- conditions ---------------------------------------------------------

    def cond(self, e: Expression) -> tuple[State | None, State | None]:
        """Evaluate a condition; return the states where it is true and false."""
        if self.st is None:
            return None, None
        if isinstance(e, UnaryExpr) and e.op == "not":
            t, f = self.cond(e.expr)
            return f, t
        if isinstance(e, OpExpr) and e.op in ("and", "or"):
            t1, f1 = self.cond(e.left)
            if e.op == "and":
                self.st = t1
                t2, f2 = self.cond(e.right)
                return t2, join(f1, f2)
            self.st = f1
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
        self.lend(self.ev(e))
        st = self.st
        return st, (None if st is None else dict(st))

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
        if isinstance(e, (NameExpr, AssignmentExpr)):
            name = e if isinstance(e, NameExpr) else e.target
            if not self.truthiness_is_presence(name):
                return None
            var = self.tested_var(e)
            return None if var is None else (var, True)
        return None

    def tested_var(self, e: Expression) -> Var | None:
        if isinstance(e, AssignmentExpr):
            self.ev(e)
            return self.local_var(e.target)
        return self.local_var(e)

    def truthiness_is_presence(self, e: Expression) -> bool:
        t = self.types.get(e)
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

    @staticmethod
    def narrow(st: State, var: Var, *, present: bool) -> State:
        out = dict(st)
        facts = st.get(var, NOTHING_FACTS)
        if present:
            kept = frozenset(f for f in facts if f[0] != NOTHING)
            out[var] = kept or facts
        else:
            out[var] = NOTHING_FACTS
        return out

    # --- expressions --------------------------------------------------------

    def ev(self, e: Expression) -> Value:
        """Evaluate `e` for its ownership effects; return where its value comes from."""
        if self.st is None:
            return OTHER
        if isinstance(e, NameExpr):
            var = self.local_var(e)
            if var is not None:
                return Value("var", e.line, e.column, var=var)
            if e.fullname == "builtins.None":
                return NONE
            return OTHER
        if isinstance(e, MemberExpr):
            if isinstance(e.expr, RefExpr) and isinstance(e.expr.node, MypyFile):
                return OTHER
            self.lend(self.ev(e.expr))
            return OTHER
        if isinstance(e, CallExpr):
            return self.call(e)
        if isinstance(e, (TupleExpr, ListExpr, SetExpr)):
            for item in e.items:
                if isinstance(item, StarExpr):
                    self.lend(self.ev(item.expr))
                else:
                    self.sink(item, lambda v: self.transfer(v, "storing it in a container", e.line))
            return OTHER
        if isinstance(e, DictExpr):
            for key, value in e.items:
                if key is not None:
                    self.lend(self.ev(key))
                self.sink(value, lambda v: self.transfer(v, "storing it in a container", e.line))
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
            if isinstance(e.expr, CallExpr):
                return self.call_result(e.expr, self.types.get(e), e)
            return OTHER
        if isinstance(e, YieldExpr):
            if e.expr is not None:
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
        if isinstance(e, (IndexExpr,)):
            self.lend(self.ev(e.base))
            self.lend(self.ev(e.index))
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

    # --- calls --------------------------------------------------------------

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
        for arg, mode in zip(e.args, modes):
            if self.st is None:
                return OTHER
            if mode == "own":
                self.sink(arg, lambda v: self.transfer(v, "passing it to an owning parameter", e.line))
            elif mode == "untyped":
                self.sink(arg, self.untyped_argument)
            else:
                self.sink(arg, self.lend)
        if receiver is not None and self.st is not None:
            assert isinstance(callee, MemberExpr)
            if self.calls.is_consuming(receiver_type, callee.name):
                self.consume(receiver, callee.line, callee.column)
            else:
                self.lend(receiver)
        return self.call_result(e, self.types.get(e), e)

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


SIMPLE_STATEMENTS: Final = (
    ExpressionStmt, AssignmentStmt, OperatorAssignmentStmt, DelStmt, AssertStmt, ReturnStmt,
    RaiseStmt,
)


def _is_none(e: Expression) -> bool:
    return isinstance(e, NameExpr) and e.fullname == "builtins.None"


def check_tree(tree: MypyFile, types: Mapping[Expression, Type]) -> list[Diagnostic]:
    """Every ownership finding in one module, sorted by position."""
    return ModuleChecker(tree, types).run()

"""Flow-sensitive ownership analysis over one module's typed mypy AST.

Abstract interpretation per function: every local variable maps to a set of
facts (held since line N, released at N, moved at N, borrowed, nothing),
joined by union where paths merge, iterated to a fixpoint around loops.
Exits (fall-through, return, explicit raise, break/continue out of a loop
for loop-local names) must leave nothing held. Implicit exceptions are
modelled only into local handlers and `finally` blocks: each statement's
entry state may reach them. Types come from mypy's type map; what counts as
owned comes from `leases.check.model`.

Nothing owned is dropped from the analysis silently: a value that flows
where the rules cannot follow it (an `Any`, reflection, a deferred call, an
awaitable not awaited where it is made) is `lease-untracked`, a value whose
owner cannot be told (a generic result, an unknown loop target) carries an
"unknown" fact that makes consuming it `lease-untracked`, and what the code
takes on its own word (`untracked(...)`, `# lease: ignore`) or what the
analysis only approximates (an unconverged loop, a block mypy did not type)
becomes a `lease-partial` note that `leasecheck --partial` lists.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence

from mypy.nodes import (
    ARG_STAR,
    ARG_STAR2,
    FUNC_NO_INFO,
    LDEF,
    ClassDef,
    Decorator,
    Expression,
    FuncDef,
    FuncItem,
    LambdaExpr,
    MypyFile,
    Node,
    NonlocalDecl,
    OverloadedFuncDef,
    RefExpr,
    Statement,
    TypeInfo,
    Var,
)
from mypy.types import AnyType, CallableType, Type, TypeOfAny, get_proper_type

from leases.check import codes
from leases.check.calls import CallModel
from leases.check.compound import CompoundMixin
from leases.check.conditions import ConditionsMixin
from leases.check.expressions import ExpressionsMixin
from leases.check.facts import HELD, TUPLE_NOUN, Frame, State, borrowed
from leases.check.fields import FieldsMixin, unowned_fields
from leases.check.model import (
    CONTEXT_MANAGER_DECORATORS,
    META_KEY,
    declared_fields,
    is_linear_info,
    owned_fields,
    tracks_anywhere,
    classify,
    is_borrowed,
    owned_tuple,
    param_mode,
)
from leases.check.ownership import OwnershipBase
from leases.check.report import Diagnostic, find_takes_from
from leases.check.statements import StatementsMixin
from leases.check.takes import Take, TakesMixin, decorator_contract, resolve_contract
from leases.check.walk import children, name_refs


class ModuleChecker:
    """Runs the function analysis over every function body of one module."""

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

    def run(self) -> list[Diagnostic]:
        if self.tree.is_stub:
            return []
        self.queue.append((None, self.tree.defs, frozenset()))
        while self.queue:
            fn, body, enclosing = self.queue.popleft()
            FunctionChecker(self, fn, body, enclosing).run()
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


class FunctionChecker(
    TakesMixin, FieldsMixin,
    StatementsMixin, CompoundMixin, ConditionsMixin, ExpressionsMixin, OwnershipBase
):
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
        self.returns_any = False
        self.return_tracks = True
        self.exit_state: State | None = None
        self.places = {}
        self.place_bases = {}
        self.place_nouns = {}
        self.container_places = set()
        self.slots = {}
        self.links = {}
        self.discharging = set()
        self.markers = set()
        self.slot_markers = {}
        self.pop_markers = {}
        self.entry_of = {}
        self.entries = {}
        self.aliases = set()
        self.takes = {}
        self.take_aliases = {}

    def run(self) -> None:
        fn = self.fn
        st: State = {}
        if fn is not None:
            declared = fn.type if fn.type is not None else (
                self.types.get(fn) if isinstance(fn, LambdaExpr) else None)
            sig = get_proper_type(declared) if declared is not None else None
            lambda_param = isinstance(fn, LambdaExpr)
            if isinstance(sig, CallableType):
                self.return_lends = is_borrowed(sig.ret_type)
                ret = get_proper_type(sig.ret_type)
                self.returns_any = isinstance(ret, AnyType) and ret.type_of_any == TypeOfAny.explicit
                self.return_tracks = tracks_anywhere(sig.ret_type) or fn.is_generator \
                    or fn.is_coroutine
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
                    noun = kind.noun if kind is not None else (
                        TUPLE_NOUN if owned_tuple(sig.arg_types[i]) else "Value")
                    if mode == "borrow" or (mode == "own" and lambda_param):
                        st[var] = borrowed(noun)
                    elif mode == "own":
                        st[var] = frozenset({(HELD, arg.line, arg.column, noun)})
            self.setup_places(fn, st)
            contract = self.mod.contracts.get(fn)
            if contract:
                self.setup_takes(fn, contract, st)
        self.st = st
        if self.body and self._block_unreachable_by_types(self.body):
            if fn is not None:
                self.report(fn.line, fn.column, codes.UNCHECKED.code,
                            f'Function "{fn.name}" was not type-checked by mypy (unannotated or '
                            f"@no_type_check), so its ownership is not checked")
                self.mod.note(fn.line, fn.column, f'unchecked: function "{fn.name}" (no types)')
            return
        self.stmts(self.body)
        if fn is None:
            return
        if self.st is not None:
            end = fn.end_line if fn.end_line is not None else (self.body[-1].line if self.body else fn.line)
            self.exits.append(("end", self.st, end))
        for exit_kind, state, line in self.exits:
            self.check_exit(state, exit_kind, line)
            self.check_fields(state, exit_kind, line)
        self.check_takes(self.exits)



def check_tree(
    tree: MypyFile, types: Mapping[Expression, Type], exits_at: frozenset[str] = frozenset(),
    text: str = "",
) -> list[Diagnostic]:
    """Every ownership finding in one module, sorted by position.

    `exits_at` ("await", "yield") makes those suspension points exits too;
    `text` is the module's source, read for `# lease: takes-from` comments.
    """
    return ModuleChecker(tree, types, exits_at, text).run()

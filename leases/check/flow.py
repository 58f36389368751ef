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

from collections.abc import Mapping

from mypy.nodes import ARG_STAR, ARG_STAR2, FUNC_NO_INFO, Expression, FuncDef, FuncItem, LambdaExpr, MypyFile, Statement, Var
from mypy.types import AnyType, CallableType, Type, TypeOfAny, get_proper_type

from leases.check import codes
from leases.check.compound import CompoundMixin
from leases.check.conditions import ConditionsMixin
from leases.check.expressions import ExpressionsMixin
from leases.check.facts import HELD, TUPLE_NOUN, State, borrowed
from leases.check.fields import FieldsMixin
from leases.check.function_state import FunctionState
from leases.check.model import classify, is_borrowed, owned_tuple, param_mode, tracks_anywhere
from leases.check.module import ModuleChecker
from leases.check.ownership import OwnershipBase
from leases.check.report import Diagnostic
from leases.check.statements import StatementsMixin
from leases.check.takes import TakesMixin


class FunctionChecker(
    TakesMixin, FieldsMixin,
    StatementsMixin, CompoundMixin, ConditionsMixin, ExpressionsMixin, OwnershipBase
):
    """The analysis of one function body (or of module/class level statements).

    The rules modules, composed: each mixin holds no state of its own (it is
    all in `self.s`) and calls the others through `self.rules`, which is this
    object seen as `leases.check.rules.Rules`.
    """

    def __init__(
        self,
        module: ModuleChecker,
        fn: FuncItem | None,
        body: list[Statement],
        enclosing: frozenset[Var],
    ) -> None:
        self.s = FunctionState(module, fn, body, enclosing)
        self.rules = self

    def run(self) -> None:
        fn = self.s.fn
        st: State = {}
        if fn is not None:
            declared = fn.type if fn.type is not None else (
                self.s.types.get(fn) if isinstance(fn, LambdaExpr) else None)
            sig = get_proper_type(declared) if declared is not None else None
            lambda_param = isinstance(fn, LambdaExpr)
            if isinstance(sig, CallableType):
                self.s.return_lends = is_borrowed(sig.ret_type)
                ret = get_proper_type(sig.ret_type)
                self.s.returns_any = isinstance(ret, AnyType) and ret.type_of_any == TypeOfAny.explicit
                self.s.return_tracks = tracks_anywhere(sig.ret_type) or fn.is_generator \
                    or fn.is_coroutine
                for i, arg in enumerate(fn.arguments):
                    var = arg.variable
                    if var.is_self or var.is_cls or i >= len(sig.arg_types):
                        continue
                    if arg.kind == ARG_STAR and param_mode(sig.arg_types[i]) == "own" and not lambda_param:
                        kind = classify(sig.arg_types[i])  # `*leases: Lease[...]`: the caller handed them over
                        st[var] = frozenset({(HELD, arg.line, arg.column,
                                              f"{kind.noun if kind is not None else 'Value'} container")})
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
                    else:
                        self.setup_contents(var, sig.arg_types[i], arg.line, arg.column, st)
            self.setup_places(fn, st)
            contract = self.s.mod.contracts.get(fn)
            if contract:
                self.setup_takes(fn, contract, st)
        self.s.st = st
        if self.s.body and self._block_unreachable_by_types(self.s.body):
            if fn is not None:
                self.report(fn.line, fn.column, codes.UNCHECKED.code,
                            f'Function "{fn.name}" was not type-checked by mypy (unannotated or '
                            f"@no_type_check), so its ownership is not checked")
                self.s.mod.note(fn.line, fn.column, f'unchecked: function "{fn.name}" (no types)')
            return
        self.stmts(self.s.body)
        if fn is None:
            return
        if self.s.st is not None:
            end = fn.end_line if fn.end_line is not None else (self.s.body[-1].line if self.s.body else fn.line)
            self.s.exits.append(("end", self.s.st, end))
        for exit_kind, state, line in self.s.exits:
            self.check_exit(state, exit_kind, line)
            self.check_fields(state, exit_kind, line)
        self.check_takes(self.s.exits)

    def discharged_by(self, method: FuncDef) -> frozenset[str]:
        """The owned fields of its receiver a helper method of this module releases or hands on, and
        resets, on every normal exit (`def _drop(self)` called from `@consumes` methods).

        Read by analysing the helper again, silently; only for methods defined in the module being
        checked, whose bodies mypy always has (a cached module's would not be, and the answer would
        change between a cold run and a warm one). A helper still being worked out discharges nothing.
        """
        cache = self.s.mod.helper_fields
        found = cache.get(method)
        if found is not None:
            return found
        cache[method] = frozenset()
        if method.info is FUNC_NO_INFO or method.info.module_name != self.s.mod.tree.fullname \
                or not method.arguments or method.is_static or method.is_trivial_body:
            return frozenset()
        helper = FunctionChecker(self.s.mod.shadow(), method, method.body.body, frozenset())
        helper.run()
        receiver = method.arguments[0].variable
        ends = [state for kind, state, _ in helper.s.exits if kind in ("end", "return")]
        found = frozenset(
            name for (owner, name), place in helper.s.places.items()
            if owner is receiver and place in helper.s.place_bases
            and not any(f[0] == HELD for state in ends for f in state.get(place, ()))
        )
        cache[method] = found
        return found

    def drained_by(self, fn: FuncDef) -> frozenset[int]:
        """The positions of the parameters holding containers of owned values that a function of
        this module empties on every normal exit: a loop that releases or hands on each entry, then a
        clear, or a pop of each (`def settle_all(batch: list[Lease[...]])`). Storing the container
        whole (`self.batches.append(batch)`) does not count yet.

        A caller's local container passed there is handed on; passed anywhere else it stays the
        caller's. Read by analysing the function again, silently, as `discharged_by` does, and for
        the same reason only for functions of the module being checked.
        """
        cache = self.s.mod.drained_params
        found = cache.get(fn)
        if found is not None:
            return found
        cache[fn] = frozenset()
        module = fn.info.module_name if fn.info is not FUNC_NO_INFO else fn.fullname.rpartition(".")[0]
        if module != self.s.mod.tree.fullname or fn.is_trivial_body:
            return frozenset()
        helper = FunctionChecker(self.s.mod.shadow(), fn, fn.body.body, frozenset())
        helper.run()
        ends = [state for kind, state, _ in helper.s.exits if kind in ("end", "return")]
        found = frozenset(
            i for i, arg in enumerate(fn.arguments)
            if (marker := helper.s.contents.get(arg.variable)) is not None
            and not any(f[0] == HELD for state in ends for f in state.get(marker, ()))
        )
        cache[fn] = found
        return found



def check_tree(
    tree: MypyFile, types: Mapping[Expression, Type], exits_at: frozenset[str] = frozenset(),
    text: str = "",
) -> list[Diagnostic]:
    """Every ownership finding in one module, sorted by position.

    `exits_at` ("await", "yield") makes those suspension points exits too;
    `text` is the module's source, read for `# lease: takes-from` comments.
    """
    module = ModuleChecker(tree, types, exits_at, text)
    for fn, body, enclosing in module.pending():
        FunctionChecker(module, fn, body, enclosing).run()
    return module.finish()

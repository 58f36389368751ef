"""How a call moves ownership: argument modes, consuming methods, owned results.

Answers come from the callee's types: the inferred callable in mypy's type
map decides which parameters own their arguments (so `list.append` owns what
a `list[Lease[...]]` stores), while the declared signature decides whether a
result is owned (a type variable in the declared return type means the value
only flows through a generic helper and is not tracked).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from mypy.argmap import map_actuals_to_formals
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    AssignmentStmt,
    CallExpr,
    ClassDef,
    ConditionalExpr,
    Decorator,
    Expression,
    FuncBase,
    FuncDef,
    FuncItem,
    MemberExpr,
    MypyFile,
    NameExpr,
    Node,
    RefExpr,
    ReturnStmt,
    TypeInfo,
    Var,
)
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    NoneType,
    Overloaded,
    ProperType,
    TupleType,
    Type,
    TypeOfAny,
    TypeType,
    UnionType,
    get_proper_type,
)

from leases.check.model import (
    LEASE,
    MOVE_OUT_METHODS,
    generator_item,
    holds_owned,
    tuple_or_none,
    without_none,
    consuming_method,
    is_borrowed,
    is_linear_info,
    is_weak_owner,
    mentions_owned,
    param_mode,
)
from leases.check.walk import children

STDLIB_CONTAINERS: Final = frozenset(
    {"builtins", "collections", "typing", "_collections_abc", "collections.abc", "queue",
     "asyncio.queues", "heapq", "bisect"}
)
LOOKUP_METHODS: Final = frozenset(
    {"remove", "discard", "index", "count", "get", "pop", "__contains__", "__eq__", "__ne__",
     "__getitem__", "__delitem__"}
)
"""Methods of stdlib containers whose arguments are looked up, not stored."""


HANDOVERS: Final = frozenset({"leases.mailbox.Mailbox.drain"})
"""Generic methods of the leases runtime whose result (a container of their type variable) the caller
owns: what was posted is taken out. Other generic methods declare nothing about ownership."""


class CallModel:
    """Ownership facts about calls, read from one module's type map."""

    def __init__(self, types: Mapping[Expression, Type]) -> None:
        self.types = types

    def is_consuming(self, receiver_type: Type | None, name: str) -> bool:
        if receiver_type is None:
            return False
        p = get_proper_type(receiver_type)
        items = p.items if isinstance(p, UnionType) else [p]
        for item in items:
            ip = get_proper_type(item)
            if isinstance(ip, Instance) and consuming_method(ip.type, name):
                return True
        return False

    def argument_modes(self, e: CallExpr, receiver_type: Type | None) -> list[str]:
        """Per argument: "own" (ownership moves), "untyped", or "lend"."""
        plain = ["lend"] * len(e.args)
        if not e.args:
            return plain
        t = self.types.get(e.callee)
        if t is None:
            return plain
        ct = get_proper_type(t)
        if isinstance(ct, AnyType):
            return ["untyped"] * len(e.args)
        if isinstance(ct, Overloaded):
            ct = self.pick_overload(e, ct)
        if not isinstance(ct, CallableType):
            return plain
        owner = self.callee_owner(e, receiver_type)
        if is_weak_owner(owner):
            return plain
        if isinstance(e.callee, MemberExpr) and e.callee.name in LOOKUP_METHODS:
            recv = get_proper_type(receiver_type) if receiver_type is not None else None
            if isinstance(recv, Instance) and recv.type.module_name in STDLIB_CONTAINERS:
                return plain
        try:
            formal_to_actual = map_actuals_to_formals(
                e.arg_kinds, e.arg_names, ct.arg_kinds, ct.arg_names,
                lambda i: self.types.get(e.args[i]) or AnyType(0),
            )
        except Exception:
            return plain
        modes = list(plain)
        for j, actuals in enumerate(formal_to_actual):
            formal = get_proper_type(ct.arg_types[j])
            if isinstance(formal, AnyType) and formal.type_of_any != TypeOfAny.from_error:
                for i in actuals:
                    modes[i] = "untyped"
                continue
            mode = param_mode(ct.arg_types[j])
            for i in actuals:
                if mode == "own" and modes[i] == "lend" and e.arg_kinds[i] not in (ARG_STAR, ARG_STAR2):
                    modes[i] = "own"
                elif mode == "borrow":
                    modes[i] = "borrow"
        return modes

    def pick_overload(self, e: CallExpr, ov: Overloaded) -> ProperType:
        for item in ov.items:
            try:
                mapping = map_actuals_to_formals(
                    e.arg_kinds, e.arg_names, item.arg_kinds, item.arg_names,
                    lambda i: self.types.get(e.args[i]) or AnyType(0),
                )
            except Exception:
                continue
            if all(mapping[j] or not item.arg_kinds[j].is_required() for j in range(len(mapping))):
                return item
        return ov

    def callee_owner(self, e: CallExpr, receiver_type: Type | None) -> str | None:
        """The full name of the callee, or for a method the full name of its class."""
        callee = e.callee
        if isinstance(callee, MemberExpr) and receiver_type is not None:
            p = get_proper_type(receiver_type)
            if isinstance(p, Instance):
                return p.type.fullname + "." + callee.name
            if isinstance(p, TypeType):
                item = get_proper_type(p.item)
                if isinstance(item, Instance):
                    return item.type.fullname + "." + callee.name
        t = self.types.get(callee)
        ct = get_proper_type(t) if t is not None else None
        if isinstance(ct, FunctionLike) and ct.is_type_obj():
            return ct.type_object().fullname
        if isinstance(callee, RefExpr):
            return callee.fullname or None
        return None

    def declared(self, e: CallExpr) -> Node | None:
        """The definition a call resolves to: a function, decorator, overload, class or var."""
        callee = e.callee
        if isinstance(callee, NameExpr):
            return callee.node
        if isinstance(callee, MemberExpr):
            if callee.node is not None and not isinstance(callee.node, Var):
                return callee.node
            t = self.types.get(callee.expr)
            p = get_proper_type(t) if t is not None else None
            info: TypeInfo | None = None
            if isinstance(p, Instance):
                info = p.type
            elif isinstance(p, TypeType):
                item = get_proper_type(p.item)
                info = item.type if isinstance(item, Instance) else None
            elif isinstance(p, FunctionLike) and p.is_type_obj():
                info = p.type_object()
            elif isinstance(p, TupleType):
                info = p.partial_fallback.type
            if info is not None:
                sym = info.get(callee.name)
                return sym.node if sym is not None else None
        return None

    def _signature(self, e: CallExpr, node: object) -> Type | None:
        """The declared type of the callee `node` of `e` (a decorated or plain function, or a variable)."""
        if isinstance(node, Decorator):
            return node.var.type or node.func.type
        if isinstance(node, FuncBase):
            return node.type
        if isinstance(node, Var):
            return node.type or self.types.get(e.callee)
        return None

    def declared_returns(self, e: CallExpr) -> list[Type] | None:
        """The declared return types of the callee (None: unknown)."""
        return _declared_returns(self._signature(e, self.declared(e)))

    def generator_yields(self, e: CallExpr) -> Type | None:
        """What a call to a generator function declared `Iterator[X]` (or the like) yields: X."""
        rets = self.declared_returns(e)
        if not rets or len(rets) != 1:
            return None
        return generator_item(rets[0])

    def returns_owned(self, e: CallExpr) -> str | None:
        """"owned", "borrowed" or None, from the callee's declared return type."""
        node = self.declared(e)
        if node is None:
            return "owned"
        if isinstance(node, TypeInfo):
            return "owned" if (is_linear_info(node) or node.fullname == LEASE) else None
        rets = _declared_returns(self._signature(e, node))
        if rets is None:
            return "owned"
        if any(is_borrowed(r) for r in rets):
            return "borrowed"
        return "owned" if any(mentions_owned(r) or _tuple_of_containers(r) for r in rets) else None

    def returns_owned_container(self, e: CallExpr, receiver_type: Type | None = None) -> bool:
        """Whether the callee declares that it hands over a container of owned values
        (`-> list[Lease[Full, Held]]`; `list[Borrowed[...]]` is a list of views), or is one of the
        leases runtime's generic hand-overs (`Mailbox.drain()`)."""
        if isinstance(self.declared(e), TypeInfo):
            return False
        if self.callee_owner(e, receiver_type) in HANDOVERS:
            return True
        rets = self.declared_returns(e)
        return rets is not None and any(holds_owned(without_none(r)) for r in rets)

    def parameter_of(self, e: CallExpr, index: int) -> tuple[FuncDef, int, Type | None] | None:
        """The function that argument `index` of `e` goes to, the position of its parameter there (a
        method's receiver counted) and the parameter's declared type; None for anything but a plain
        positional or keyword argument of a function or method defined in source."""
        node = self.declared(e)
        fn = node.func if isinstance(node, Decorator) else node
        if not isinstance(fn, FuncDef) or e.arg_kinds[index] not in (ARG_POS, ARG_NAMED):
            return None
        if e.arg_kinds[index] == ARG_NAMED:
            if e.arg_names[index] not in fn.arg_names:
                return None
            position = fn.arg_names.index(e.arg_names[index])
        elif any(kind != ARG_POS for kind in e.arg_kinds[:index]):
            return None
        else:
            callee = e.callee
            receiver = self.types.get(callee.expr) if isinstance(callee, MemberExpr) else None
            bound = isinstance(callee, MemberExpr) and not fn.is_static and not (
                isinstance(callee.expr, RefExpr) and isinstance(callee.expr.node, MypyFile)) and (
                fn.is_class or isinstance(get_proper_type(receiver) if receiver is not None else None, Instance))
            position = index + int(bound)
        sig = fn.type
        formal = sig.arg_types[position] if isinstance(sig, CallableType) and position < len(sig.arg_types) else None
        return fn, position, formal

    def formal_type(self, e: CallExpr, index: int) -> Type | None:
        """The type the callee's inferred signature gives the parameter that plain positional or
        keyword argument `index` of `e` binds to (a constructor's: its `__init__`'s), else None."""
        t = self.types.get(e.callee)
        ct = get_proper_type(t) if t is not None else None
        if not isinstance(ct, CallableType) or e.arg_kinds[index] not in (ARG_POS, ARG_NAMED):
            return None
        if e.arg_kinds[index] == ARG_NAMED:
            name = e.arg_names[index]
            return ct.arg_types[ct.arg_names.index(name)] if name in ct.arg_names else None
        if any(kind != ARG_POS for kind in e.arg_kinds[:index]) or index >= len(ct.arg_types):
            return None
        return ct.arg_types[index]

    @staticmethod
    def callee_name(e: CallExpr) -> str:
        callee = e.callee
        if isinstance(callee, (NameExpr, MemberExpr)):
            return callee.name
        return "call"


def takes_out_of_self(method: FuncDef) -> bool:
    """Whether every `return` of `method` gives None or what it takes out of a field of `self` (`return
    self._items.pop() if self._items else None`, or `out = self._items; self._items = []; return out`),
    and one gives something: a generic container's take-out, whose caller owns the result as after
    `list.pop()`."""
    if not method.arguments or method.is_static:
        return False
    receiver = method.arguments[0].variable
    returns: list[Expression | None] = []
    bound: dict[Var, list[Expression]] = {}  # local -> what it is assigned
    reset: set[str] = set()  # fields of the receiver assigned in the body
    stack: list[Node] = list(method.body.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (FuncItem, ClassDef)):
            continue
        if isinstance(node, ReturnStmt):
            returns.append(node.expr)
        if isinstance(node, AssignmentStmt):
            for target in node.lvalues:
                if isinstance(target, NameExpr) and isinstance(target.node, Var):
                    bound.setdefault(target.node, []).append(node.rvalue)
                elif _field_of(target, receiver):
                    assert isinstance(target, MemberExpr)
                    reset.add(target.name)
        stack.extend(children(node))
    moved = {var for var, values in bound.items()  # `out = self.items; self.items = []`: moved out
             if all(isinstance(v, MemberExpr) and _field_of(v, receiver) and v.name in reset for v in values)}
    verdicts = [True if isinstance(r, NameExpr) and r.node in moved else _take_out(r, receiver)
                for r in returns]
    return bool(verdicts) and all(v is not False for v in verdicts) and any(v is True for v in verdicts)


def _take_out(e: Expression | None, receiver: Var) -> bool | None:
    """True for a pop out of a field of `receiver`, None for None, False for anything else."""
    if e is None or (isinstance(e, NameExpr) and e.fullname == "builtins.None"):
        return None
    if isinstance(e, ConditionalExpr):
        sides = [_take_out(e.if_expr, receiver), _take_out(e.else_expr, receiver)]
        if False in sides:
            return False
        return True if True in sides else None
    if not isinstance(e, CallExpr):
        return False
    callee = e.callee
    if isinstance(callee, MemberExpr) and callee.name in MOVE_OUT_METHODS:
        return _field_of(callee.expr, receiver)
    if isinstance(callee, RefExpr) and callee.fullname == "heapq.heappop" and len(e.args) == 1:
        return _field_of(e.args[0], receiver)
    return False


def _field_of(e: Expression, receiver: Var) -> bool:
    return isinstance(e, MemberExpr) and isinstance(e.expr, NameExpr) and e.expr.node is receiver


def _tuple_of_containers(t: Type) -> bool:
    """`-> tuple[list[Lease[...]], list[Lease[...]]]`: a tuple with a container of owned values in it."""
    shape = tuple_or_none(t)
    return shape is not None and any(holds_owned(item) for item in shape.items)


def _declared_returns(sig: Type | None, depth: int = 0) -> list[Type] | None:
    """The declared return types of calling a value of type `sig` (None: unknown)."""
    if sig is None or depth > 4:
        return None
    p = get_proper_type(sig)
    if isinstance(p, CallableType):
        return [p.ret_type]
    if isinstance(p, Overloaded):
        return [item.ret_type for item in p.items]
    if isinstance(p, UnionType):
        out: list[Type] = []
        for item in p.items:
            if isinstance(get_proper_type(item), NoneType):
                continue
            sub = _declared_returns(item, depth + 1)
            if sub is None:
                return None
            out.extend(sub)
        return out
    if isinstance(p, Instance):
        call = p.type.get_method("__call__")
        if isinstance(call, Decorator):
            return _declared_returns(call.var.type or call.func.type, depth + 1)
        if call is not None:
            return _declared_returns(call.type, depth + 1)
    return None

"""What the checker tracks: held leases, `@linear` instances, and `Borrowed` views.

All answers come from mypy types, so they hold for modules loaded from the
incremental cache too: linearity and consuming methods are recorded in
`TypeInfo.metadata` by `leases.check.plugin` while the defining module is
analysed, and `Borrowed[...]` survives in signatures as a type alias.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mypy.nodes import Decorator, OverloadedFuncDef, TypeInfo, Var
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypeAliasType,
    TypeVarType,
    UnionType,
    get_proper_type,
)

LEASE: Final = "leases.lease.Lease"
HELD: Final = "leases.state.Held"
BORROWED: Final = "leases.borrow.Borrowed"
LINEAR_DECORATOR: Final = "leases.linear.linear"
CONSUMES_DECORATOR: Final = "leases.linear.consumes"
LEASE_CONSUMING: Final = frozenset({"release"})
UNTRACKED_ESCAPE: Final = "leases.untracked.untracked"
"""The documented escape: `untracked(value, reason="...")` hands a value to code the checker cannot follow."""
DYNAMIC_CALLEES: Final = {
    "builtins.setattr": "setattr",
    "functools.partial": "functools.partial",
    "functools.partialmethod": "functools.partialmethod",
    "operator.methodcaller": "operator.methodcaller",
}
"""Callees whose arguments go where the checker cannot follow them (by reflection or later calls)."""
CASTS: Final = frozenset({"typing.cast", "typing_extensions.cast"})
META_KEY: Final = "leasecheck"
WEAK_MODULES: Final = ("weakref.", "_weakref.", "_weakrefset.")
AWAITABLES: Final = frozenset(
    {"typing.Coroutine", "typing.Awaitable", "asyncio.futures.Future", "asyncio.tasks.Task",
     "_asyncio.Future", "_asyncio.Task"}
)


@dataclass(frozen=True, slots=True)
class Tracked:
    """The kind of an owned value: a lease, or an instance of one linear class."""

    noun: str
    is_lease: bool

    @property
    def released(self) -> str:
        return "released" if self.is_lease else "consumed"


LEASE_KIND: Final = Tracked("Lease", True)


def is_linear_info(info: TypeInfo) -> bool:
    for base in info.mro:
        meta = base.metadata.get(META_KEY)
        if meta is not None and meta.get("linear"):
            return True
    return False


def consuming_method(info: TypeInfo, name: str) -> bool:
    """Whether calling `name` on an instance of `info` consumes the instance."""
    for base in info.mro:
        if base.fullname == LEASE:
            return name in LEASE_CONSUMING
        meta = base.metadata.get(META_KEY)
        if meta is not None and name in meta.get("consumes", ()):
            return True
    return False


def _is_held(t: Type) -> bool:
    p = get_proper_type(t)
    return isinstance(p, Instance) and p.type.fullname == HELD


def tracked_instance(p: ProperType) -> Tracked | None:
    if not isinstance(p, Instance):
        return None
    info = p.type
    if info.fullname == LEASE:
        return LEASE_KIND if len(p.args) == 2 and _is_held(p.args[1]) else None
    if is_linear_info(info):
        return Tracked(info.name, False)
    return None


def classify(t: Type | None) -> Tracked | None:
    """The tracked kind of a value of type `t` (unions count if any item is tracked)."""
    if t is None:
        return None
    p = get_proper_type(t)
    if isinstance(p, UnionType):
        for item in p.items:
            kind = classify(item)
            if kind is not None:
                return kind
        return None
    return tracked_instance(p)


def is_borrowed(t: Type | None, depth: int = 0) -> bool:
    """Whether `t` is spelled `Borrowed[...]` (possibly in a union or behind another alias)."""
    if t is None or depth > 8:
        return False
    if isinstance(t, TypeAliasType):
        alias = t.alias
        if alias is None:
            return False
        if alias.fullname == BORROWED:
            return True
        return is_borrowed(t._expand_once(), depth + 1)
    if isinstance(t, UnionType):
        return any(is_borrowed(item, depth + 1) for item in t.items)
    return False


def param_mode(t: Type) -> str:
    """How a parameter of declared type `t` receives a tracked argument.

    "borrow": `Borrowed[...]`, the caller keeps ownership; "own": a tracked
    type, ownership moves to the callee; "plain": anything else (a use).
    """
    if is_borrowed(t):
        return "borrow"
    if classify(t) is not None or owned_tuple(t):
        return "own"
    return "plain"


def owned_item(t: Type | None) -> bool:
    """Whether a container item of type `t` is owned by its container (a tracked type or a tuple of one)."""
    return t is not None and not is_borrowed(t) and (classify(t) is not None or owned_tuple(t))


def holds_owned(t: Type | None) -> bool:
    """Whether `t` is a container of owned values, or of containers of them (`dict[int, list[Lease]]`)."""
    item = container_item(t)
    return owned_item(item) or owned_item(container_item(item))


def owned_tuple(t: Type | None) -> bool:
    """Whether `t` is a tuple type with an item of a tracked type (`tuple[Lease[Full, Held], int]`)."""
    p = get_proper_type(t) if t is not None else None
    return isinstance(p, TupleType) and any(classify(item) is not None for item in p.items)


def without_none(t: Type | None) -> Type | None:
    """`list[Lease] | None` (what `d.get(k)` gives) as `list[Lease]`."""
    p = get_proper_type(t) if t is not None else None
    if isinstance(p, UnionType):
        rest = [x for x in p.items if not isinstance(get_proper_type(x), NoneType)]
        return UnionType.make_union(rest) if rest else t
    return t


def tuple_or_none(t: Type | None) -> TupleType | None:
    """The tuple type of `t` or of `t | None` (`tuple[Lease[Full, Held], Lease[Full, Held]] | None`), else None."""
    bare = without_none(t)
    p = get_proper_type(bare) if bare is not None else None
    return p if isinstance(p, TupleType) else None


def mentions_owned(t: Type | None, depth: int = 0) -> bool:
    """Whether a declared return type names a lease or linear class itself.

    Type variables do not count (values that flow through generic containers
    and helpers, `dict.get`, `list.pop`, `next`, are followed by the call
    rules instead), except `Self` of a tracked class: `Ticket.create()` owns.
    """
    if t is None or depth > 8:
        return False
    if isinstance(t, TypeAliasType) and t.alias is not None and t.alias.fullname == BORROWED:
        return False
    p = get_proper_type(t)
    if isinstance(p, TypeVarType):
        return p.id.is_self() and mentions_owned(p.upper_bound, depth + 1)
    if isinstance(p, UnionType):
        return any(mentions_owned(item, depth + 1) for item in p.items)
    if isinstance(p, TupleType):
        return any(mentions_owned(item, depth + 1) for item in p.items)
    if isinstance(p, Instance):
        if p.type.fullname == LEASE:
            return not (len(p.args) == 2 and isinstance(get_proper_type(p.args[1]), Instance)
                        and not _is_held(p.args[1]))
        if is_linear_info(p.type):
            return True
        if p.type.fullname in AWAITABLES and p.args:
            return mentions_owned(p.args[-1], depth + 1)
    return False


def tracks_anywhere(t: Type | None, depth: int = 0) -> bool:
    """Whether a declared type can hold an owned value: it names a tracked class somewhere
    (an argument, a tuple item, a union member), or is `Any` or a type variable."""
    if t is None or depth > 8:
        return True
    p = get_proper_type(t)
    if isinstance(p, (AnyType, TypeVarType)):
        return True
    if isinstance(p, UnionType):
        return any(tracks_anywhere(x, depth + 1) for x in p.items)
    if isinstance(p, TupleType):
        return any(tracks_anywhere(x, depth + 1) for x in p.items)
    if isinstance(p, Instance):
        if classify(p) is not None:
            return True
        return any(tracks_anywhere(a, depth + 1) for a in p.args)
    return False


def awaited_kind(t: Type | None) -> Type | None:
    """The type an awaitable of type `t` produces, if `t` is one of the awaitables the checker knows."""
    p = get_proper_type(t) if t is not None else None
    if isinstance(p, Instance) and p.type.fullname in AWAITABLES and p.args:
        return p.args[-1]
    return None


def generator_item(t: Type | None) -> Type | None:
    """The item type of a generator or iterator type (`Iterator[X]` -> X), else None."""
    p = get_proper_type(t) if t is not None else None
    if isinstance(p, Instance) and p.type.fullname in GENERATOR_TYPES and p.args:
        return p.args[0]
    return None


def is_weak_owner(fullname: str | None) -> bool:
    """Whether a callee belongs to `weakref`: its parameters never take ownership."""
    return fullname is not None and fullname.startswith(WEAK_MODULES)


CONTAINERS: Final = frozenset({
    "builtins.list", "builtins.dict", "builtins.set", "collections.deque",
    "collections.OrderedDict", "collections.defaultdict",
})
"""Standard containers: storing moves in, `pop`/`popitem`/`popleft` move out, subscripts borrow."""
KEYED_CONTAINERS: Final = frozenset({"builtins.dict", "collections.OrderedDict", "collections.defaultdict"})
"""The standard mappings: slots `d[k]` by key, `k in d` tests one, iterating them yields keys."""
MOVE_OUT_METHODS: Final = frozenset({"pop", "popitem", "popleft"})
GENERATOR_TYPES: Final = frozenset({
    "typing.Generator", "typing.Iterator", "typing.Iterable", "typing.AsyncGenerator",
    "typing.AsyncIterator", "typing.AsyncIterable",
})
CONTEXT_MANAGER_DECORATORS: Final = frozenset({
    "contextlib.contextmanager", "contextlib.asynccontextmanager",
})


@dataclass(frozen=True, slots=True)
class Field:
    """An owned attribute: it holds a tracked value, or a container of them."""

    name: str
    noun: str
    container: bool
    line: int


def container_item(t: Type | None) -> Type | None:
    """The item type of a standard container type (its last type argument), else None.

    A union of containers (`for locks in (self.device_locks, self.host_locks)`)
    has the union of their item types.
    """
    p = get_proper_type(t) if t is not None else None
    if isinstance(p, Instance) and p.type.fullname in CONTAINERS and p.args:
        return p.args[-1]
    if isinstance(p, Instance) and p.type.fullname == "builtins.tuple" and len(p.args) == 1:
        return p.args[0]  # `tuple[Lease[...], ...]`, what `*leases: Lease[...]` binds
    if isinstance(p, UnionType) and p.items:
        items = [container_item(item) for item in p.items]
        if all(item is not None for item in items):
            return UnionType.make_union([item for item in items if item is not None])
    return None


def items_noun(t: Type | None) -> str:
    """The noun of what a container of owned values (or of containers of them) holds."""
    item = container_item(t)
    kind = classify(item) or classify(container_item(item)) or tuple_kind(item)
    return kind.noun if kind is not None else "Lease"


def item_noun(t: Type | None) -> str | None:
    """What a tuple item (or an unpacking target) of type `t` owns: a tracked value's noun, "<noun>
    container" for a container of owned values (`tuple[list[Lease[...]], int]`), else None."""
    kind = classify(t)
    if kind is not None:
        return kind.noun
    return f"{items_noun(t)} container" if not is_borrowed(t) and holds_owned(t) else None


def property_return(t: Type | None, name: str) -> Type | None:
    """The declared return type of the property `name` of a value of type `t`, else None."""
    p = get_proper_type(t) if t is not None else None
    if not isinstance(p, Instance):
        return None
    sym = p.type.get(name)
    node = sym.node if sym is not None else None
    if isinstance(node, OverloadedFuncDef) and node.is_property and node.items:
        node = node.items[0]
    if isinstance(node, Decorator) and node.func.is_property:
        sig = get_proper_type(node.func.type)
        return sig.ret_type if isinstance(sig, CallableType) else None
    return None


def owned_field(name: str, t: Type | None, line: int) -> Field | None:
    """The field an attribute of declared type `t` is, if it owns what it holds."""
    if t is None or is_borrowed(t):
        return None
    kind = classify(t)
    if kind is not None:
        return Field(name, kind.noun, False, line)
    item = container_item(t)
    if item is not None and not is_borrowed(item):
        kind = classify(item)
        if kind is None:
            kind = tuple_kind(item)
        if kind is not None:
            return Field(name, kind.noun, True, line)
    return None


def tuple_kind(t: Type | None) -> Tracked | None:
    """The tracked kind a tuple type carries (`tuple[int, Lease[Full, Held]]`: a lease), else None."""
    p = get_proper_type(t) if t is not None else None
    if not isinstance(p, TupleType):
        return None
    return next((k for k in map(classify, p.items) if k is not None), None)


def declared_fields(info: TypeInfo) -> list[Field]:
    """The owned fields `info` itself declares (class-level or `self.x = ...` attributes)."""
    out: list[Field] = []
    for name, sym in info.names.items():
        node = sym.node
        if not isinstance(node, Var) or node.is_classvar or node.is_property:
            continue
        if not name.isidentifier():
            continue  # mypy's own bookkeeping entries ("x-redefinition")
        found = owned_field(name, node.type, node.line)
        if found is not None:
            out.append(found)
    return out


def unowned_fields(info: TypeInfo) -> list[Field]:
    """The owned fields `info` declares although it is not `@linear` (nothing releases them)."""
    return [] if is_linear_info(info) else [f for f in declared_fields(info) if not f.container]


def owned_fields(info: TypeInfo) -> dict[str, Field]:
    """Every owned field of `info`, inherited ones included."""
    out: dict[str, Field] = {}
    for base in reversed(info.mro):
        for f in declared_fields(base):
            out[f.name] = f
    return out


def field_of(base_type: Type | None, attr: str) -> Field | None:
    """The owned field `attr` of a value of type `base_type` (any union item that declares it)."""
    p = get_proper_type(base_type) if base_type is not None else None
    items = p.items if isinstance(p, UnionType) else [p]
    for item in items:
        ip = get_proper_type(item) if item is not None else None
        if isinstance(ip, Instance):
            sym = ip.type.get(attr)
            if sym is not None and isinstance(sym.node, Var) and not sym.node.is_property:
                return owned_field(attr, sym.node.type, sym.node.line)
    return None

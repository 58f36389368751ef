"""The abstract state of the ownership analysis and the frames abrupt exits go to.

Per variable a set of facts: held since a line, released or moved at a line,
borrowed, unknown (a tracked type from somewhere the checker cannot follow:
consuming or handing it on is `lease-untracked`), or nothing owned (None,
unbound, untracked). Paths merge by union,
so a set with more than one kind means "it depends on the path" and turns a
finding into its "may" form.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TypeAlias

from mypy.nodes import TypeInfo, Var

HELD: Final = "H"
RELEASED: Final = "R"
MOVED: Final = "M"
BORROWED: Final = "B"
NOTHING: Final = "N"
ENTRY: Final = "E"
"""An item of a container bound by a loop: the container still holds it (consuming it is allowed,
but then the container must be emptied before the function returns)."""
UNKNOWN: Final = "U"
"""A tracked type whose owner the checker cannot tell (a generic result, an unknown loop target)."""

Fact: TypeAlias = tuple[str, int, int, str]
"""(kind, line, column, noun): noun is "Lease" or a linear class name."""
Facts: TypeAlias = frozenset[Fact]
State: TypeAlias = dict[Var, Facts]

NOTHING_FACTS: Final[Facts] = frozenset({(NOTHING, 0, 0, "")})
MAX_ITERATIONS: Final = 32
TUPLE_NOUN: Final = "Tuple of owned values"
"""The noun of a tuple with owned items (a call's result, a tuple-typed parameter, a subscript of one)."""
"""Loop and comprehension fixpoints give up after this many passes."""


def borrowed(noun: str) -> Facts:
    return frozenset({(BORROWED, 0, 0, noun)})

def join(a: State | None, b: State | None) -> State | None:
    """The state where two paths merge (None: the path is unreachable)."""
    if a is None:
        return None if b is None else dict(b)
    if b is None:
        return dict(a)
    out = dict(a)
    for var, facts in b.items():
        mine = out.get(var)
        if mine is None:
            out[var] = facts | NOTHING_FACTS
        elif mine is not facts:
            out[var] = mine | facts
    for var in a:
        if var not in b:
            out[var] = out[var] | NOTHING_FACTS
    return out


def join_all(states: Iterable[State | None]) -> State | None:
    out: State | None = None
    for st in states:
        out = join(out, st) if out is not None else (None if st is None else dict(st))
    return out


def same(a: State | None, b: State | None) -> bool:
    if a is None or b is None:
        return a is b
    keys = a.keys() | b.keys()
    return all(a.get(k, NOTHING_FACTS) == b.get(k, NOTHING_FACTS) for k in keys)


def verb(noun: str) -> str:
    return "released" if noun == "Lease" else "consumed"


class Value:
    """Where the value of an expression comes from, as far as ownership goes."""

    __slots__ = ("kind", "line", "column", "var", "noun", "source", "items", "slot", "declared_view")

    def __init__(
        self,
        kind: str,
        line: int = 0,
        column: int = 0,
        var: Var | None = None,
        noun: str = "",
        source: str = "",
        items: tuple[str | None, ...] = (),
        slot: str = "",
        declared_view: bool = False,
    ) -> None:
        self.kind = kind  # fresh | var | borrowed | none | other | tuple | unknown | awaitable | display
        self.line = line
        self.column = column
        self.var = var
        self.noun = noun
        self.source = source
        self.items = items
        self.slot = slot  # "container[key]" a borrowed value was read from, if spelled simply
        self.declared_view = declared_view
        """A read of an attribute or property declared `Borrowed[...]`: a display of such values is a
        display of views (`[p.lease for p in pins]`), so storing one there lends."""


OTHER: Final = Value("other")
NEW: Final = Value("new")
"""An instance just constructed from an untracked class: its owned fields start empty."""
NONE: Final = Value("none")


class LoopFrame:
    __slots__ = ("breaks", "continues", "loop_locals")

    def __init__(self, loop_locals: frozenset[Var]) -> None:
        self.breaks: list[State] = []
        self.continues: list[State] = []
        self.loop_locals = loop_locals


class Pending:
    """A return/raise/break/continue waiting for a `finally` block to run."""

    __slots__ = ("kind", "state", "line", "raised")

    def __init__(self, kind: str, state: State, line: int, raised: list[TypeInfo] | None) -> None:
        self.kind = kind
        self.state = state
        self.line = line
        self.raised = raised


class TryFrame:
    __slots__ = ("handlers", "in_body", "body_exc", "caught", "escaping", "pending", "has_finally")

    def __init__(self, handlers: list[list[TypeInfo] | None], has_finally: bool) -> None:
        self.handlers = handlers  # per handler: the classes it catches, None = everything
        self.in_body = True
        self.body_exc: State | None = None
        self.caught: list[State | None] = [None] * len(handlers)
        self.escaping: State | None = None
        self.pending: list[Pending] = []
        self.has_finally = has_finally

    def catch_all(self) -> bool:
        return any(
            h is None or any(info.fullname == "builtins.BaseException" for info in h)
            for h in self.handlers
        )

    def handler_for(self, raised: list[TypeInfo] | None) -> int | None:
        for i, caught in enumerate(self.handlers):
            if caught is None:
                return i
            for info in caught:
                if info.fullname == "builtins.BaseException":
                    return i
                if raised is None:
                    if info.fullname == "builtins.Exception":
                        return i
                    continue
                if raised and all(r.has_base(info.fullname) for r in raised):
                    return i
        return None


class WithFrame:
    """A `with` block: what its exit may swallow, and what leaving it (any way) does to the names it
    lent to the block (`with g:` lends `g` until the block is left, a consuming `__exit__` consumes it)."""

    __slots__ = ("swallows", "swallowed", "restore")

    def __init__(self, swallows: bool, restore: dict[Var, Facts]) -> None:
        self.swallows = swallows
        self.swallowed: State | None = None
        self.restore = restore

    def leave(self, st: State) -> State:
        """The state just outside the block, for a state leaving it."""
        if not self.restore:
            return st
        out = dict(st)
        out.update(self.restore)
        return out


Frame: TypeAlias = LoopFrame | TryFrame | WithFrame


def exception_state(pre: State, post: State | None) -> State:
    """The state a handler sees if a simple statement raises.

    The statement's own hand-offs and lease releases count as done (a
    `Lease.release` that raises found the lease already released or
    revoked); a `@consumes` method of a linear class that raises leaves its
    receiver unconsumed, as at runtime, so `try: t.result() except Pending:
    t.abandon()` is correct. Whatever the statement acquired counts as not
    acquired.
    """
    if post is None:
        return pre
    out = pre
    for var, facts in post.items():
        before = pre.get(var)
        if before is None or before is facts:
            continue
        if all(f[0] == MOVED or (f[0] == RELEASED and f[3] == "Lease") for f in facts) and any(
            f[0] == HELD for f in before
        ):
            if out is pre:
                out = dict(pre)
            out[var] = facts
    return out


def dropped_message(var: Var, facts: Facts, held: list[Fact], how: str) -> str:
    """The message for a held value lost by overwriting or deleting its only name."""
    modal = "is" if len(held) == len(facts) else "may be"
    lines = sorted({f[1] for f in held})
    since = " or ".join(str(n) for n in lines)
    return f'{held[0][3]} "{var.name}" {modal} {how} while held (held since line {since})'


def spelled(e: object) -> str | None:
    """A stable spelling of a simple expression (`a`, `a.b`, `1`, `"k"`), else None."""
    from mypy.nodes import IntExpr, MemberExpr, NameExpr, StrExpr

    if isinstance(e, NameExpr):
        return e.name
    if isinstance(e, MemberExpr):
        base = spelled(e.expr)
        return None if base is None else f"{base}.{e.name}"
    if isinstance(e, IntExpr):
        return str(e.value)
    if isinstance(e, StrExpr):
        return repr(e.value)
    return None


def slot_of(container: object, key: object) -> str:
    c, k = spelled(container), spelled(key)
    return "" if c is None or k is None else f"{c}[{k}]"

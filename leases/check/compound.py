"""Loops, `try`, `with` and `match`: the statements that route abrupt exits.

A loop target is bound by what the loop iterates (`iteration`): each item of
an owning generator is owned by the body; an item of a container is an
"entry" the container still holds (consuming it marks the container's
entries released, and a container that outlives the call must be emptied
before it returns); items of anything else have an unknown owner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from mypy.nodes import (
    SliceExpr,
    DictionaryComprehension,
    ARG_STAR,
    ARG_STAR2,
    AwaitExpr,
    Block,
    BreakStmt,
    CallExpr,
    Decorator,
    Expression,
    ForStmt,
    FuncBase,
    GeneratorExpr,
    IndexExpr,
    IntExpr,
    LambdaExpr,
    ListComprehension,
    ListExpr,
    MatchStmt,
    MemberExpr,
    NameExpr,
    Node,
    RaiseStmt,
    RefExpr,
    ReturnStmt,
    StarExpr,
    TryStmt,
    TupleExpr,
    TypeInfo,
    Var,
    WhileStmt,
    WithStmt,
    YieldExpr,
    YieldFromExpr,
)
from mypy.patterns import (
    AsPattern,
    ClassPattern,
    OrPattern,
    Pattern,
    SequencePattern,
    SingletonPattern,
    StarredPattern,
    ValuePattern,
)
from mypy.expandtype import expand_type_by_instance
from mypy.types import (
    CallableType,
    FunctionLike,
    Instance,
    NoneType,
    TupleType,
    Type,
    TypeType,
    UnionType,
    get_proper_type,
)

from leases.check import codes
from leases.check.facts import (
    ENTRY,
    HELD,
    MAX_ITERATIONS,
    MOVED,
    NOTHING,
    NOTHING_FACTS,
    OTHER,
    RELEASED,
    TUPLE_NOUN,
    UNKNOWN,
    Value,
    slot_of,
    spelled,
    Facts,
    LoopFrame,
    State,
    TryFrame,
    WithFrame,
    borrowed,
    join,
    join_all,
    same,
)
from leases.check.model import (
    without_none,
    tuple_or_none,
    KEYED_CONTAINERS,
    holds_owned,
    LEASE,
    UNTRACKED_ESCAPE,
    Tracked,
    classify,
    container_item,
    is_borrowed,
    is_linear_info,
    owned_item,
)
from leases.check.ownership import OwnershipBase
from leases.check.walk import children, name_refs, target_names


class CompoundMixin(OwnershipBase):
    """Loop, `try`, `with` and `match` analysis."""

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
        self.s.muted += 1
        try:
            for _ in range(MAX_ITERATIONS):
                frame = LoopFrame(frame_locals)
                self.s.frames.append(frame)
                try:
                    _, end = one_pass(dict(head))
                finally:
                    self.s.frames.pop()
                if end is not None:
                    self.loop_exit_check(frame, end, "loop-end", end_line)
                new_head = join_all([entry, end, *frame.continues])
                assert new_head is not None
                if same(new_head, head):
                    break
                head = new_head
            else:
                self.s.mod.note(end_line, 0, f"partial: the loop ending at line {end_line} reached no "
                                           f"fixpoint in {MAX_ITERATIONS} passes")
        finally:
            self.s.muted -= 1
        frame = LoopFrame(frame_locals)
        self.s.frames.append(frame)
        try:
            exit_state, end = one_pass(dict(head))
        finally:
            self.s.frames.pop()
        if end is not None:
            self.loop_exit_check(frame, end, "loop-end", end_line)
        return exit_state, frame

    def while_stmt(self, s: WhileStmt) -> None:
        assert self.s.st is not None
        entry = self.s.st
        forever = (isinstance(s.expr, NameExpr) and s.expr.fullname == "builtins.True") or (
            isinstance(s.expr, IntExpr) and s.expr.value != 0
        )
        loop_locals = self.loop_locals(s, [s.body])
        self.never_drains(s)

        def one_pass(head: State) -> tuple[State | None, State | None]:
            self.s.st = head
            self.pop_tested(list(self.s.pop_markers))  # each iteration asks afresh
            t, f = self.rules.cond(s.expr)
            self.s.st = t
            if t is not None:
                self.rules.block(s.body)
            return (None if forever else f), self.s.st

        exit_state, frame = self.run_loop(entry, one_pass, loop_locals, self._last_line(s.body))
        self.s.st = exit_state
        if self.s.st is not None and s.else_body is not None:
            self.rules.block(s.else_body)
        self.s.st = join_all([self.s.st, *frame.breaks])
        self.pop_tested(list(self.s.pop_markers))

    def never_drains(self, s: WhileStmt) -> None:
        """`while pins:` over a container of owned values whose body cannot change `pins`.

        The body calls nothing, never names `pins` (or the object holding it)
        and never leaves the loop: it spins, and what `pins` holds is never
        released. A body that does any of those is assumed to drain it.
        """
        name = spelled(s.expr) if isinstance(s.expr, (NameExpr, MemberExpr)) else None
        item = container_item(self.s.types.get(s.expr))
        if name is None or item is None or is_borrowed(item):
            return
        kind = classify(item)
        if kind is None:
            return
        root = name.split(".", 1)[0]
        stack: list[Node] = [s.body]
        while stack:
            node = stack.pop()
            if isinstance(node, (CallExpr, BreakStmt, ReturnStmt, RaiseStmt, YieldExpr,
                                 YieldFromExpr, AwaitExpr, FuncBase, LambdaExpr)):
                return
            if isinstance(node, NameExpr) and node.name == root:
                return
            stack.extend(children(node))
        self.report(s.line, s.column, codes.LEAK.code,
                    f'The loop "while {name}:" never takes anything out of "{name}": it does not '
                    f"end, and the {kind.noun} values there are never {kind.released}; pop one "
                    f"in each iteration")

    def for_stmt(self, s: ForStmt) -> None:
        mode, container = self.iteration(s.expr)
        iterated = self.rules.ev(s.expr)
        anonymous = self.anonymous_container(iterated) if mode == "entry" else None
        if anonymous is None:
            self.lend(iterated)
        if self.s.st is None:
            return
        entry = self.s.st
        loop_locals = self.loop_locals(s, [s.index, s.body])
        spent = anonymous or self.spendable(mode, container)
        targets = [v for v in map(self.local_var, target_names(s.index)) if v is not None]
        drained: list[bool] = []
        earlier = self.earlier_releases(mode, container)

        def one_pass(head: State) -> tuple[State | None, State | None]:
            self.s.st = dict(head)
            self.pop_tested(list(self.s.pop_markers))
            self.bind_loop_target(s.index, mode, container, s.line)
            if mode == "entry":
                self.keyed_entry(s.index, s.expr)
                self.released_before(targets, earlier)
            self.rules.block(s.body)
            frame = self.s.frames[-1]
            if spent is not None and isinstance(frame, LoopFrame):
                drained.append(all(self.consumed_all(st, targets) and self.contents_spent(st, targets)
                                   for st in (self.s.st, *frame.continues)))
            return head, self.s.st

        exit_state, frame = self.run_loop(entry, one_pass, loop_locals, self._last_line(s.body))
        if spent is not None and exit_state is not None and drained and drained[-1]:
            exit_state[spent] = NOTHING_FACTS  # every item was consumed or handed on: the container is spent
        self.s.st = exit_state
        if self.s.st is not None and s.else_body is not None:
            self.rules.block(s.else_body)
        self.s.st = join_all([self.s.st, *frame.breaks])
        self.pop_tested(list(self.s.pop_markers))

    def spendable(self, mode: str, container: Expression | None) -> Var | None:
        """What a loop over `container` spends when it consumes or hands on every item: a local
        container, a view of a slot, a parameter's contents, or an owning container field."""
        if mode not in ("entry", "nested") or container is None:
            return None
        spent = self.held_local_container(container)
        if spent is None and mode == "entry" and isinstance(container, IndexExpr):
            spent = self.slot_view(container)  # `for lease in self.pins[node]:` then `del self.pins[node]`
        if spent is None and mode == "entry":
            spent = self.held_contents(container)
        if spent is None and mode == "entry" and isinstance(container, MemberExpr):
            place = self.local_var(container)  # `for lease in self.table.values()`: may spend the field
            if place is not None and place in self.s.container_places \
                    and any(f[0] == HELD for f in self.facts(place)):
                spent = place
        return spent

    def copy_of(self, container: Expression) -> str | None:
        """The spelling of the container a local holds a live copy of every entry of (`batch =
        list(self.pending)`, not cleared since), else None."""
        found = self.copy_held_by(self.local_var(container) if isinstance(container, NameExpr) else None)
        return found[0] if found is not None else None

    def anonymous_container(self, v: Value) -> Var | None:
        """`for lease in make_batch():` over a container of owned values handed over by a call:
        a name of its own, held until the loop spends it (a `break` leaves the rest unreleased)."""
        if v.kind != "display" or self.s.st is None:
            return None
        var = Var(f"{v.source}()", None)
        self.s.st[var] = frozenset({(HELD, v.line, v.column, f"{v.noun} container")})
        return var

    def contents_spent(self, st: State | None, targets: list[Var]) -> bool:
        """At the end of a loop body (or a `continue`): no target still holds the items of a container."""
        if st is None:
            return True
        for var in targets:
            marker = self.s.contents.get(var)
            if marker is not None and any(f[0] == HELD for f in st.get(marker, ())):
                return False
        return True

    @staticmethod
    def consumed_all(st: State | None, targets: list[Var]) -> bool:
        """At the end of a loop body (or a `continue`): each target holding an item was consumed or moved."""
        if st is None:
            return True
        for var in targets:
            facts = st.get(var, ())
            if any(fact[0] == ENTRY for fact in facts):
                return False
        return True

    def iteration(self, it: Expression) -> tuple[str, Expression | None]:
        """What a loop over `it` binds: "owned" items (an owning generator), "entry" (items of a
        container, which still holds them), "borrowed", "unknown" (a tracked type from anything
        else), or "" (nothing tracked). The second item is the container, for "entry"."""
        if isinstance(it, CallExpr):
            callee = it.callee
            if isinstance(callee, RefExpr) and callee.fullname == UNTRACKED_ESCAPE:
                return "", None
            source = self.iterated_container(it)
            if source is not None:
                return self.container_mode(source), source
            produced = self.s.calls.generator_yields(it)
            if produced is not None:
                if is_borrowed(produced) or classify(produced) is None:
                    return ("borrowed" if classify(produced) is not None else ""), None
                return "owned", None
        found = self.container_mode(it) if not _is_mapping(self.s.types.get(it)) else ""
        if found:
            return found, it
        t = self.s.types.get(it)
        p = get_proper_type(t) if t is not None else None
        if isinstance(p, Instance) and p.type.fullname in ONE_SHOT and p.args \
                and classify(p.args[0]) is not None:
            return ("borrowed" if is_borrowed(p.args[0]) else "owned"), None
        if isinstance(p, Instance) and p.type.fullname not in ONE_SHOT:
            yielded = _iter_item(p)  # `for lease in node.full_pins:` over a `PinSet`: its `__iter__` lends
            if yielded is not None and is_borrowed(yielded) and classify(yielded) is not None:
                return "borrowed", None
        if isinstance(p, Instance) and p.args and _tracked_somewhere(p.args[-1]):
            return "unknown", None
        if isinstance(p, TupleType) and any(_tracked_somewhere(x) for x in p.items):
            return "unknown", None
        return "", None

    def iterated_container(self, it: Expression, viewed: bool = False) -> Expression | None:
        """The container whose items `it` iterates: `c.values()`, `list(c.items())`, `enumerate(c)`;
        not a mapping itself (`for key in self.table`, `list(self.table)`: its keys), unless `viewed`
        through `.values()` or `.items()`."""
        if not isinstance(it, CallExpr):
            t = self.s.types.get(it)
            return it if container_item(t) is not None and (viewed or not _is_mapping(t)) else None
        callee = it.callee
        if isinstance(callee, MemberExpr) and callee.name in ("values", "items") and not it.args:
            return self.iterated_container(callee.expr, viewed=True)
        if isinstance(callee, MemberExpr) and callee.name == "copy" and not it.args:
            return self.iterated_container(callee.expr, viewed)
        if isinstance(callee, NameExpr) and callee.fullname in COPIES and it.args:
            return self.iterated_container(it.args[0])
        if isinstance(callee, NameExpr) and callee.fullname == "builtins.zip" and _strict(it):
            held = [c for c in (self.iterated_container(a) for a in it.args if a is not None)
                    if c is not None and self.container_mode(c)]
            if len(held) == 1:  # `zip(names, pins, strict=True)`: every entry of `pins`, or a raise
                return held[0]
        return None

    def copy_source(self, e: Expression, values: bool = False) -> Expression | None:
        """The container `e` copies every entry of: `list(c)`, `sorted(c)`, `c.copy()`,
        `[p for p in c]`, `(p for p in c)`, or `c` itself; None if `e` is none of those.
        With `values`, a mapping `e` is read for its values (`self.table.update(batch)`)."""
        if values and isinstance(e, (NameExpr, MemberExpr, IndexExpr)):
            source = self.iterated_container(e, viewed=True)
            return source if source is not None and self.container_mode(source) == "entry" else None
        if isinstance(e, (ListComprehension, GeneratorExpr, DictionaryComprehension)):
            g = e.generator if isinstance(e, ListComprehension) else e
            made = g.value if isinstance(g, DictionaryComprehension) else g.left_expr
            if len(g.sequences) != 1 or g.condlists[0] or not isinstance(made, NameExpr):
                return None  # `{g.bucket: g for g in fresh}` copies every entry of `fresh`
            names = target_names(g.indices[0])
            kept = [n for n in names if n.name == made.name]
            others = [n for n in names if n.name != made.name]
            if len(kept) != 1 or any(classify(self.s.types.get(n)) is not None for n in others):
                return None  # `(lease for lease, _ in self.queue)` keeps the one owned item of each pair
            return self.copy_source(g.sequences[0])
        source = self.iterated_container(e)
        return source if source is not None and self.container_mode(source) == "entry" else None

    def copy_bound(self, target: Expression, rvalue: Expression) -> None:
        """`out = list(self.pins)`: `out` holds a copy of every entry (see `OwnershipBase.copied`);
        so does an owning slot or field (`self.groups[k] = list(pins)`)."""
        stored = self.s.types.get(target)
        if stored is None and isinstance(target, IndexExpr):
            stored = container_item(self.s.types.get(target.base))
        if isinstance(target, (IndexExpr, MemberExpr)) and holds_owned(stored) \
                and not isinstance(rvalue, (NameExpr, MemberExpr)):
            source = self.copy_source(rvalue)
            if source is not None:
                self.copied(source, None, target.line, target.column)
            return
        if not isinstance(target, NameExpr) or rvalue is target:
            return
        var = self.local_var(target)
        if var is None:
            return
        self.s.subsets.pop(var, None)
        source = self.copy_source(rvalue) if not isinstance(rvalue, NameExpr) else None
        if source is not None:
            self.copied(source, var, target.line, target.column)
            return
        subset = self.subset_source(rvalue)
        if subset is not None:
            self.s.subsets[var] = subset

    def subset_source(self, e: Expression) -> str | None:
        """`[p for p in self.pins if p.stale]`, `list(filter(...))`-like comprehensions: the spelling of the
        outliving container whose entries the result selects (views of them), else None; a slice
        (`self.pins[:n]`) selects some too."""
        if isinstance(e, IndexExpr) and isinstance(e.index, SliceExpr):
            source = self.iterated_container(e.base)
            if source is None or self.container_mode(source) != "entry" or not self.outlives(source):
                return None
            return spelled(source)
        if not isinstance(e, ListComprehension) or len(e.generator.sequences) != 1:
            return None
        g = e.generator
        if not isinstance(g.left_expr, NameExpr) or not any(n.name == g.left_expr.name
                                                             for n in target_names(g.indices[0])):
            return None
        source = self.iterated_container(g.sequences[0])
        if source is None or self.container_mode(source) != "entry" or not self.outlives(source):
            return None
        return spelled(source)

    def container_mode(self, e: Expression) -> str:
        t = self.s.types.get(e)
        p = get_proper_type(t) if t is not None else None
        if isinstance(p, Instance) and p.type.fullname == "builtins.tuple" and p.args:
            item: Type | None = p.args[0]
        else:
            item = container_item(t)
        if item is None:
            return ""
        p = get_proper_type(item)
        if isinstance(p, TupleType) and any(_tracked_somewhere(x) for x in p.items):
            return "entry"
        if classify(item) is None:
            return "nested" if owned_item(container_item(item)) else ""
        return "borrowed" if is_borrowed(item) else "entry"

    def earlier_releases(self, mode: str, container: Expression | None) -> tuple[Facts, bool]:
        """Where an earlier loop released or handed on the entries of `container` that it still holds
        (`for p in self.pins: p.release()` with no `clear()` since), and whether it did on every
        path: a loop over them again sees them so."""
        if mode != "entry" or container is None or self.s.st is None:
            return NOTHING_FACTS, False
        name = slot_of(container.base, container.index) if isinstance(container, IndexExpr) else spelled(container)
        marker = self.s.slot_markers.get(f"{name}[*]") if name else None
        facts = self.s.st.get(marker, NOTHING_FACTS) if marker is not None else NOTHING_FACTS
        gone = frozenset(f for f in facts if f[0] in (RELEASED, MOVED))
        return gone, bool(gone) and gone == facts

    def released_before(self, targets: list[Var], earlier: tuple[Facts, bool]) -> None:
        """The loop's targets are entries an earlier loop released (or handed on), on every path or on some."""
        gone, everywhere = earlier
        if not gone or self.s.st is None:
            return
        for var in targets:
            facts = self.s.st.get(var, NOTHING_FACTS)
            if any(f[0] == ENTRY for f in facts):
                self.s.st[var] = gone if everywhere else facts | gone

    def keyed_entry(self, target: Expression, it: Expression) -> None:
        """`for i, p in enumerate(self.spares)`, `for k, p in self.table.items()`: `p` is what
        `self.spares[i]` (`self.table[k]`) holds, so a store there while `p` may be live drops it."""
        if not (isinstance(target, TupleExpr) and len(target.items) == 2 and isinstance(it, CallExpr)):
            return
        key, item = target.items
        callee = it.callee
        if isinstance(callee, NameExpr) and callee.fullname == "builtins.enumerate" and len(it.args) == 1:
            container = it.args[0]
        elif isinstance(callee, MemberExpr) and callee.name == "items" and not it.args:
            container = callee.expr
        else:
            return
        var = self.local_var(item) if isinstance(item, NameExpr) else None
        slot = slot_of(container, key) if isinstance(key, NameExpr) else ""
        if var is not None and slot:
            self.s.slots[var] = slot

    def bind_loop_target(self, target: Expression, mode: str, container: Expression | None,
                         line: int) -> None:
        """Bind a `for` (or comprehension) target according to `iteration`'s answer."""
        if self.s.st is None:
            return
        if isinstance(target, (TupleExpr, ListExpr)):
            for item in target.items:
                self.bind_loop_target(item, mode, container, line)
            return
        var = self.local_var(target) if isinstance(target, NameExpr) else None
        kind = classify(var.type) if var is not None else None
        if mode == "nested" and var is not None and kind is None and container is not None \
                and self.held_local_container(container) is not None:
            # `for bucket in groups.values()` over a local container of containers: each bucket's
            # items are the outer container's until the body releases or hands them on
            self.bind(target, OTHER, line)
            self.setup_contents(var, var.type, target.line, target.column, self.s.st)
            return
        if not mode or var is None or kind is None or not isinstance(target, NameExpr):
            self.bind(target, OTHER, line)
            if var is not None and container is not None and self.outlives(container) \
                    and container_item(var.type) is not None:
                self.s.aliases.add(var)  # `for group in self.groups.values()`: group lives on
            return
        if mode == "owned":
            self.bind_local(var, Value("fresh", target.line, target.column, noun=kind.noun,
                                       source="the generator"), target.line, target.column)
            return
        self.bind_local(var, OTHER, target.line, target.column)
        if mode == "borrowed":
            self.s.st[var] = borrowed(kind.noun)
        elif mode == "unknown":
            self.s.st[var] = frozenset({(UNKNOWN, target.line, target.column, kind.noun)})
        else:
            name = spelled(container) if container is not None else None
            if isinstance(container, IndexExpr):
                name = slot_of(container.base, container.index) or None
            source = self.copy_of(container) if container is not None else None
            if source is None and isinstance(container, NameExpr):
                picked = self.local_var(container)
                source = self.s.subsets.get(picked) if picked is not None else None
            elif source is None and container is not None:
                source = self.subset_source(container)  # `for p in [p for p in self.pins if p.stale]:`
            if source is not None:
                name = source  # `for m in list(self.pending)` via `batch`: the entries are the field's
            marker = self.marker(f"{name or '<container>'}[*]")
            if name is not None and (source is not None or self.outlives(container)):
                self.s.entries[marker] = name
            self.s.entry_of[var] = marker
            self.s.st[var] = frozenset({(ENTRY, target.line, target.column, kind.noun)})

    def container_view(self, target: Expression, rvalue: Expression) -> None:
        """`pins = self.pins.get(node, [])`: a local naming a container held in one that outlives the call.

        Its entries are the outer container's (a loop releasing them must
        also empty it), as for a loop target over the outer's values. It
        holds them until a test finds it empty or a loop spends them
        (`setup_contents`), so `del self.pins[node]` knows whether the list
        it drops may still hold any (`leases.check.statements.del_stmt`)."""
        if not isinstance(target, NameExpr):
            return
        var = self.local_var(target)
        if var is None or not owned_item(container_item(without_none(var.type))):
            return
        base: Expression | None = None
        key: Expression | None = None
        if isinstance(rvalue, IndexExpr):
            base, key = rvalue.base, rvalue.index
        elif isinstance(rvalue, CallExpr) and isinstance(rvalue.callee, MemberExpr) \
                and rvalue.callee.name in ("get", "setdefault") and rvalue.args:
            base, key = rvalue.callee.expr, rvalue.args[0]
        if base is not None and key is not None and container_item(self.s.types.get(base)) is not None \
                and self.outlives(base):
            self.s.aliases.add(var)
            slot = slot_of(base, key)
            if slot:
                self.s.view_slots[var] = slot
                self.setup_contents(var, without_none(var.type), target.line, target.column, self.s.st)

    def slot_view(self, item: IndexExpr) -> Var | None:
        """The contents marker of a view of the slot `item` spells (`self.pins[node]`), made if none is."""
        slot = slot_of(item.base, item.index)
        if not slot or self.s.st is None or not owned_item(container_item(container_item(
                self.s.types.get(item.base)))):
            return None
        for var, at in self.s.view_slots.items():
            if at == slot and var in self.s.contents:
                return self.s.contents[var]
        view = Var(f"{slot} (iterated)", None)
        self.s.view_slots[view] = slot
        self.setup_contents(view, container_item(self.s.types.get(item.base)), item.line, item.column, self.s.st)
        return self.s.contents.get(view)

    def outlives(self, container: Expression | None) -> bool:
        """Whether a container outlives this call: a parameter, a field, anything but a local."""
        if isinstance(container, NameExpr):
            var = container.node
            if isinstance(var, Var) and var in self.s.aliases:
                return True
            if isinstance(var, Var) and var in self.s.locals:
                return self.s.fn is not None and any(
                    a.variable is var and a.kind not in (ARG_STAR, ARG_STAR2)
                    for a in self.s.fn.arguments
                )
            return True
        if isinstance(container, IndexExpr):
            return self.outlives(container.base)  # `for ck in self.by_gen[gen]:` is the field's list
        return isinstance(container, MemberExpr)

    @staticmethod
    def _last_line(b: Block) -> int:
        if not b.body:
            return b.line
        last = b.body[-1]
        return last.end_line if last.end_line is not None else last.line


    def try_stmt(self, s: TryStmt) -> None:
        handlers: list[list[TypeInfo] | None] = []
        for texpr in s.types:
            handlers.append(None if texpr is None else self.handler_classes(texpr))
        frame = TryFrame(handlers, s.finally_body is not None)
        self.s.frames.append(frame)
        try:
            self.rules.block(s.body)
            body_out = self.s.st
            frame.in_body = False
            outs: list[State | None] = []
            for i, handler in enumerate(s.handlers):
                self.s.st = join(frame.body_exc, frame.caught[i])
                if self.s.st is None:
                    continue
                target = s.vars[i]
                if target is not None:
                    self.bind(target, OTHER, handler.line)
                self.rules.block(handler)
                outs.append(self.s.st)
            if not frame.catch_all():
                frame.escaping = join(frame.escaping, frame.body_exc)
            self.s.st = body_out
            if self.s.st is not None and s.else_body is not None:
                self.rules.block(s.else_body)
            outs.append(self.s.st)
            normal = join_all(outs)
        finally:
            self.s.frames.pop()
        if s.finally_body is None:
            self.s.st = frame.escaping
            self.record_exception()
            self.s.st = normal
            return
        fin = s.finally_body
        everything = join_all([normal, frame.escaping, *(p.state for p in frame.pending)])
        if everything is None:
            self.s.st = None
            return
        self.s.st = everything
        self.rules.block(fin)
        self.s.muted += 1
        try:
            escaping = self.run_block_from(fin, frame.escaping)
            resumed = [(p, self.run_block_from(fin, p.state)) for p in frame.pending]
            after_normal = self.run_block_from(fin, normal)
        finally:
            self.s.muted -= 1
        if escaping is not None:
            self.s.st = escaping
            self.record_exception()
        for p, st in resumed:
            if st is not None:
                self.unwind(p.kind, st, p.line, p.raised)
        self.s.st = after_normal

    def run_block_from(self, b: Block, st: State | None) -> State | None:
        if st is None:
            return None
        self.s.st = dict(st)
        self.rules.block(b)
        return self.s.st

    def handler_classes(self, e: Expression) -> list[TypeInfo] | None:
        """The classes an `except` clause catches, from the clause's type (a tuple variable too).

        None when they cannot be known: the handler is then taken to catch everything.
        """
        items = e.items if isinstance(e, TupleExpr) else [e]
        out: list[TypeInfo] = []
        for item in items:
            if isinstance(item, RefExpr) and isinstance(item.node, TypeInfo):
                out.append(item.node)
                continue
            found = _caught_by_type(self.s.types.get(item))
            if found is None:
                return None
            out.extend(found)
        return out

    def with_stmt(self, s: WithStmt) -> None:
        after_block: list[Var] = []
        kept: list[tuple[Var, Facts]] = []
        swallows = False
        for expr, target in zip(s.expr, s.target):
            v = self.rules.ev(expr)
            if self.s.st is None:
                return
            exit_name = "__aexit__" if s.is_async else "__exit__"
            if v.kind == "fresh" and not self.s.calls.is_consuming(self.s.types.get(expr), exit_name):
                self.report(v.line, v.column, codes.DISCARDED.code,
                            f'{v.noun} returned by "{v.source}" is a context manager whose {exit_name} does not '
                            f"consume it, so nothing owns it after the block; bind it to a name and consume "
                            f"it after the block")
            if v.kind == "var" and v.var is not None:
                self.check_use(v.var, v.line, v.column)
                facts = self.facts(v.var)
                held = [f for f in facts if f[0] == HELD]
                if held:
                    self.s.st[v.var] = borrowed(held[0][3])
                    if self.s.calls.is_consuming(self.s.types.get(expr), exit_name):
                        after_block.append(v.var)
                    else:
                        kept.append((v.var, facts))
            swallows = swallows or self.exit_swallows(expr, s.is_async)
            if target is not None:
                var = self.local_var(target)
                kind = classify(var.type) if var is not None else None
                if var is not None and kind is not None:
                    self.bind_local(var, OTHER, target.line, target.column)
                    self.s.st[var] = borrowed(kind.noun)
                    after_block.append(var)
                else:
                    self.bind(target, OTHER, s.line)
        restore: dict[Var, Facts] = dict(kept)
        for var in after_block:
            noun = "Lease" if var.type is None else (classify(var.type) or Tracked("Lease", True)).noun
            restore[var] = frozenset({(RELEASED, s.line, s.column, noun)})
        frame = WithFrame(swallows, restore) if swallows or restore else None
        if frame is not None:
            self.s.frames.append(frame)
        try:
            self.rules.block(s.body)
        finally:
            if frame is not None:
                self.s.frames.pop()
        if frame is not None and frame.swallowed is not None:
            self.s.st = join(self.s.st, frame.swallowed)
        if self.s.st is not None and frame is not None:
            self.s.st = frame.leave(self.s.st)

    def exit_swallows(self, cm: Expression, is_async: bool) -> bool:
        """Whether the context manager's `__exit__` is declared to return `bool`."""
        t = self.s.types.get(cm)
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
        items: list[Value] | None = None
        temps: list[Var] = []
        if isinstance(s.subject, TupleExpr) and not any(
            isinstance(i, StarExpr) for i in s.subject.items
        ):
            items = []
            for i, item in enumerate(s.subject.items):
                v = self.rules.ev(item)
                if v.kind == "fresh" and self.s.st is not None:
                    temp = Var(f"match subject item {i}", None)
                    self.s.st[temp] = frozenset({(HELD, v.line, v.column, v.noun)})
                    temps.append(temp)
                    v = Value("var", v.line, v.column, var=temp)
                elif v.kind != "var":
                    self.lend(v)
                items.append(v)
        subject = self.local_var(s.subject)
        if items is None:
            v = self.rules.ev(s.subject)
            if v.kind in ("fresh", "tuple") and subject is None and self.s.st is not None:
                # `match self.reserve.pop(k, None):`, `match take_pair():` owns the value
                subject = Var("match subject", self.s.types.get(s.subject))
                self.s.st[subject] = frozenset({(HELD, v.line, v.column, v.noun if v.kind == "fresh" else TUPLE_NOUN)})
                temps.append(subject)
            else:
                self.lend(v)
        if self.s.st is None:
            return
        remaining: State | None = self.s.st
        outs: list[State | None] = []
        whole = Value("var", s.subject.line, s.subject.column, var=subject) if subject else None
        subject_type = self.s.types.get(s.subject)
        enum_left = _enum_members(subject_type)
        classes_left = _class_options(subject_type)
        arity = len(items) if items is not None else _tuple_arity(subject_type)
        for pattern, guard, body in zip(s.patterns, s.guards, s.bodies):
            if remaining is None:
                break
            self.s.st = dict(remaining)
            presence = self.pattern_presence(pattern) if subject is not None else None
            if subject is not None and presence is not None:
                self.s.st = self.narrow(self.s.st, subject, present=presence)
            self.bind_pattern(pattern, whole, items, subject_type, temps)
            if guard is not None:  # a failed guard leaves the subject where it was: the captures were views
                t, _ = self.rules.cond(guard)
                self.s.st = t
            elif self.irrefutable(pattern, arity):
                remaining = None
            else:
                if subject is not None and presence is not None and (
                        presence is True and _covers(pattern, subject_type) or presence is False):
                    remaining = self.narrow(remaining, subject, present=not presence)
                if presence is False and arity is None and items is None:
                    held = tuple_or_none(subject_type)  # after `case None:`, `case (a, b):` takes the rest
                    arity = len(held.items) if held is not None else None
                if items is not None and isinstance(pattern, SequencePattern):
                    remaining = self.remaining_items(pattern, items, remaining)
                if enum_left is not None:
                    enum_left -= _enum_values(pattern)
                    if not enum_left:
                        remaining = None
                if classes_left is not None:  # `case Arrived(): ... case Failed():` over `Arrived | Failed`
                    classes_left = {name: info for name, info in classes_left.items()
                                    if not _matches_all_of(pattern, info)}
                    if not classes_left:
                        remaining = None
            if self.s.st is not None:
                self.rules.block(body)
            outs.append(self.s.st)
        outs.append(remaining)
        self.s.st = join_all(outs)
        if temps and self.s.st is not None:
            self.check_exit(self.s.st, "match", s.line, only=temps)
            for temp in temps:
                self.s.st.pop(temp, None)

    def remaining_items(self, p: SequencePattern, items: list[Value], remaining: State | None) -> State | None:
        """After `case (Lease() as a, b):` fails on `(x, y)`, `x` is None: a sequence pattern all of whose
        items but one always match where it is tried narrows that one item in the cases after it."""
        if remaining is None or len(p.patterns) != len(items):
            return remaining
        refutable: list[tuple[Var, bool]] = []
        for sub, item in zip(p.patterns, items):
            if self.irrefutable(sub):
                continue
            presence = self.pattern_presence(sub)
            facts = remaining.get(item.var, NOTHING_FACTS) if item.var is not None else NOTHING_FACTS
            if presence is None or item.var is None:
                return remaining
            absent = all(f[0] == NOTHING for f in facts)
            present = not absent and not any(f[0] == NOTHING for f in facts) and _covers(sub, item.var.type)
            if (presence is False and absent) or (presence is True and present):
                continue  # always matches here
            refutable.append((item.var, presence))
        if not refutable:
            return None
        if len(refutable) == 1:
            var, presence = refutable[0]
            return self.narrow(remaining, var, present=not presence)
        return remaining

    def unpacked_subject(self, p: SequencePattern, whole: Value, subject_type: Type | None,
                         temps: list[Var]) -> list[Value] | None:
        """`case (a, b):` on a name holding a tuple of owned values: move it into one temporary per item."""
        var = whole.var
        proper = tuple_or_none(subject_type)  # a `tuple[...] | None` subject is a tuple in this case
        if var is None or self.s.st is None or proper is None \
                or len(proper.items) != len(p.patterns) \
                or any(isinstance(sub, StarredPattern) for sub in p.patterns) \
                or not any(f[0] == HELD for f in self.facts(var)):
            return None
        self.transfer(whole, "unpacking it", p.line)
        out: list[Value] = []
        for i, item in enumerate(proper.items):
            kind = classify(item)
            if kind is None or is_borrowed(item):
                out.append(OTHER)
                continue
            temp = Var(f"item {i} of {var.name}", None)
            self.s.st[temp] = frozenset({(HELD, p.line, p.column, kind.noun)})
            temps.append(temp)
            out.append(Value("var", p.line, p.column, var=temp))
        return out

    def pattern_presence(self, p: Pattern) -> bool | None:
        """False for `case None:`, True for a class pattern of a tracked class, else None."""
        if isinstance(p, AsPattern) and p.pattern is not None:
            return self.pattern_presence(p.pattern)
        if isinstance(p, SingletonPattern):
            return False if p.value is None else None
        if isinstance(p, ClassPattern) and isinstance(p.class_ref.node, TypeInfo):
            info = p.class_ref.node
            return True if info.fullname == LEASE or is_linear_info(info) else None
        return None

    def irrefutable(self, p: Pattern, arity: int | None = None) -> bool:
        """Whether `p` matches anything (with `arity`: a subject that is a tuple of that many items)."""
        if isinstance(p, AsPattern):
            return p.pattern is None or self.irrefutable(p.pattern)
        if isinstance(p, OrPattern):
            return any(self.irrefutable(sub) for sub in p.patterns)
        if isinstance(p, SequencePattern) and arity is not None:
            return len(p.patterns) == arity and all(self.irrefutable(sub) for sub in p.patterns)
        return False

    def bind_pattern(self, p: Pattern, whole: Value | None, items: list[Value] | None,
                     subject_type: Type | None = None, temps: list[Var] | None = None) -> None:
        """Bind a pattern's captures: `case X() as k` / `case k` take the subject itself, and
        the captures of a sequence pattern over a tuple subject take its items; others bind
        nothing owned.

        A name holding a tuple of owned values (`match pair: case (f, h):`) is
        unpacked by a sequence pattern of its length: the name moves, each
        capture owns its item, and an item the pattern does not capture (`_`)
        is held by a temporary the end of the `match` checks."""
        bound: set[NameExpr] = set()
        if isinstance(p, SequencePattern) and items is None and whole is not None and temps is not None:
            items = self.unpacked_subject(p, whole, subject_type, temps)
        if isinstance(p, AsPattern) and p.name is not None and whole is not None:
            self.bind(p.name, whole, p.name.line)
            bound.add(p.name)
        elif isinstance(p, SequencePattern) and items is not None and len(p.patterns) == len(items) \
                and not any(isinstance(sub, StarredPattern) for sub in p.patterns):
            for sub, item in zip(p.patterns, items):
                presence = self.pattern_presence(sub)  # `case (p, None):` finds the second item None
                if presence is not None and item.var is not None and self.s.st is not None:
                    self.s.st = self.narrow(self.s.st, item.var, present=presence)
                if isinstance(sub, AsPattern) and sub.name is not None:
                    self.bind(sub.name, item, sub.name.line)
                    bound.add(sub.name)
        for name in name_refs(p):
            if name in bound:
                continue
            if isinstance(name.node, Var) and name.node in self.s.locals and name.is_new_def:
                self.bind(name, OTHER, name.line)


def _iter_item(p: Instance) -> Type | None:
    """What `iter()` of an instance of a class declaring `__iter__ -> Iterator[X]` yields: X, else None."""
    method = p.type.get_method("__iter__")
    sig = get_proper_type(method.type) if method is not None and method.type is not None else None
    if not isinstance(sig, CallableType):
        return None
    ret = get_proper_type(expand_type_by_instance(sig.ret_type, p))
    if isinstance(ret, Instance) and ret.type.fullname in ONE_SHOT and ret.args:
        return ret.args[0]
    return None


def _tuple_arity(t: Type | None) -> int | None:
    """The number of items of a fixed-length tuple type, else None."""
    p = get_proper_type(t) if t is not None else None
    return len(p.items) if isinstance(p, TupleType) else None


def _covers(p: Pattern, t: Type | None) -> bool:
    """Whether a subject of type `t` that is not None always matches `p` (a bare class pattern of its class)."""
    if isinstance(p, AsPattern) and p.pattern is not None:
        return _covers(p.pattern, t)
    if not isinstance(p, ClassPattern) or p.positionals or p.keyword_values \
            or not isinstance(p.class_ref.node, TypeInfo):
        return False
    info = p.class_ref.node
    proper = get_proper_type(t) if t is not None else None
    if proper is None:
        return False
    options = proper.items if isinstance(proper, UnionType) else [proper]
    for option in map(get_proper_type, options):
        if isinstance(option, NoneType):
            continue
        if not isinstance(option, Instance) or not option.type.has_base(info.fullname):
            return False
    return True


def _is_mapping(t: Type | None) -> bool:
    """Whether iterating a value of type `t` yields its keys (a dict, or a mapping type)."""
    p = get_proper_type(t) if t is not None else None
    return isinstance(p, Instance) and (p.type.fullname in KEYED_CONTAINERS or p.type.has_base("typing.Mapping"))


def _class_options(t: Type | None) -> dict[str, TypeInfo | None] | None:
    """The classes a subject of type `t` may be (None for `None`), for exhaustiveness of a `match`."""
    proper = get_proper_type(t) if t is not None else None
    if proper is None:
        return None
    out: dict[str, TypeInfo | None] = {}
    for option in map(get_proper_type, proper.items if isinstance(proper, UnionType) else [proper]):
        if isinstance(option, NoneType):
            out["None"] = None
        elif isinstance(option, Instance) and not option.type.is_enum:
            out[option.type.fullname] = option.type
        else:
            return None
    return out


def _matches_all_of(p: Pattern, info: TypeInfo | None) -> bool:
    """Whether every subject of class `info` (None: the value None) matches `p`."""
    if isinstance(p, AsPattern):
        return p.pattern is None or _matches_all_of(p.pattern, info)
    if isinstance(p, OrPattern):
        return any(_matches_all_of(sub, info) for sub in p.patterns)
    if isinstance(p, SingletonPattern):
        return info is None and p.value is None
    if isinstance(p, ClassPattern) and isinstance(p.class_ref.node, TypeInfo) and info is not None:
        captures_only = all(isinstance(sub, AsPattern) and sub.pattern is None
                            for sub in [*p.positionals, *p.keyword_values])
        return captures_only and not p.positionals and info.has_base(p.class_ref.node.fullname)
    return False


def _caught_by_type(t: Type | None) -> list[TypeInfo] | None:
    """Exception classes named by a value of type `t`: `type[E]`, a tuple of them, or a union."""
    p = get_proper_type(t) if t is not None else None
    if isinstance(p, TypeType):
        item = get_proper_type(p.item)
        return [item.type] if isinstance(item, Instance) else None
    if isinstance(p, FunctionLike) and p.is_type_obj():
        return [p.type_object()]
    if isinstance(p, TupleType):
        parts = [_caught_by_type(item) for item in p.items]
    elif isinstance(p, UnionType):
        parts = [_caught_by_type(item) for item in p.items]
    elif isinstance(p, Instance) and p.type.fullname == "builtins.tuple" and p.args:
        parts = [_caught_by_type(p.args[0])]
    else:
        return None
    out: list[TypeInfo] = []
    for part in parts:
        if part is None:
            return None
        out.extend(part)
    return out


def _enum_members(t: Type | None) -> set[str] | None:
    """The member names of the enum type `t`, for exhaustiveness of a `match` on it."""
    p = get_proper_type(t) if t is not None else None
    if isinstance(p, Instance) and p.type.is_enum:
        return set(p.type.enum_members)
    return None


def _enum_values(p: Pattern) -> set[str]:
    if isinstance(p, OrPattern):
        return set().union(*(_enum_values(sub) for sub in p.patterns))
    if isinstance(p, ValuePattern) and isinstance(p.expr, MemberExpr):
        return {p.expr.name}
    return set()


ONE_SHOT: Final = frozenset({
    "typing.Iterator", "typing.Generator", "typing.AsyncIterator", "typing.AsyncGenerator",
})
"""Iterator types: like a generator declared to yield owned values, they hand their items over."""

COPIES: Final = frozenset({
    "builtins.list", "builtins.tuple", "builtins.sorted", "builtins.reversed", "builtins.iter",
    "builtins.set", "builtins.frozenset", "builtins.enumerate",
})
"""Calls whose result iterates over the items of their first argument, which keeps them."""


def _strict(call: CallExpr) -> bool:
    """Whether a `zip(...)` call says `strict=True` (so it cannot stop before a longer argument's end)."""
    for name, arg in zip(call.arg_names, call.args):
        if name == "strict":
            return isinstance(arg, NameExpr) and arg.fullname == "builtins.True"
    return False


def _tracked_somewhere(t: Type) -> bool:
    p = get_proper_type(t)
    if isinstance(p, TupleType):
        return any(_tracked_somewhere(x) for x in p.items)
    return classify(t) is not None and not is_borrowed(t)

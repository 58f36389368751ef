"""The ownership events every rule is made of: use, lend, transfer, consume, bind; and reporting."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

from mypy.nodes import (
    GDEF,
    FUNC_NO_INFO,
    FuncItem,
    CallExpr,
    ConditionalExpr,
    Expression,
    IndexExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    Node,
    OpExpr,
    StarExpr,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.types import AnyType, Instance, Type, get_proper_type

from leases.check import codes
from leases.check.facts import (
    BORROWED,
    ENTRY,
    HELD,
    TUPLE_NOUN,
    MOVED,
    NOTHING,
    UNKNOWN,
    NOTHING_FACTS,
    OTHER,
    RELEASED,
    Facts,
    LoopFrame,
    Pending,
    State,
    TryFrame,
    Value,
    WithFrame,
    borrowed,
    dropped_message,
    join,
    slot_of,
    spelled,
    verb,
)
from leases.check.function_state import FunctionState
from leases.check.model import (
    CONTAINERS,
    MOVE_OUT_METHODS,
    classify,
    consuming_method,
    container_item,
    is_borrowed,
    holds_owned,
    items_noun,
    item_noun,
    is_linear_info,
    is_weak_owner,
    owned_item,
    tuple_or_none,
    tracks_anywhere,
)
from leases.check.rules import Rules
from leases.check.walk import name_refs


class OwnershipBase:
    """State, reporting and ownership events shared by every part of the function analysis."""

    s: FunctionState
    """The function's state; every rule reads and changes it (`leases.check.function_state`)."""
    rules: Rules
    """The other rules modules' entry points (`leases.check.rules`)."""

    def report(self, line: int, column: int, code: str, message: str) -> None:
        if not self.s.muted:
            self.s.mod.report(line, column, code, message)

    def where(self, kind: str, line: int) -> str:
        if kind == "end":
            return f"the end of the function at line {line}"
        if kind == "loop-end":
            return f"the end of the loop body at line {line}"
        if kind == "cancel":
            return f"a cancellation or close at the suspension on line {line}"
        if kind == "match":
            return f"the end of the match at line {line}"
        return f"{kind} at line {line}"

    def check_exit(self, st: State, kind: str, line: int, only: Iterable[Var] | None = None) -> None:
        targets = only if only is not None else list(st)
        for var in targets:
            facts = st.get(var)
            if not facts or var in self.s.place_bases:
                continue
            if var in self.s.discharging:
                if kind == "raise":
                    self.raised_holder(st, var, facts, line)
                continue
            if var in self.s.markers:
                if var in self.s.entries and kind in ("end", "return"):
                    self.entries_dangling(var, facts, kind, line)
                elif kind in ("end", "return"):
                    self.copy_dangling(var, facts, kind, line)
                continue
            if self.borrowed_from_field(st, var):
                facts = frozenset(f for f in facts if f[0] != HELD)
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

    def raised_holder(self, st: State, var: Var, facts: Facts, line: int) -> None:
        """A raise that leaves an owned holder parameter unconsumed (`def submit(self, job: Job)`
        raising before it queues `job`): the caller gave it up, so nobody releases it. The receiver of
        a `@consumes` method is the exception: raising leaves it unconsumed and still the caller's."""
        fn = self.s.fn
        if fn is None or not fn.arguments or fn.arguments[0].variable is var and _consuming_self(fn):
            return
        if not all(f[0] == HELD for f in facts):
            return
        fields = [place for place, base in self.s.place_bases.items() if base is var]
        if fields and not any(f[0] == HELD for place in fields for f in st.get(place, ())):
            return  # consumed field by field
        noun = _held_noun(facts)
        held = min((f[1], f[2]) for f in facts)
        self.report(held[0], held[1], codes.LEAK.code,
                    f'{noun} "{var.name}" is not {verb(noun)} or transferred before {self.where("raise", line)}')

    def entries_dangling(self, marker: Var, facts: Facts, kind: str, line: int) -> None:
        gone = sorted({(f[1], f[2], f[3]) for f in facts if f[0] in (RELEASED, MOVED)})
        modal = "are" if len(gone) == len(facts) else "may be"
        for at, col, noun in gone:
            self.report(at, col, codes.DANGLING.code,
                        f'{noun} entries of "{self.s.entries[marker]}" {modal} {verb(noun)} or '
                        f"handed on in a loop at line {at} but still stored at "
                        f"{self.where(kind, line)}; empty the container (pop each, or clear it)")

    def copy_dangling(self, marker: Var, facts: Facts, kind: str, line: int) -> None:
        """`self.done.extend(self.pins)` with `self.pins` never cleared: two owners of each entry."""
        found = next(((name, into) for name, (m, into) in self.s.copies.items() if m is marker), None)
        held = sorted({(f[1], f[2], f[3]) for f in facts if f[0] == HELD})
        if found is None or found[1] is not None or not held:
            return
        modal = "are still" if len(held) == len(facts) else "may still be"
        at, col, noun = held[0]
        self.report(at, col, codes.DANGLING.code,
                    f'{noun} entries of "{found[0]}" copied at line {at} {modal} held there at '
                    f"{self.where(kind, line)}, so two owners release them; clear it after the copy "
                    f"(a move), or pop each entry into the other")

    def untracked_flow(self, v: Value, where: str) -> None:
        """An owned value flows into `where`, which the checker cannot follow: `lease-untracked`."""
        if self.s.st is None:
            return
        if v.kind in ("fresh", "tuple", "awaitable", "unknown", "display"):
            what = {"fresh": v.noun, "tuple": TUPLE_NOUN, "unknown": v.noun, "display": f"{v.noun} container",
                    "awaitable": f"Awaitable of {v.noun or 'owned values'}"}[v.kind]
            self.report(v.line, v.column, codes.UNTRACKED.code,
                        f'{what} from "{v.source}" flows into {where}, which leasecheck cannot '
                        f'follow; hand it on through a tracked type or untracked(..., reason="...")')
            return
        if v.kind != "var" or v.var is None:
            self.lend(v)
            return
        var = v.var
        facts = self.facts(var)
        if not any(f[0] in (HELD, BORROWED, UNKNOWN) for f in facts):
            self.check_use(var, v.line, v.column)
            return
        noun = next((f[3] for f in facts if f[3]), "Lease")
        self.report(v.line, v.column, codes.UNTRACKED.code,
                    f'{noun} "{var.name}" flows into {where}, which leasecheck cannot follow; '
                    f'hand it on through a tracked type or untracked(..., reason="...")')
        self.s.st[var] = frozenset({(MOVED, v.line, v.column, noun)})
        self.fields_gone(var)

    def unknown_owner(self, var: Var, facts: Facts, how: str, line: int, column: int) -> bool:
        """Consuming or handing on a value of unknown ownership: `lease-untracked` (True if so)."""
        unknown = [f for f in facts if f[0] == UNKNOWN]
        if not unknown:
            return False
        noun, at = unknown[0][3], min(f[1] for f in unknown)
        self.report(line, column, codes.UNTRACKED.code,
                    f'{noun} "{var.name}" was obtained at line {at} from where leasecheck cannot '
                    f"tell who owns it, so it cannot be {how} here; take it from a tracked "
                    f'source or say untracked(..., reason="...")')
        return True

    def marker(self, name: str) -> Var:
        """The synthetic variable for a container slot (`d[k]`), created on first use."""
        var = self.s.slot_markers.get(name)
        if var is None:
            var = Var(name, None)
            self.s.slot_markers[name] = var
            self.s.markers.add(var)
        return var

    def pop_tested(self, names: Iterable[str]) -> None:
        """These containers (or objects holding them) were tested or may have changed: a pop from
        them again is a new question."""
        if self.s.st is None or not self.s.pop_markers:
            return
        for name in names:
            for spelling, var in self.s.pop_markers.items():
                if (spelling == name or spelling.startswith(name + ".")) and var in self.s.st:
                    self.s.st[var] = NOTHING_FACTS

    def pop_counted(self, names: Iterable[str]) -> None:
        """`len(c)` was tested: how many pops that allows is the test's business, not the checker's."""
        if self.s.st is None:
            return
        for name in names:
            marker = self.s.pop_markers.get(name)
            if marker is None:
                marker = self.s.pop_markers[name] = self.marker(f"{name}.pop()")
            self.s.st[marker] = frozenset({(HELD, 0, 0, "")})

    def forget_slots(self, name: str) -> None:
        """A name was rebound or a container changed wholesale: slots spelled with it are unknown."""
        if self.s.st is None or not self.s.slot_markers:
            return
        for spelling, var in self.s.slot_markers.items():
            if _mentions(spelling, name) and var in self.s.st:
                self.s.st[var] = NOTHING_FACTS

    def borrowed_from_field(self, st: State, var: Var) -> bool:
        """`x = self.f` with the field never reset: `x` only borrowed what the field still holds."""
        place = self.s.links.get(var)
        return place is not None and any(f[0] == MOVED for f in st.get(place, ()))

    def narrow(self, st: State, var: Var, *, present: bool) -> State:
        out = dict(st)
        facts = st.get(var, NOTHING_FACTS)
        if present:
            kept = frozenset(f for f in facts if f[0] != NOTHING)
            out[var] = kept or facts
        else:
            out[var] = NOTHING_FACTS
            place = self.s.links.get(var)
            if place is not None and all(f[0] in (MOVED, NOTHING) for f in st.get(place, ())):
                out[place] = NOTHING_FACTS
            for (owner, _), field_var in self.s.places.items():
                if owner is var and field_var in out:
                    out[field_var] = NOTHING_FACTS  # a None holder has no fields
            contents = self.s.contents.get(var)
            if contents is not None and contents in out:
                out[contents] = NOTHING_FACTS  # `pins = d.get(k)` found None: it holds nothing
        return out

    def current(self) -> State | None:
        """The state now (a call, so mypy does not keep narrowing across evaluations)."""
        return self.s.st

    def facts(self, var: Var) -> Facts:
        assert self.s.st is not None
        return self.s.st.get(var, NOTHING_FACTS)

    def local_var(self, e: Expression) -> Var | None:
        """The variable `e` names: a local, or an owned field of a parameter (`self.full`)."""
        if isinstance(e, NameExpr) and isinstance(e.node, Var) and e.node in self.s.locals:
            return e.node
        if isinstance(e, MemberExpr) and isinstance(e.expr, NameExpr) and self.s.places:
            base = e.expr.node
            if isinstance(base, Var):
                return self.s.places.get((base, e.name))
        return None

    def fields_rebound(self, base: Var, v: Value, line: int, column: int) -> None:
        """`base = <value>`: an object just built owns nothing yet; any other may hold its fields."""
        if self.s.st is None or not self.s.places:
            return
        for (owner, _), place in self.s.places.items():
            if owner is base:
                if v.kind in ("new", "none") or (v.kind == "fresh" and v.source not in MOVE_OUT_METHODS):
                    self.s.st[place] = NOTHING_FACTS  # `req = self.running.pop(rid)` is an existing object
                else:
                    noun = self.s.place_nouns.get(place, "Lease")
                    self.s.st[place] = frozenset({(HELD, line, column, noun)})

    def fields_gone(self, base: Var, at: tuple[int, int] | None = None, how: str = "",
                    only: frozenset[str] | None = None) -> None:
        """`base` itself was consumed or handed on (`how`, at `at`): its fields went with it.

        A field whose value was released through a local (`d = self.device;
        d.release()`) and never reset goes with it still holding that
        released value: whoever discharges `base` next (a `@consumes` method
        discharges every owned field) releases it again.
        """
        if self.s.st is None or not self.s.places:
            return
        for (owner, name), place in self.s.places.items():
            if owner is not base or (only is not None and name not in only):
                continue
            noun = self.s.place_nouns.get(place, "Lease")
            released_here = sorted(f[1] for f in self.s.st.get(place, ()) if f[0] == RELEASED)
            if at is not None and released_here and place not in self.s.discharging:
                self.report(at[0], at[1], codes.DANGLING.code,
                            f'{noun} field "{base.name}.{name}" was released at line {released_here[0]} '
                            f"but never reset, and {how} hands it on still holding the released value; "
                            f"reset the field ({base.name}.{name} = None) after releasing it")
            elif at is not None and any(f[0] == MOVED for f in self.s.st.get(place, ())):
                for var, linked in self.s.links.items():
                    released = sorted(f[1] for f in self.s.st.get(var, ()) if f[0] == RELEASED)
                    if linked is place and released:
                        self.report(at[0], at[1], codes.DOUBLE_RELEASE.code,
                                    f'{noun} field "{base.name}.{name}" was released through '
                                    f'"{var.name}" at line {released[0]} but never reset, and {how} '
                                    f"discharges it again; reset the field ({base.name}.{name} = None) "
                                    f"after releasing it")
                        break
            self.s.st[place] = NOTHING_FACTS

    def record_exception(self, state: State | None = None) -> None:
        """The current state may reach the innermost handler: any statement may raise."""
        st = self.s.st if state is None else state
        if st is None:
            return
        for frame in reversed(self.s.frames):
            if isinstance(frame, WithFrame):
                st = frame.leave(st)
                if frame.swallows:
                    frame.swallowed = join(frame.swallowed, st)
            elif isinstance(frame, TryFrame):
                if frame.in_body:
                    frame.body_exc = join(frame.body_exc, st)
                else:
                    frame.escaping = join(frame.escaping, st)
                return

    def unwind(self, kind: str, st: State, line: int, raised: list[TypeInfo] | None = None) -> None:
        """Send an abrupt exit to whatever catches it: a loop, a handler, a finally, the caller."""
        self.s.exit_state = st
        for frame in reversed(self.s.frames):
            if isinstance(frame, WithFrame):
                st = frame.leave(st)  # `return` inside `with g:` leaves the block first
            elif isinstance(frame, LoopFrame):
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
        if kind in ("return", "raise", "cancel") and not self.s.muted:
            self.s.exits.append((kind, st, line))

    def loop_exit_check(self, frame: LoopFrame, st: State, kind: str, line: int) -> None:
        held = [v for v in frame.loop_locals if any(f[0] == HELD for f in st.get(v, ()))]
        if not held:
            return
        self.check_exit(st, kind, line, only=held)
        for var in held:
            st[var] = NOTHING_FACTS

    def loop_locals(self, loop: Node, body: Iterable[Node]) -> frozenset[Var]:
        key = id(loop)
        cached = self.s.loop_locals_cache.get(key)
        if cached is not None:
            return cached
        inside: Counter[Var] = Counter()
        for node in body:
            for name in name_refs(node, into_functions=False):
                if isinstance(name.node, Var) and name.node in self.s.locals:
                    inside[name.node] += 1
        result = frozenset(v for v, n in inside.items() if n == self.s.refs.get(v, 0))
        self.s.loop_locals_cache[key] = result
        return result


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
        if self.s.st is None:
            return
        if v.kind == "fresh":
            self.report(v.line, v.column, codes.DISCARDED.code,
                        f'{v.noun} returned by "{v.source}" is discarded')
        elif v.kind == "tuple":
            self.report(v.line, v.column, codes.DISCARDED.code,
                        f'{TUPLE_NOUN} returned by "{v.source}" is discarded')
        elif v.kind == "awaitable":
            self.untracked_flow(v, "a call that does not await it")
        elif v.kind == "var" and v.var is not None:
            self.check_use(v.var, v.line, v.column)

    def transfer(self, v: Value, how: str, line: int) -> None:
        """Ownership leaves the current holder (return, store, owning parameter)."""
        if self.s.st is None:
            return
        if v.kind == "awaitable" and how != "returning it":
            self.untracked_flow(v, f"{how} instead of awaiting it")
            return
        if v.kind == "unknown":
            self.report(v.line, v.column, codes.UNTRACKED.code,
                        f'{v.noun} from "{v.source}" has no owner leasecheck can tell, so it '
                        f'cannot be transferred by {how}; take it from a tracked source or say '
                        f'untracked(..., reason="...")')
            return
        if v.kind not in ("var", "borrowed"):
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
        entries = self.s.entry_of.get(var)
        if entries is not None and any(f[0] == ENTRY for f in facts):
            if how == "storing it in a container":
                return  # a copy of the reference: the container still holds the value
            self.s.st[entries] = frozenset({(MOVED, v.line, v.column, _held_noun(facts))})
        if self.unknown_owner(var, facts, f"transferred by {how}", v.line, v.column):
            self.s.st[var] = frozenset({(MOVED, line, 0, _held_noun(facts))})
            return
        self.check_use(var, v.line, v.column)
        owned = [f for f in facts if f[0] in (HELD, RELEASED, MOVED, ENTRY)]
        if owned:
            noun = owned[0][3]
            self.s.st[var] = frozenset({(MOVED, line, 0, noun)})
        elif var in self.s.discharging:
            self.s.st[var] = frozenset({(MOVED, line, 0, _noun_of(var))})
        self.fields_gone(var, (line, v.column), how)

    def is_entry(self, v: Value) -> bool:
        """Whether `v` names a loop target still holding an entry of a container (see `iteration`)."""
        if v.kind != "var" or v.var is None or v.var not in self.s.entry_of:
            return False
        return any(f[0] == ENTRY for f in self.facts(v.var))

    def not_owning_parameter(self, var: Var) -> bool:
        """A parameter declared with a type that owns nothing (`object`, `Any`, a protocol)."""
        fn = self.s.fn
        if fn is None or var.is_self or var.is_cls or var in self.s.place_bases:
            return False
        if not any(arg.variable is var for arg in fn.arguments):
            return False
        return classify(var.type) is None

    def owns(self, v: Value) -> bool:
        """Whether `v` is a value this function owns right now (fresh, or a held name)."""
        if v.kind == "fresh":
            return True
        return v.kind == "var" and v.var is not None and self.s.st is not None and any(
            f[0] == HELD for f in self.s.st.get(v.var, ())
        )

    def setup_contents(self, var: Var, t: Type | None, line: int, column: int, st: State | None) -> None:
        """`var` holds a container of owned values that are another's (a parameter's are the caller's, a
        loop target's over a local container of containers are that container's): held until spent."""
        item = container_item(t)
        if not owned_item(item) or st is None:
            return
        assert item is not None
        kind = classify(item)
        marker = Var(f"{var.name} contents", None)
        self.s.markers.add(marker)
        self.s.contents[var] = marker
        st[marker] = frozenset({(HELD, line, column, kind.noun if kind is not None else "Lease")})

    def overwrites_view(self, target: IndexExpr, v: Value, line: int) -> None:
        """`self.by_owner[k] = fresh` while a view of that item (`cur = self.by_owner.get(k)`) is
        present and may still hold owned values: the store drops them. Storing the view back is fine."""
        slot = slot_of(target.base, target.index)
        if not slot or self.s.st is None:
            return
        for var, at in self.s.view_slots.items():
            if at != slot or (v.kind == "var" and v.var is var):
                continue
            marker = self.s.contents.get(var)
            held = [f for f in self.s.st.get(marker, ()) if f[0] == HELD] if marker is not None else []
            if not held:
                continue  # found None or empty, or spent by a loop
            self.report(line, target.column, codes.LEAK.code,
                        f'Storing under "{slot}" drops the {held[0][3]} values the container there may still '
                        f'hold (seen through "{var.name}"); drain it first, or take it out (pins = d.pop(k))')
            return

    def copied(self, source: Expression, into: Var | None, line: int, column: int) -> None:
        """`out = list(self.pins)`, `self.done.extend(self.pins)`: a copy of every entry of `source` now
        exists; clearing `source` next (`self.pins.clear()`, `self.pins = []`) moves them to the copy."""
        name = spelled(source)
        if name is None or self.s.st is None or self.rules.spendable("entry", source) is None:
            return
        marker = Var(f"{name} copied", None)
        self.s.markers.add(marker)
        self.s.copies[name] = (marker, into)
        self.s.st[marker] = frozenset({(HELD, line, column, items_noun(self.s.types.get(source)))})

    def copy_held_by(self, var: Var | None) -> tuple[str, Var] | None:
        """The spelling of the container whose entries the local `var` holds a live copy of, and
        the copy's marker (`batch = list(self.pending)`, not cleared since), else None."""
        if var is None or self.s.st is None:
            return None
        for name, (marker, into) in self.s.copies.items():
            if into is var and any(f[0] == HELD for f in self.s.st.get(marker, ())):
                return name, marker
        return None

    def copy_completes(self, name: str, line: int, column: int) -> bool:
        """Clearing `name` on every path after a copy of all its entries: the copy takes them over."""
        found = self.s.copies.get(name)
        if found is None or self.s.st is None:
            return False
        marker, into = found
        facts = self.s.st.get(marker, NOTHING_FACTS)
        if not facts or not all(f[0] == HELD for f in facts):
            return False
        noun = next(iter(facts))[3]
        self.s.st[marker] = NOTHING_FACTS
        if into is not None:
            self.s.st[into] = frozenset({(HELD, line, column, f"{noun} container")})
        return True

    def held_contents(self, e: Expression) -> Var | None:
        """The contents marker of the name `e` while the items another owns may be in it (`setup_contents`), else None."""
        if not self.s.contents or not isinstance(e, NameExpr) or self.s.st is None:
            return None
        var = self.local_var(e)
        marker = self.s.contents.get(var) if var is not None else None
        if marker is None or not any(f[0] == HELD for f in self.s.st.get(marker, ())):
            return None
        return marker

    def held_local_container(self, e: Expression) -> Var | None:
        """The local name `e` when it holds a container of owned values this function owns, else None."""
        if not isinstance(e, NameExpr):
            return None
        var = self.local_var(e)
        if var is None or var in self.s.container_places:
            return None
        if not holds_owned(self.s.types.get(e)):  # `list[Lease]`, `dict[int, list[Lease]]`
            return None
        return var if any(fact[0] == HELD for fact in self.facts(var)) else None

    def filled(self, container: Expression, t: Type | None, line: int) -> None:
        """An owned value was moved into a local container: the container now holds it.

        It stays owned through reads (`len(c)`, a subscript, a loop that only
        reads): a `for` loop that consumes or hands on every item spends it, so
        does a test that finds it empty (`while c:` exiting, `if not c:`,
        `assert not c`), and returning it, storing it or passing it to a call
        hands it on. A container that is dropped, overwritten or deleted
        while owned leaks.
        """
        if self.s.st is None:
            return
        if isinstance(container, IndexExpr) and isinstance(container.base, NameExpr):
            self.filled_nested(container.base)  # `groups[k].append(lease)`: `groups` holds it
            return
        if not isinstance(container, NameExpr):
            return
        var = self.local_var(container)
        item = container_item(t)
        kind = classify(item) if item is not None and not is_borrowed(item) else None
        if var is None or kind is None or self.s.fn is None:
            return
        if any(arg.variable is var for arg in self.s.fn.arguments):
            return  # the caller's container: the caller owns what goes in
        if var in self.s.aliases:
            return  # a view of a container an outliving one holds (`pins = self.pins.setdefault(k, [])`)
        self.s.st[var] = frozenset({(HELD, line, container.column, f"{kind.noun} container")})

    def filled_nested(self, outer: NameExpr) -> None:
        """An owned value went into an item of the local container of containers `outer`."""
        var = self.local_var(outer)
        inner = container_item(container_item(self.s.types.get(outer)))
        kind = classify(inner) if owned_item(inner) else None
        if var is None or kind is None or self.s.fn is None or self.s.st is None:
            return
        if any(arg.variable is var for arg in self.s.fn.arguments) or var in self.s.container_places:
            return
        self.s.st[var] = frozenset({(HELD, outer.line, outer.column, f"{kind.noun} container")})

    def store(self, v: Value, line: int) -> None:
        """An item of a display: a local moves into it, a field only lends (it still holds it)."""
        if (v.kind == "var" and v.var in self.s.place_bases) or (v.kind == "borrowed" and v.declared_view) \
                or (self.s.view_displays and self.is_borrow(v)):
            self.lend(v)  # a field stays where it is; `(rc.full, rc.swa)` of Borrowed properties: views
        else:
            self.transfer(v, "storing it in a container", line)

    def consume(self, v: Value, line: int, column: int) -> None:
        if self.s.st is None:
            return
        if v.kind == "borrowed":
            self.report(line, column, codes.DOUBLE_RELEASE.code,
                        f'Borrowed value returned by "{v.source}" cannot be {verb(v.noun)} '
                        f"(its owner does that)")
            return
        if v.kind == "unknown":
            self.report(line, column, codes.UNTRACKED.code,
                        f'{v.noun} from "{v.source}" has no owner leasecheck can tell, so it '
                        f'cannot be {verb(v.noun)} here; take it from a tracked source or say '
                        f'untracked(..., reason="...")')
            return
        if v.kind != "var" or v.var is None:
            return
        var = v.var
        facts = self.facts(var)
        if self.unknown_owner(var, facts, verb(_held_noun(facts)), line, column):
            self.s.st[var] = frozenset({(RELEASED, line, column, _held_noun(facts))})
            return
        entries = self.s.entry_of.get(var)
        if entries is not None and any(f[0] == ENTRY for f in facts):
            self.s.st[entries] = frozenset({(RELEASED, line, column, _held_noun(facts))})
        owned = [f for f in facts if f[0] != NOTHING]
        if not owned and self.not_owning_parameter(var):
            self.report(line, column, codes.NOT_OWNED.code,
                        f'"{var.name}" is not owned here (its parameter type is not a lease or '
                        f"linear type); take it as one to consume it")
            return
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
            self.s.st[var] = frozenset({(RELEASED, line, column, noun)})
        elif var in self.s.discharging:
            self.s.st[var] = frozenset({(RELEASED, line, column, _noun_of(var))})
        self.fields_gone(var, (line, column), f'consuming "{var.name}"')

    def bind_local(self, var: Var, v: Value, line: int, column: int) -> None:
        """`var = <value>`: the old value must not be held; the new one may be."""
        assert self.s.st is not None
        if v.kind == "var" and v.var is var:
            return
        self.s.links.pop(var, None)
        self.s.slots.pop(var, None)
        contents = self.s.contents.pop(var, None)
        if contents is not None:
            self.s.st[contents] = NOTHING_FACTS
        self.s.view_slots.pop(var, None)
        self.fields_rebound(var, v, line, column)
        old = self.facts(var)
        held = [f for f in old if f[0] == HELD]
        if held and var in self.s.container_places and self.copy_completes(var.name, line, column):
            held = []  # `out = list(self.pins); self.pins = []`: `out` took the entries over
        if held:
            self.report(line, column, codes.LEAK.code,
                        dropped_message(var, old, held, "overwritten"))
        for copied, (marker, into) in list(self.s.copies.items()):
            if into is var:
                del self.s.copies[copied]  # the copy's name now holds something else
        self.forget_slots(var.name)
        if _is_any(var.type) and v.kind in ("fresh", "tuple", "var"):
            self.untracked_flow(v, f'"{var.name}", a name typed Any')
            self.s.st[var] = NOTHING_FACTS
            return
        if v.kind == "fresh":
            self.s.st[var] = frozenset({(HELD, line, column, v.noun)})
        elif v.kind == "unknown":
            self.s.st[var] = frozenset({(UNKNOWN, line, column, v.noun)})
        elif v.kind == "display":
            self.s.st[var] = frozenset({(HELD, line, column, f"{v.noun} container")})
        elif v.kind == "tuple":  # `pair = make_pair()`, `kv = d.popitem()`: held until unpacked or handed on
            self.s.st[var] = frozenset({(HELD, line, column, TUPLE_NOUN)})
        elif v.kind == "awaitable":
            self.untracked_flow(v, f'"{var.name}" (await it where it is made)')
            self.s.st[var] = NOTHING_FACTS
        elif v.kind == "var" and v.var is not None:
            src = v.var
            self.check_use(src, v.line, v.column)
            facts = self.facts(src)
            if any(f[0] in (HELD, RELEASED, MOVED) for f in facts):
                self.s.st[var] = frozenset(
                    (HELD, line, column, f[3]) if f[0] == HELD else f for f in facts
                )
                noun = next((f[3] for f in facts if f[3]), "Lease")
                self.s.st[src] = frozenset({(MOVED, line, column, noun)})
                self.fields_gone(src)
                if src in self.s.place_bases:
                    self.s.links[var] = src
            else:
                self.s.st[var] = facts
        elif v.kind == "borrowed":
            self.s.st[var] = borrowed(v.noun)
            if v.slot:
                self.s.slots[var] = v.slot
        else:
            self.s.st[var] = NOTHING_FACTS

    def bind(self, target: Expression, v: Value, line: int) -> None:
        """Assign an evaluated value to an assignment target."""
        if self.s.st is None:
            return
        if isinstance(target, MemberExpr):
            name = spelled(target)
            if name is not None:
                self.forget_slots(name)
        if isinstance(target, NameExpr):
            var = self.local_var(target)
            if target.name == "_" and v.kind in ("fresh", "tuple"):
                self.lend(v)  # `first, _ = await gather(...)`: nobody owns the second
                return
            if var is not None:
                self.bind_local(var, v, target.line, target.column)
            elif isinstance(target.node, Var) and target.node in self.s.enclosing:
                # `nonlocal slot; slot = lease`: the enclosing function's name, which no rule follows after the call
                self.untracked_flow(v, f'"{target.name}", a name of the enclosing function')
            elif self.s.fn is not None and isinstance(target.node, Var):
                # `global current; current = lease`: a module-level name, which nothing discharges
                self.untracked_flow(v, f'"{target.name}", a module-level name')
            elif self.s.fn is not None or not isinstance(target.node, Var):
                self.transfer(v, "storing it outside the function", line)
            else:
                self.transfer(v, "storing it", line)
        elif isinstance(target, MemberExpr):
            self.lend(self.rules.ev(target.expr))
            place = self.local_var(target)
            if place is not None and self.is_borrow(v):
                self.transfer(v, "storing it in an owned field", line)
                self.bind_local(place, OTHER, target.line, target.column)
            elif place is not None:
                self.bind_local(place, v, target.line, target.column)
            elif _is_any(self.s.types.get(target)) or _is_any(self.s.types.get(target.expr)):
                self.untracked_flow(v, f'the attribute "{target.name}" of an Any')
            elif self.borrowed_attribute(target):
                self.lend(v)
            elif not tracks_anywhere(self.attribute_type(target)):
                self.untracked_flow(v, f'the attribute "{target.name}", whose type owns nothing')
            else:
                self.transfer(v, "storing it in an attribute", line)
        elif isinstance(target, IndexExpr):
            self.lend(self.rules.ev(target.base))
            self.lend(self.rules.ev(target.index))
            self.overwrites_view(target, v, line)
            if self.module_level(target.base) and self.owns(v):
                self.untracked_flow(v, f'"{spelled(target.base)}", a module-level container')
            elif self.borrowed_items(target.base):
                self.lend(v)
            elif self.any_items(target.base):
                self.untracked_flow(v, "a container of Any")
            elif not self.items_track(target.base):
                self.untracked_flow(v, "a container whose item type owns nothing")
            else:
                moved_in = self.owns(v) or self.is_entry(v)
                # `other[k] = entry` hands the entry on (as `other.append(entry)` does); a display or a
                # comprehension of entries is a copy of the references (see `transfer`)
                self.transfer(v, "storing it under a key" if self.is_entry(v) else "storing it in a container",
                              line)
                if moved_in:
                    self.rules.stored(target.base, target.index, target.line, target.column)
                    self.filled(target.base, self.s.types.get(target.base), line)
        elif isinstance(target, (TupleExpr, ListExpr)):
            if v.kind == "tuple" and len(v.items) == len(target.items):
                for item, noun in zip(target.items, v.items):
                    sub = Value("fresh", v.line, v.column, noun=noun, source=v.source) if noun else OTHER
                    self.bind(item, sub, line)
            elif not self.unpack(target, v, line):
                self.lend(v)
                for item in target.items:
                    self.bind(item, OTHER, line)
        elif isinstance(target, StarExpr):
            self.bind(target.expr, OTHER, line)
        else:
            self.lend(self.rules.ev(target))

    def unpack(self, target: TupleExpr | ListExpr, v: Value, line: int) -> bool:
        """`a, b = pair` from a name or a subscript: the targets take the items over, or borrow them.

        An owned name (a tuple of leases, a display) moves into the targets,
        each owning the item its type tracks, so a target left unreleased is a
        leak and a later use of the name a use after move; a borrowed view (a
        subscript, a `Borrowed` name) lends its items to the targets. False
        when neither applies (a starred target, targets whose types own
        nothing, a value that is not a name or a view): the caller lends.
        """
        if any(isinstance(item, StarExpr) for item in target.items):
            return False
        nouns = [self.target_noun(item) for item in target.items]
        if not any(nouns):
            return False
        if v.kind == "borrowed" or self.is_borrow(v):
            self.lend(v)
            source = v.source if v.kind == "borrowed" else f'"{v.var.name if v.var else "a view"}"'
            for item, noun in zip(target.items, nouns):
                self.bind(item, Value("borrowed", v.line, v.column, noun=noun, source=source) if noun else OTHER,
                          line)
            return True
        if v.var is None or not self.owns(v):
            return False
        source = f"the unpacking of {v.var.name}"
        self.transfer(v, "unpacking it", line)
        held = tuple_or_none(v.var.type)
        for i, item in enumerate(target.items):
            kind = classify(held.items[i]) if held is not None and i < len(held.items) else None
            if isinstance(item, NameExpr) and item.name == "_" and kind is not None:
                self.report(item.line, item.column, codes.DISCARDED.code,
                            f'{kind.noun} at index {i} of "{v.var.name}" is unpacked into "_" and discarded')
        for item, noun in zip(target.items, nouns):
            self.bind(item, Value("fresh", v.line, v.column, noun=noun, source=source) if noun else OTHER, line)
        return True

    def target_noun(self, target: Expression) -> str | None:
        """The noun of what an unpacking target owns by its type (a name's inferred type), or None."""
        var = target.node if isinstance(target, NameExpr) else None
        t = var.type if isinstance(var, Var) and var.type is not None else self.s.types.get(target)
        return item_noun(t)

    def module_level(self, e: Expression) -> bool:
        """Whether `e` is a module-level name read inside a function (`HELD` in `HELD.append(x)`):
        nothing discharges what it holds, so no rule follows a value stored there."""
        return self.s.fn is not None and isinstance(e, NameExpr) and e.kind == GDEF \
            and isinstance(e.node, Var) and e.node not in self.s.locals

    def borrowed_attribute(self, target: MemberExpr) -> bool:
        """Whether the attribute is declared `Borrowed[...]`: storing there lends."""
        if target.def_var is not None and is_borrowed(target.def_var.type):
            return True
        t = self.s.types.get(target.expr)
        p = get_proper_type(t) if t is not None else None
        if isinstance(p, Instance):
            sym = p.type.get(target.name)
            if sym is not None and isinstance(sym.node, Var):
                return is_borrowed(sym.node.type)
        return False

    def is_borrow(self, v: Value) -> bool:
        """Whether `v` is a borrowed view (a `Borrowed` parameter or lookup result)."""
        if v.kind == "borrowed":
            return True
        return v.kind == "var" and v.var is not None and self.s.st is not None and any(
            f[0] == BORROWED for f in self.s.st.get(v.var, ())
        )

    def attribute_type(self, target: MemberExpr) -> Type | None:
        """The declared type of the attribute `target` names (None: not known)."""
        if target.def_var is not None and target.def_var.type is not None:
            return target.def_var.type
        t = self.s.types.get(target.expr)
        p = get_proper_type(t) if t is not None else None
        if isinstance(p, Instance):
            sym = p.type.get(target.name)
            if sym is not None and isinstance(sym.node, Var):
                return sym.node.type
        return None

    def items_track(self, container: Expression) -> bool:
        """False for a standard container whose item type cannot hold an owned value."""
        t = self.s.types.get(container)
        p = get_proper_type(t) if t is not None else None
        if not (isinstance(p, Instance) and p.type.fullname in CONTAINERS and p.args):
            return True
        return tracks_anywhere(p.args[-1])

    def any_items(self, container: Expression) -> bool:
        """Whether storing into `container` goes into an `Any` (an `Any` itself, or `dict[str, Any]`)."""
        t = self.s.types.get(container)
        p = get_proper_type(t) if t is not None else None
        if isinstance(p, AnyType):
            return True
        return isinstance(p, Instance) and bool(p.args) and _is_any(p.args[-1])

    def borrowed_items(self, container: Expression) -> bool:
        """Whether a container's items are views: its item type (its last type argument) is
        `Borrowed[...]`, or it is a `weakref` container (`WeakValueDictionary`, `WeakSet`)."""
        t = self.s.types.get(container)
        p = get_proper_type(t) if t is not None else None
        return isinstance(p, Instance) and bool(p.args) and (
            is_borrowed(p.args[-1]) or is_weak_owner(p.type.fullname))

    def sink(self, e: Expression, action: Callable[[Value], None]) -> None:
        """Evaluate `e` and hand its value to `action`, path by path for `a if c else b`."""
        if self.s.st is None:
            return
        if isinstance(e, ConditionalExpr):
            t, f = self.rules.cond(e.cond)
            self.s.st = t
            self.sink(e.if_expr, action)
            after_true = self.s.st
            self.s.st = f
            self.sink(e.else_expr, action)
            self.s.st = join(after_true, self.s.st)
            return
        if isinstance(e, OpExpr) and e.op == "or" and self.local_var(e.left) is not None:
            t, f = self.rules.cond(e.left)
            self.s.st = t
            self.sink(e.left, action)
            after_true = self.s.st
            self.s.st = f
            self.sink(e.right, action)
            self.s.st = join(after_true, self.s.st)
            return
        if isinstance(e, OpExpr) and e.op == "or" and isinstance(e.left, CallExpr) \
                and self.rules.truthiness_is_presence(e.left):
            left = self.rules.ev(e.left)  # `d.pop(k, None) or acquire()`: the popped value, else a new one
            st = self.current()  # the evaluation may have ended the path
            if st is None:
                return
            absent = dict(st)
            action(left)
            after_present = self.s.st
            self.s.st = absent
            self.sink(e.right, action)
            self.s.st = join(after_present, self.s.st)
            return
        action(self.rules.ev(e))

    def capture_check(self, node: Node, what: str) -> None:
        if self.s.st is None or not self.s.locals:
            return
        seen: set[Var] = set()
        for name in name_refs(node):
            var = name.node
            if not isinstance(var, Var) or var not in self.s.locals or var in seen:
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
            self.s.st[var] = NOTHING_FACTS


def _consuming_self(fn: FuncItem) -> bool:
    """Whether `fn` is a `@consumes` method of a `@linear` class (its first argument the receiver)."""
    info = fn.info if fn.info is not FUNC_NO_INFO else None
    return info is not None and not fn.is_static and is_linear_info(info) and consuming_method(info, fn.name)


def _held_noun(facts: Facts) -> str:
    return next((f[3] for f in facts if f[3]), "Lease")


def _is_any(t: Type | None) -> bool:
    return t is not None and isinstance(get_proper_type(t), AnyType)


def _mentions(spelling: str, name: str) -> bool:
    """Whether `name` occurs in a slot spelling as a whole dotted or subscripted part."""
    return re.search(rf"(^|[^\w.]){re.escape(name)}($|[^\w])", spelling) is not None


def _noun_of(var: Var) -> str:
    p = get_proper_type(var.type) if var.type is not None else None
    return p.type.name if isinstance(p, Instance) else "Value"

"""The state of one function's analysis: one object, read and changed by every rules module.

The rules modules (`ownership`, `expressions`, `conditions`, `statements`,
`compound`, `fields`, `takes`) keep nothing of their own: what a rule learns
about the function lives here, so a rule reads as a function of this state
and the statement or expression it is given. `st` is the abstract state of
the program point being analysed (None where it is unreachable); the rest
is what the function's entry, its fields and its containers set up, and
what its exits collect.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from mypy.nodes import LDEF, Expression, FuncItem, Node, NonlocalDecl, Statement, Var
from mypy.types import Type

from leases.check.calls import CallModel
from leases.check.contracts import Take
from leases.check.facts import Frame, State
from leases.check.module import ModuleChecker
from leases.check.walk import children, name_refs


class FunctionState:
    """What the analysis of one function body (or of module or class level statements) knows."""

    __slots__ = (
        "mod", "types", "calls", "fn", "body", "enclosing", "muted", "frames", "exits", "st",
        "loop_locals_cache", "locals", "refs", "return_lends", "returns_any", "return_tracks", "exit_state",
        "places", "place_bases", "discharging", "place_nouns", "container_places", "slots", "links",
        "markers", "slot_markers", "pop_markers", "entry_of", "entries", "aliases", "takes", "take_aliases", "contents", "view_slots",
        "copies", "subsets", "view_displays", "awaited",
    )

    mod: ModuleChecker
    """The module pass: where findings go, which bodies come next, the `@takes_from` contracts."""
    types: Mapping[Expression, Type]
    calls: CallModel
    fn: FuncItem | None
    """The function analysed; None for module or class level statements."""
    body: list[Statement]
    enclosing: frozenset[Var]
    """Variables of the enclosing functions (a nested function's free variables are not its own)."""
    muted: int
    """Above zero during the passes towards a loop's (or comprehension's) fixpoint: they neither report
    nor record exits; the final pass does."""
    frames: list[Frame]
    """The enclosing loops, `try` and `with` blocks that abrupt exits go to, innermost last."""
    exits: list[tuple[str, State, int]]
    """(kind, state, line) of every exit of the function: "end", "return", "raise", "cancel"."""
    st: State | None
    """The abstract state at the point being analysed; None where that point is unreachable."""
    loop_locals_cache: dict[int, frozenset[Var]]
    locals: set[Var]
    refs: Counter[Var]
    """How often each local is referenced in the body: a local all of whose references lie inside a loop
    is that loop's own (its value must not outlive an iteration)."""
    return_lends: bool
    """The function returns a `Borrowed[...]` view."""
    returns_any: bool
    return_tracks: bool
    """The return type can carry an owned value (or the function is a generator or coroutine)."""
    exit_state: State | None
    """The state of the last abrupt exit (return, raise, break, continue) sent to `unwind`."""
    places: dict[tuple[Var, str], Var]
    """(parameter, attribute) -> the variable standing for that owned field."""
    place_bases: dict[Var, Var]
    """Field variable -> the parameter whose field it is."""
    discharging: set[Var]
    """Holders whose owned fields this function must discharge (see `leases.check.fields`)."""
    place_nouns: dict[Var, str]
    container_places: set[Var]
    """Field variables of container fields: emptied by `while f:` or `f.clear()`, not released."""
    slots: dict[Var, str]
    """Local -> the `container[key]` it borrowed from; `del container[key]` makes it the owner."""
    links: dict[Var, Var]
    """Local -> the field variable it was last bound from (`x = self.f`)."""
    markers: set[Var]
    """Synthetic variables that are not values: stored/popped container slots, released entries."""
    slot_markers: dict[str, Var]
    """`container[key]` -> its marker: held = an owned value stored there, moved = popped."""
    pop_markers: dict[str, Var]
    """Container spelling -> its marker: moved = an item was taken by `pop()`/`popleft()`/`popitem()`
    since the container was last tested (or changed otherwise, or the loop iteration began);
    held = its length was tested, so any number of pops may follow."""
    entry_of: dict[Var, Var]
    """Loop target over a container -> the marker of that container's released entries."""
    entries: dict[Var, str]
    """Released-entries marker -> the spelling of its container."""
    aliases: set[Var]
    """Locals bound to a container held inside another that outlives the call (loop targets)."""
    takes: dict[str, tuple[Take, Var]]
    """`@takes_from` field name -> its contract and marker (see `leases.check.takes`)."""
    view_slots: dict[Var, str]
    """Local bound to an item of a container of containers (`pins = self.pins.get(node)`) -> that
    item's slot spelling (`self.pins[node]`)."""
    contents: dict[Var, Var]
    """A name holding a container of owned values another owns (a parameter: the caller's; a loop
    target over a local container of containers: that container's) -> the marker held while those
    items may still be in it: a loop consuming every entry or a test finding it empty spends it, and
    `c.clear()` while it is held drops them (`OwnershipBase.setup_contents`)."""
    take_aliases: dict[Var, tuple[str, Var]]
    """Local bound from `self.F.get(k)` / `self.F[k]` / `self.F.setdefault(k, ...)` -> F and the
    marker held while the local may still name that item (see `leases.check.takes`)."""
    copies: dict[str, tuple[Var, Var | None]]
    """Container spelling -> the marker held while a copy of all its entries exists (`out =
    list(self.pins)`, `self.done.extend(self.pins)`) and the local that copy is in (None: a field):
    clearing the container then completes a move, and the local owns the entries. Entries stay
    after a move: the map is per function, not per path, so the marker's facts on each path say
    whether the copy is still live there (`OwnershipBase.copy_held_by`)."""

    awaited: set[Expression]
    """Calls awaited where they are made (`await f(x)`, which runs the coroutine's body at once): a
    coroutine that takes an owned value and is not among them may never run, as a task (given to
    `create_task`, a `TaskGroup`, `gather`) cancelled before it starts (`lease-untracked`)."""

    subsets: dict[Var, str]
    """Local bound to a filtered copy of an outliving container (`old = [p for p in self.pins if
    p.stale]`) -> that container's spelling: a loop over the local releases the container's entries."""
    view_displays: int
    """Above zero while evaluating a value bound to a name or returned as a declared list of views
    (`views: list[Borrowed[Lease[...]]] = [...]`): a borrowed item of a display lends."""

    def __init__(
        self, module: ModuleChecker, fn: FuncItem | None, body: list[Statement], enclosing: frozenset[Var],
    ) -> None:
        self.mod = module
        self.types = module.types
        self.calls = CallModel(module.types)
        self.fn = fn
        self.body = body
        self.enclosing = enclosing
        self.muted = 0
        self.frames = []
        self.exits = []
        self.st = {}
        self.loop_locals_cache = {}
        if fn is not None:
            self.locals, self.refs = _collect_locals(fn, body)
            self.locals -= enclosing
        else:
            self.locals, self.refs = set(), Counter()
        self.return_lends = False
        self.returns_any = False
        self.return_tracks = True
        self.exit_state = None
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
        self.contents = {}
        self.view_slots = {}
        self.copies = {}
        self.subsets = {}
        self.view_displays = 0
        self.awaited = set()


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

"""The entry points one rules module calls in another, as a protocol.

Each rules module implements its rules against `leases.check.function_state`
and reaches the others only through `Rules`: an expression's rules ask
`cond` for the narrowing of a test, a loop's rules ask `block` for its body,
and so on. `leases.check.flow.FunctionChecker` composes the modules and is
the one implementation; naming the calls here keeps each module importable
and readable on its own (no module imports another rules module for these).
"""

from __future__ import annotations

from typing import Protocol

from mypy.nodes import Block, Expression, FuncDef, Var

from leases.check.facts import Facts, State, Value


class Rules(Protocol):
    """What the rules of one module may ask of the others."""

    def ev(self, e: Expression) -> Value:
        """Evaluate `e` for its ownership effects; return where its value comes from (`expressions`)."""
        ...

    def cond(self, e: Expression) -> tuple[State | None, State | None]:
        """Evaluate a condition; return the states where it is true and false (`conditions`)."""
        ...

    def membership(self, e: Expression) -> tuple[Var, str, bool] | None:
        """For `k in c` / `k not in c` over a mapping of owned values: the marker of slot `c[k]`, the
        noun of its values, and whether the true branch finds the key (`conditions`)."""
        ...

    def truthiness_is_presence(self, e: Expression) -> bool:
        """Whether `e` is falsy exactly when it is None (`Lease | None`) (`conditions`)."""
        ...

    def discharged_by(self, method: FuncDef) -> frozenset[str]:
        """The owned fields of its receiver a helper method discharges on every normal exit (`flow`)."""
        ...

    def drained_by(self, fn: FuncDef) -> frozenset[int]:
        """The positions of the container parameters a function of this module empties on every normal exit (`flow`)."""
        ...

    def block(self, b: Block) -> None:
        """Analyse a block of statements from the current state (`statements`)."""
        ...

    def stored(self, container: Expression, key: Expression, line: int, column: int) -> None:
        """`c[k] = owned`: a second store under the same live key drops the first value (`expressions`)."""
        ...

    def iteration(self, it: Expression) -> tuple[str, Expression | None]:
        """What a loop over `it` binds, and the container for items it still holds (`compound`)."""
        ...

    def bind_loop_target(self, target: Expression, mode: str, container: Expression | None, line: int) -> None:
        """Bind a `for` (or comprehension) target according to `iteration`'s answer (`compound`)."""
        ...

    def earlier_releases(self, mode: str, container: Expression | None) -> tuple[Facts, bool]:
        """Where an earlier loop released the entries `container` still holds, and whether on every path (`compound`)."""
        ...

    def released_before(self, targets: list[Var], earlier: tuple[Facts, bool]) -> None:
        """Loop targets over entries an earlier loop released see them released (`compound`)."""
        ...

    def anonymous_container(self, v: Value) -> Var | None:
        """A name of its own for a container of owned values a call handed over and a loop reads (`compound`)."""
        ...

    def spendable(self, mode: str, container: Expression | None) -> Var | None:
        """What a loop over `container` spends when it consumes or hands on every item (`compound`)."""
        ...

    def copy_source(self, e: Expression, values: bool = False) -> Expression | None:
        """The container `e` copies every entry of (`list(c)`, `[p for p in c]`, `c`; with `values`, a
        mapping's values) (`compound`)."""
        ...

    def copy_bound(self, target: Expression, rvalue: Expression) -> None:
        """`out = list(self.pins)`: `out` holds a copy of every entry (`compound`)."""
        ...

    def container_view(self, target: Expression, rvalue: Expression) -> None:
        """`pins = self.pins.get(k)`: the local names a container an outliving one holds (`compound`)."""
        ...

    def alias_bound(self, target: Expression, rvalue: Expression) -> None:
        """`target = rvalue`: a `@takes_from` alias may now name a field's item, or no longer (`takes`)."""
        ...

    def took_from(self, container: Expression, line: int, column: int) -> None:
        """An owned entry was taken out of `container`: a `@takes_from` contract may be met (`takes`)."""
        ...

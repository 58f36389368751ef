"""Typed errors of the engine loop; each names the request, node, component or step involved."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine raises itself."""


class CorruptionError(EngineError):
    """Cached KV or state about to be reused differs from the reference model.

    ``where`` says which data (component, tier, node, token positions); the
    first differing position and both values are in the message.
    """

    def __init__(self, *, request: int | None, component: str, tier: str, node_id: int | None,
                 position: int, expected: object, found: object, where: str) -> None:
        who = "tree check" if request is None else f"request {request}"
        node = "" if node_id is None else f" node {node_id}"
        super().__init__(
            f"corruption ({who}): {component} {tier}{node} at token {position} ({where}): "
            f"expected {expected}, found {found}")
        self.request = request
        self.component = component
        self.tier = tier
        self.node_id = node_id
        self.position = position


class SchedulerStuckError(EngineError):
    """No request can make progress: nothing running, nothing in flight, and the next one does not fit."""

    def __init__(self, request: int, step: int, why: str) -> None:
        super().__init__(f"step {step}: request {request} cannot start and nothing else can progress: {why}")
        self.request = request
        self.step = step


class InvariantError(EngineError):
    """An engine-level invariant failed after a step (leaked lease, lost slot, bad counter)."""

    def __init__(self, step: int, message: str) -> None:
        super().__init__(f"step {step}: {message}")
        self.step = step

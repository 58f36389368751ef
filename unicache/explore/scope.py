"""`Scope`: the tiny configuration an exhaustive exploration covers, and its REPL `new` line."""

from __future__ import annotations

from dataclasses import dataclass

WRITE_POLICIES = ("write_back", "write_through")
COMPONENTS = ("full", "mamba")


class ScopeError(ValueError):
    """A `Scope` field is out of range or names something the exploration does not cover."""


@dataclass(frozen=True, slots=True)
class Scope:
    """What is explored: the cache's configuration, the sequences requests insert, and the bounds.

    The default is two sequences sharing a one-token prefix (`1,2` and `1,3`:
    three nodes once both are cached), page size 1, three device and three
    host Full pages (so a third node or a load-back needs eviction), two Mamba
    slots per tier, at most `max_in_flight` copies in flight started by the
    exploration (write-through and write-back may start more on their own) and
    `max_receipts` lock receipts held at once.
    """

    components: tuple[str, ...] = COMPONENTS
    write_policy: str = "write_back"
    sequences: tuple[tuple[int, ...], ...] = ((1, 2), (1, 3))
    device_tokens: int = 3
    host_tokens: int = 3
    mamba_slots: int = 2
    max_in_flight: int = 2
    max_receipts: int = 2
    faults: bool = True
    """Whether allocation refusals (`refuse-alloc`) are part of the alphabet."""

    def __post_init__(self) -> None:
        unknown = [c for c in self.components if c not in COMPONENTS]
        if unknown or "full" not in self.components or len(set(self.components)) != len(self.components):
            raise ScopeError(f"components must be full or full,mamba, got {','.join(self.components)}")
        if self.write_policy not in WRITE_POLICIES:
            raise ScopeError(f"write policy must be one of {', '.join(WRITE_POLICIES)}, "
                              f"got {self.write_policy!r}")
        for name in ("device_tokens", "host_tokens", "mamba_slots", "max_in_flight"):
            if getattr(self, name) < 1:
                raise ScopeError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_receipts < 0:
            raise ScopeError(f"max_receipts must be >= 0, got {self.max_receipts}")
        if not self.sequences or any(not s for s in self.sequences):
            raise ScopeError("every sequence needs at least one token")

    @property
    def mamba(self) -> bool:
        return "mamba" in self.components

    def new_line(self) -> str:
        """The REPL `new` command that starts this scope's cache (manual transfers: acks only by command)."""
        parts = ["new", "--components", ",".join(self.components), "--page-size", "1",
                 "--device-tokens", str(self.device_tokens), "--host-tokens", str(self.host_tokens),
                 "--write-policy", self.write_policy, "--write-through-threshold", "1"]
        if self.mamba:
            parts += ["--mamba-slots", str(self.mamba_slots), "--mamba-host-slots", str(self.mamba_slots)]
        parts += ["--device", "cpu", "--transfer", "manual", "--no-debug", "--history", "64"]
        return " ".join(parts)

"""Result records of cache operations (plain slots dataclasses, built on hot paths)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

from unicache.markers import FULL, MAMBA, SWA_IDX
from unicache.transfer.base import JobKind
from unicache.tree.node import Node


class TicketStatus(enum.Enum):
    IN_FLIGHT = "in_flight"
    DONE = "done"
    FAILED = "failed"
    STALE = "stale"
    TIMED_OUT = "timed_out"


@dataclass(slots=True)
class MatchResult:
    """What `match_prefix` found.

    `device_node`: deepest node usable straight from device (every component);
    `anchor`: deepest node usable after `load_back(anchor)`. The root stands
    for "nothing" (length 0). The remaining fields say what that load-back
    would move.
    """

    matched_len: int
    device_node: Node
    device_len: int
    anchor: Node
    anchor_len: int
    full_host_tokens: int
    swa_host_tokens: int
    mamba_host: bool
    worth_load_back: bool

    @property
    def host_len(self) -> int:
        return self.anchor_len - self.device_len

    @property
    def needs_load_back(self) -> bool:
        return self.anchor is not self.device_node


def match_result(
    matched: int, device_node: Node, anchor: Node, host_need: list[int], worth: bool
) -> MatchResult:
    """The `MatchResult` of a match; `host_need` holds what a load-back moves per component index."""
    return MatchResult(
        matched, device_node, device_node.end, anchor, anchor.end, host_need[FULL], host_need[SWA_IDX],
        host_need[MAMBA] > 0, worth,
    )


MambaOutcome = Literal["donated", "copied", "duplicate", "skipped", "none"]


@dataclass(slots=True)
class InsertResult:
    """What `insert` did with the donated slots."""

    node: Node
    new_tokens: int
    unevicted_tokens: int
    duplicate_pages_freed: int
    mamba: MambaOutcome
    prefix_missing: bool = False


@dataclass(slots=True)
class LoadBackResult:
    """The outcome a load-back ticket settles to."""

    ticket_id: int
    generation: int
    anchor: Node
    status: TicketStatus
    full_tokens: int
    swa_tokens: int
    mamba_moved: bool

    @property
    def ok(self) -> bool:
        return self.status is TicketStatus.DONE


@dataclass(slots=True)
class Completion:
    """One ticket settled by an ack (returned by `UniCache.poll`)."""

    ticket: int
    generation: int
    kind: JobKind
    status: TicketStatus
    anchor_id: int | None


@dataclass(slots=True)
class TimedOut:
    """What `UniCache.time_out` gave up on: the ticket, the joiners settled with it, the slots quarantined.

    `quarantined_slots` counts every source and destination row its copy may
    still read or write (per tier, a row listed twice counts twice); they stay
    quarantined until the late ack, for good if it never comes.
    """

    ticket: int
    generation: int
    kind: JobKind
    anchor_id: int
    joiners: tuple[int, ...]
    quarantined_slots: int

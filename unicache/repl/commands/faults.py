"""Fault injection into a live cache's allocators: `refuse-alloc`."""

from __future__ import annotations

from unicache.dump.schema import JSONObject
from unicache.repl.commands.base import Needs, command
from unicache.repl.errors import CommandSyntaxError
from unicache.repl.parser import Args, ReplArgumentParser
from unicache.repl.session import Session

_COMPONENTS = ("full", "swa", "mamba")
_TIERS = ("device", "host")


def _p_refuse(p: ReplArgumentParser) -> None:
    p.add_argument("component", choices=_COMPONENTS, help="the pool's component")
    p.add_argument("tier", choices=_TIERS, help="the pool's tier")
    p.add_argument("n", type=int, nargs="?", default=1, metavar="N",
                   help="allocations to refuse (default 1; 0 stops refusing)")


@command("refuse-alloc", "make a pool's allocator refuse its next N allocations (fault injection)", Needs.LIVE,
         "cache", _p_refuse)
def cmd_refuse_alloc(s: Session, a: Args) -> JSONObject:
    """Make the COMPONENT TIER pool refuse its next N allocations, as if it were short of room.

    Each allocation of at least one slot that would succeed is refused
    instead (nothing taken), whichever operation asks: an insert, a
    load-back, a backup, an eviction's write-back. The same fault as
    'unicache simulate --faults allocfail' (`SlotAllocator.refuse`); N
    replaces what is left of an earlier count. A component the cache does
    not have is an InvalidArgumentError.
    """
    from unicache.markers import SWA, Full, Mamba
    from unicache.transfer.base import Tier

    cache = s.live("refuse-alloc")
    n = a.get_int("n")
    if n < 0:
        raise CommandSyntaxError("refuse-alloc", f"N must be >= 0, got {n}")
    component = {"full": Full, "swa": SWA, "mamba": Mamba}[a.get_str("component")]
    tier = Tier.DEVICE if a.get_str("tier") == "device" else Tier.HOST
    alloc = cache.pools.pool(component, tier).alloc
    alloc.refuse = n
    return {"component": a.get_str("component"), "tier": tier.value, "refuse": n,
            "injected_refusals": alloc.injected_refusals}

"""The engine's ownership invariant: every live lease is owned by a ticket or receipt someone holds."""

from __future__ import annotations

from collections.abc import Iterable

from unicache.cache import UniCache
from unicache.markers import SWA, Full, Mamba
from unicache.engine.errors import InvariantError
from unicache.engine.holdings import Holdings
from unicache.engine.request import Request


def check_ownership(cache: UniCache, requests: Iterable[Request], holdings: Holdings, step: int) -> None:
    """Raise :class:`InvariantError` on a leaked or unowned lease, or on request slots the cache disagrees on.

    Owners are the cache's live tickets and quarantined (pre-reset) tickets
    and, per admitted request, its lock receipt and load-back ticket; the
    request-owned device slots must be exactly the ones the cache lends.
    """
    if cache.ledger.leaked:
        raise InvariantError(step, f"{cache.ledger.leaked} lease(s) leaked: {cache.ledger.leaks()}")
    owned: set[int] = set()
    for t in cache.live_tickets():
        owned.update(t.lease_ids().values())
    for q in cache.quarantine_records():
        owned.update(q.ticket.lease_ids().values())
    lent_full: set[int] = set()
    lent_swa: set[int] = set()
    lent_mamba: set[int] = set()
    for req in requests:
        receipt = holdings.receipt(req.rid)
        if receipt is not None:
            owned.update(receipt.lease_ids())
        ticket = holdings.ticket(req.rid)
        if ticket is not None:
            owned.update(ticket.lease_ids().values())
        lent_full.update(req.full_pages)
        lent_swa.update(req.swa_pages)
        if req.mamba_slot is not None:
            lent_mamba.add(req.mamba_slot)
    live = {lease.id for lease in cache.ledger.live()}
    stray = sorted(live - owned)
    if stray:
        raise InvariantError(step, f"live leases {stray} are owned by no ticket or receipt")
    for component, mine in ((Full, lent_full), (SWA, lent_swa), (Mamba, lent_mamba)):
        if component not in cache.config.components:
            continue
        theirs = cache.lent_slots(component)
        if theirs != mine:
            raise InvariantError(
                step, f"{component.__name__} request-owned slots disagree: cache lends "
                f"{sorted(theirs - mine)[:8]} not held by any request, requests hold "
                f"{sorted(mine - theirs)[:8]} the cache does not lend")

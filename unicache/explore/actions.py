"""The action alphabet: which REPL commands a state enables, as script lines.

Requests (`insert` of each scope sequence), `lock` of a device-resident node
and `unlock` of a held receipt, `backup` of a node without a host copy,
`load-back` of a node with host-only data, `evict device|host|mamba 1`,
`reset`, for each copy in flight (current or from before a reset) `ack`
and `ack --fail`, a duplicate `ack` of the newest settled ticket (stale when
it was issued before a reset), and `refuse-alloc` of each pool's next
allocation. Nothing enabled here can name something that does not exist;
what the cache may still refuse (an insert without room) is an expected
refusal, not a violation.
"""

from __future__ import annotations

from unicache.engine.script import tokens_text
from unicache.explore.replay import Replayed
from unicache.explore.scope import Scope
from unicache.markers import Full, Mamba
from unicache.transfer.base import Tier


def node_ref(tokens: tuple[int, ...]) -> str:
    """The REPL's name of the node whose path is `tokens`."""
    return f"t:{tokens_text(tokens)}"


def enabled(r: Replayed, scope: Scope) -> list[str]:
    """Every action line of the alphabet enabled in `r`'s state, in a fixed order."""
    cache = r.cache
    out = [f"insert {','.join(map(str, seq))}" for seq in scope.sequences]
    room_for_copy = len(r.manual.jobs) < scope.max_in_flight
    lockable: list[str] = []
    backups: list[str] = []
    loads: list[str] = []
    any_device = any_host = any_mamba = False
    for node in cache.nodes():
        if node.parent is None:
            continue
        info = cache.node_info(node)
        full = info.components["Full"]
        ref = node_ref(node.tokens())
        dev = full.device is not None
        host = full.host is not None
        mdev = mhost = False
        if scope.mamba:
            m = info.components["Mamba"]
            mdev, mhost = m.device is not None, m.host is not None
        any_device |= dev
        any_host |= host
        any_mamba |= mdev
        if dev:
            lockable.append(ref)
        if (dev and not host) or (mdev and not mhost):
            backups.append(ref)
        if (host and not dev) or (dev and mhost and not mdev):
            loads.append(ref)
    if len(r.session.receipts) < scope.max_receipts:
        out += [f"lock {ref}" for ref in lockable]
    out += [f"unlock R{rid}" for rid in sorted(r.session.receipts)]
    if room_for_copy:
        out += [f"backup {ref}" for ref in backups]
        out += [f"load-back {ref}" for ref in loads]
    if any_device:
        out.append("evict device 1")
    if any_host:
        out.append("evict host 1")
    if any_mamba:
        out.append("evict mamba 1")
    for ticket in r.manual.held():
        out += [f"ack T{ticket}", f"ack T{ticket} --fail"]
    settled = r.newest_settled()
    if settled is not None:
        out.append(f"ack T{settled} --generation {r.seen[settled][0]}")
    out.append("reset")
    if scope.faults:
        for name, component in (("full", Full), ("mamba", Mamba)):
            if name not in scope.components:
                continue
            for tier in (Tier.DEVICE, Tier.HOST):
                if cache.pools.pool(component, tier).alloc.refuse == 0:
                    out.append(f"refuse-alloc {name} {tier.value} 1")
    return out

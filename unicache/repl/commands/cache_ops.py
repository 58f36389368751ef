"""Commands that create or change a live cache: new, insert, match, lock/unlock, backup, evict,
reclaim, load-back, reset."""

from __future__ import annotations

from typing import TYPE_CHECKING

from unicache.dump.schema import JSON, DumpTicket, JSONObject
from unicache.repl.commands.base import Needs, command
from unicache.reasons import Reason, ReasonKind
from unicache.repl.commands.capacity import describe_shortfall
from unicache.repl.errors import CapacityError, CommandSyntaxError, HostOnlyNodeError, NeedsLiveCacheError, UnknownNameError
from unicache.repl.options import add_cache_options, config_from
from unicache.repl.parser import Args, ReplArgumentParser
from unicache.repl.refs import parse_receipt, parse_ticket, parse_tokens
from unicache.repl.session import Session

if TYPE_CHECKING:
    from leases import Borrowed
    from unicache.tickets import LockReceipt


def _leases_json(full: object, swa: object, mamba: object) -> JSONObject:
    out: JSONObject = {}
    for name, lease in (("full", full), ("swa", swa), ("mamba", mamba)):
        lid = getattr(lease, "id", None)
        if isinstance(lid, int):
            out[name] = lid
    return out


def _p_new(p: ReplArgumentParser) -> None:
    add_cache_options(p)


@command("new", "start a fresh cache (replaces the current one)", Needs.NOTHING, "cache", _p_new)
def cmd_new(s: Session, a: Args) -> JSONObject:
    """Start a fresh, empty cache and make it the session's cache.

    Whatever the session had (a cache, a dump, a trace) is closed first: held
    locks are unlocked and every in-flight copy is settled, so nothing leaks.
    With --transfer manual, copies wait until 'ack' (or 'step') completes them;
    the copy reads its source at that moment.
    """
    config, transfer = config_from(a)
    s.start_fresh(config, transfer)
    cache = s.live("new")
    return {
        "components": [c.__name__.lower() for c in config.components],
        "transfer": transfer,
        "root": cache.root.id,
        "config": {k: v for k, v in config.to_json().items() if isinstance(v, (int, float, str, bool)) or v is None},
    }


def _p_insert(p: ReplArgumentParser) -> None:
    p.add_argument("tokens", nargs="+", help="token ids: 5  1,2,3  1..8 (inclusive)")
    p.add_argument("--no-mamba", action="store_true", help="do not cache the request's Mamba state")
    p.add_argument("--copy-mamba", action="store_true",
                   help="keep the request's state slot; the cache copies it (mamba_donate=False)")


@command("insert", "cache a computed sequence, like a finished request", Needs.LIVE, "cache", _p_insert)
def cmd_insert(s: Session, a: Args) -> JSONObject:
    """Cache TOKENS the way a finished request does.

    match the tokens, lock the device-resident prefix, allocate device pages
    (and a Mamba slot) for the rest, write reference-model KV/state into them,
    insert, unlock. The end node becomes @last.
    """
    from unicache.markers import SWA, Full, Mamba
    from unicache.transfer.base import Tier

    cache = s.live("insert")
    mark = cache.reasons.mark()
    oracle = s.oracle
    if oracle is None:
        raise NeedsLiveCacheError("insert", s.source, "needs a fresh cache ('new'): in trace mode the replay's "
                                                      "own reference model owns the data")
    tokens = parse_tokens(a.strs("tokens"))
    ps = cache.config.page_size
    if len(tokens) % ps:
        raise CommandSyntaxError("insert", f"{len(tokens)} tokens is not a multiple of page size {ps}")
    m = cache.match_prefix(tokens)
    start = m.device_len
    receipt = cache.lock(m.device_node) if start else None
    pages = (len(tokens) - start) // ps
    full: list[int] | None = None
    swa: list[int] | None = None
    mamba: list[int] | None = None
    donate = not a.flag("copy_mamba")
    want_mamba = cache.config.mamba and not a.flag("no_mamba")
    mamba_unavailable = False
    try:
        full = cache.alloc_device(Full, pages)
        if full is None:
            raise _no_room(s, "full", pages)
        h = oracle.hashes(tokens)
        cache.write_slots(Full, full, oracle.full_pages(h, start, len(tokens)))
        if cache.config.swa_window is not None:
            swa = cache.alloc_device(SWA, pages)
            if swa is None:
                raise _no_room(s, "swa", pages)
            cache.write_slots(SWA, swa, oracle.swa_pages(h, start, len(tokens)))
        if want_mamba:
            mamba = cache.alloc_device(Mamba, 1)
            mamba_unavailable = mamba is None
            if mamba is not None:
                cache.write_slots(Mamba, mamba, oracle.mamba_rows(h, len(tokens)), Tier.DEVICE)
        res = cache.insert(tokens, full, start=start, swa_slots=swa,
                           mamba_slot=mamba[0] if mamba else None, mamba_donate=donate)
        full = swa = None
        if mamba is not None and donate:
            mamba = None
    finally:
        if full is not None:
            cache.free_device(Full, full)
        if swa is not None:
            cache.free_device(SWA, swa)
        if mamba is not None:
            cache.free_device(Mamba, mamba)
        if receipt is not None:
            cache.unlock(receipt)
    s.aliases["last"] = res.node.id
    return {
        "node": res.node.id,
        "tokens": len(tokens),
        "reused": start,
        "new_tokens": res.new_tokens,
        "unevicted_tokens": res.unevicted_tokens,
        "duplicate_pages_freed": res.duplicate_pages_freed,
        "mamba": res.mamba if cache.config.mamba else None,
        "mamba_slot_unavailable": mamba_unavailable,
        "mamba_reason": next((r.summary for r in reversed(cache.reasons.since(mark)) if r.component == "mamba"),
                             None),
        "prefix_missing": res.prefix_missing,
    }


def _no_room(s: Session, component: str, needed: int) -> CapacityError:
    """The refusal of an `insert` allocation, with who holds the pool's rows now."""
    s.invalidate()
    return CapacityError("insert", describe_shortfall(s.view(), component, "device", needed))


def _p_tokens(p: ReplArgumentParser) -> None:
    p.add_argument("tokens", nargs="+", help="token ids: 5  1,2,3  1..8 (inclusive)")


@command("match", "longest cached prefix: device hit, host hit, load-back anchor", Needs.LIVE, "cache", _p_tokens)
def cmd_match(s: Session, a: Args) -> JSONObject:
    """Match TOKENS against the tree (whole pages; splits a node on a partial match, like a request).

    Sets @device (deepest node usable from device) and @anchor (deepest node
    usable after a load-back) for later commands.
    """
    cache = s.live("match")
    m = cache.match_prefix(parse_tokens(a.strs("tokens")))
    s.aliases["device"] = m.device_node.id
    s.aliases["anchor"] = m.anchor.id
    return {
        "matched_len": m.matched_len,
        "device_node": m.device_node.id,
        "device_len": m.device_len,
        "anchor": m.anchor.id,
        "anchor_len": m.anchor_len,
        "host_len": m.host_len,
        "full_host_tokens": m.full_host_tokens,
        "swa_host_tokens": m.swa_host_tokens,
        "mamba_host": m.mamba_host,
        "needs_load_back": m.needs_load_back,
        "worth_load_back": m.worth_load_back,
    }


def _p_node(p: ReplArgumentParser) -> None:
    p.add_argument("node", help="#ID, ID, t:TOKENS, root, @device, @anchor or @last")


def _receipt_json(r: Borrowed[LockReceipt]) -> JSONObject:
    return {
        "receipt": r.id,
        "node": r.node.id,
        "length": r.length,
        "generation": r.generation,
        "leases": _leases_json(r.full, r.swa, r.mamba),
    }


@command("lock", "lock a node's device-resident path for a request (a receipt)", Needs.LIVE, "cache", _p_node)
def cmd_lock(s: Session, a: Args) -> JSONObject:
    """Lock the path ending at NODE (its device-resident part), as a running request does.

    Prints the receipt (R<id>) and the leases it took per component; 'unlock
    R<id>' releases exactly those. When NODE's own Full KV is host-only the
    receipt covers its deepest device ancestor, and says so; when nothing
    below the root is on device, the lock is refused (HostOnlyNodeError):
    'load-back NODE' first.
    """
    cache = s.live("lock")
    node = s.live_node("lock", a.get_str("node"))
    prefix = _device_prefix(s, node.id)
    r = cache.lock(node)
    out = _receipt_json(r)
    s.receipts[r.id] = r
    out["requested"] = node.id
    out["host_only_tail"] = prefix is not None
    return out


def _device_prefix(s: Session, node_id: int) -> int | None:
    """None when the node's Full KV is on device (or it is the root); else the deepest device
    ancestor the lock will cover. `HostOnlyNodeError` when that would be the root: a lock of
    nothing, which a user never means."""
    view = s.view()
    node = view.nodes[node_id]
    full = node.components.get("full")
    if node.parent is None or full is None or full.device is not None:
        return None
    ancestor = next((n.id for n in reversed(view.node_path(node_id)) if n.parent is not None
                     and (r := n.components.get("full")) is not None and r.device is not None), None)
    if ancestor is None:
        raise HostOnlyNodeError("lock", node_id, None)
    return ancestor


def _p_receipt(p: ReplArgumentParser) -> None:
    p.add_argument("receipt", help="R<id> from 'lock', or 'last' (the newest receipt held)")


@command("unlock", "release a lock receipt", Needs.LIVE, "cache", _p_receipt)
def cmd_unlock(s: Session, a: Args) -> JSONObject:
    """Release the leases of lock receipt RECEIPT (exactly those 'lock' took).

    Receipt ids are the cache's: 'insert' takes (and releases) a lock of its
    own, so ids may skip; 'lock' prints the one to use.
    """
    cache = s.live("unlock")
    name = a.get_str("receipt")
    if name == "last":
        if not s.receipts:
            raise UnknownNameError("receipt", "last", "no lock receipt is held by this session "
                                                      "('lock NODE' takes one; 'insert' releases its own)")
        name = str(max(s.receipts))
    r = s.receipt(parse_receipt(name))
    out = _receipt_json(r)
    cache.unlock(r)
    out["released"] = list(out["leases"].values()) if isinstance(out["leases"], dict) else []
    return out


@command("backup", "start a device->host backup of a node (async, acked)", Needs.LIVE, "cache", _p_node)
def cmd_backup(s: Session, a: Args) -> JSONObject:
    """Back NODE up to host (with its unbacked ancestors, as the cache decides).

    Prints the ticket, or null when there is nothing to back up or no host room.
    With --transfer manual the copy waits for 'ack T<id>'.
    """
    cache = s.live("backup")
    node = s.live_node("backup", a.get_str("node"))
    ticket = cache.backup(node)
    if ticket is not None:
        s.generations[ticket] = cache.epoch
    return {"node": node.id, "ticket": ticket}


_EVICT = {"device": ("full", "device"), "host": ("full", "host"), "mamba": ("mamba", "device"),
          "swa": ("swa", "device")}


def _p_evict(p: ReplArgumentParser) -> None:
    p.add_argument("what", choices=tuple(_EVICT), help="device/host: Full KV; mamba, swa: that component")
    p.add_argument("n", type=int, metavar="N", help="pages (Full/SWA) or slots (Mamba) to free")
    p.add_argument("--host", action="store_true", help="mamba/swa: evict from the host tier")


@command("evict", "evict N pages/slots: device | host | mamba | swa", Needs.LIVE, "cache", _p_evict)
def cmd_evict(s: Session, a: Args) -> JSONObject:
    """Evict at least N unpinned pages (Full/SWA) or slots (Mamba), least recently used first.

    'evict device N' evicts Full KV from device (leaf-first, cascading to SWA
    and Mamba on the node; backed-up nodes are demoted, unbacked ones backed
    up first under write-back). 'evict host N' evicts Full host copies.
    'evict mamba N' / 'evict swa N' evict that component (--host: host tier).
    Pinned candidates are skipped and counted (evict_blocked).
    """
    from unicache.markers import SWA, Full, Mamba

    cache = s.live("evict")
    comp_name, tier = _EVICT[a.get_str("what")]
    if a.flag("host"):
        if comp_name == "full":
            raise CommandSyntaxError("evict", "--host only applies to mamba and swa (use 'evict host N')")
        tier = "host"
    n = a.get_int("n")
    if n < 0:
        raise CommandSyntaxError("evict", f"N must be >= 0, got {n}")
    comp = {"full": Full, "swa": SWA, "mamba": Mamba}[comp_name]
    blocked = cache.counters.evict_blocked
    mark = cache.reasons.mark()
    before = {t.id for t in s.view().tickets}
    if s.manual is not None:
        s.manual.take_flushed()  # flushes of earlier commands (an insert's eviction) are not this one's
    freed = cache.evict_device(comp, n) if tier == "device" else cache.evict_host(comp, n)
    flushed = s.manual.take_flushed() if s.manual is not None else []
    s.invalidate()
    live = s.view().tickets
    started = sorted({t.id for t in live if t.kind == "backup" and t.id not in before}
                     | {t for t in flushed if t not in before})
    return {
        "component": comp_name,
        "tier": tier,
        "requested": n,
        "freed": freed,
        "blocked": cache.counters.evict_blocked - blocked,
        "pinned": _pinned(cache.reasons.since(mark)),
        "flushed": list(flushed),
        "backups_started": list(started),
        "in_flight": _rows_under_copies(live, comp_name, tier),
    }


def _rows_under_copies(tickets: tuple[DumpTicket, ...], component: str, tier: str) -> list[JSON]:
    """Per live ticket, the rows of pool `component.tier` its copies read or write (not evictable now)."""
    out: list[JSON] = []
    for t in tickets:
        rows: set[int] = set()
        for copy in t.copies:
            if copy.component != component:
                continue
            if copy.src_tier == tier:
                rows.update(copy.src)
            if copy.dst_tier == tier:
                rows.update(copy.dst)
        if rows:
            held: list[JSON] = [*sorted(rows)]
            out.append({"ticket": t.id, "kind": t.kind, "rows": held})
    return out


def _p_reclaim(p: ReplArgumentParser) -> None:
    p.add_argument("n", type=int, nargs="?", default=None, metavar="N", help="host pages to free (default: all it can)")


@command("reclaim", "free Full host copies that duplicate a device copy", Needs.LIVE, "cache", _p_reclaim)
def cmd_reclaim(s: Session, a: Args) -> JSONObject:
    """Reclaim up to N Full host pages that duplicate device pages (write-back).

    Consults Full pins only: a node under a Full lease is skipped (counted as
    reclaim_blocked); SWA or Mamba leases do not block it.
    """
    from unicache.markers import Full

    cache = s.live("reclaim")
    n = a.opt_int("n")
    if n is None:
        n = cache.config.host_capacity(Full)
    if n < 0:
        raise CommandSyntaxError("reclaim", f"N must be >= 0, got {n}")
    blocked = cache.counters.reclaim_blocked
    mark = cache.reasons.mark()
    freed = cache.reclaim_host_duplicates(n)
    return {"requested": n, "freed": freed, "blocked": cache.counters.reclaim_blocked - blocked,
            "pinned": _pinned(cache.reasons.since(mark))}


def _pinned(reasons: list[Reason]) -> list[JSON]:
    """The pinned candidates an eviction or reclaim skipped: node, component, the leases pinning it."""
    out: list[JSON] = []
    for r in reasons:
        if r.kind is ReasonKind.PINNED:
            leases: list[JSON] = [*r.leases]
            out.append({"node": r.nodes[0], "component": r.component, "leases": leases})
    return out


@command("load-back", "start a host->device load-back at an anchor (a ticket)", Needs.LIVE, "cache", _p_node)
def cmd_load_back(s: Session, a: Args) -> JSONObject:
    """Load NODE's host-only data back to device: one lease per component that moves data.

    Full: the evicted chain above NODE (plus its device ancestor); SWA: the
    window ending at NODE; Mamba: NODE's state. The ticket T<id> is held by the
    session and consumed when its ack settles it. Prints null when nothing
    needs moving or device room cannot be made.
    """
    cache = s.live("load-back")
    node = s.live_node("load-back", a.get_str("node"))
    mark = cache.reasons.mark()
    t = cache.load_back(node)
    if t is None:
        return _refusal(s, node.id, cache.reasons.since(mark))
    out: JSONObject = {
        "anchor": node.id,
        "ticket": t.id,
        "generation": t.generation,
        "leases": _leases_json(t.full, t.swa, t.mamba),
        "full_tokens": t.full_tokens,
        "swa_tokens": t.swa_tokens,
        "mamba_moved": t.mamba_moved,
    }
    s.generations[t.id] = t.generation
    s.tickets[t.id] = t
    return out


def reason_json(r: Reason) -> JSONObject:
    """A cache `Reason` as REPL JSON (the same keys as `Reason.to_json`)."""
    nodes: list[JSON] = [*r.nodes]
    leases: list[JSON] = [*r.leases]
    tickets: list[JSON] = [*r.tickets]
    return {"op": r.op, "kind": r.kind.value, "component": r.component, "nodes": nodes, "needed": r.needed,
            "free": r.free, "leases": leases, "tickets": tickets, "generation": r.generation,
            "quarantined": r.quarantined, "summary": r.summary}


def _refusal(s: Session, anchor: int, reasons: list[Reason]) -> JSONObject:
    """A load-back that returned None: the cache's reason (`why`); for a full pool, `room` says who
    holds its rows and `reason` is that summary, else `reason` is the cache's own."""
    why = reasons[-1]
    out: JSONObject = {"anchor": anchor, "ticket": None, "reason": why.summary, "why": reason_json(why),
                       "room": None}
    if why.kind is ReasonKind.NO_DEVICE_ROOM and why.component is not None:
        s.invalidate()
        room = describe_shortfall(s.view(), why.component, "device", why.needed)
        out["reason"] = room.summary
        out["room"] = room.to_json()
        out["room_summary"] = room.summary
    return out


def _p_ticket(p: ReplArgumentParser) -> None:
    p.add_argument("ticket", help="T<id> of a load-back this session holds")


@command("abandon", "give up a held load-back ticket, as an aborted request does", Needs.LIVE, "cache",
         _p_ticket)
def cmd_abandon(s: Session, a: Args) -> JSONObject:
    """Abandon load-back TICKET (the request was aborted while its copy is in flight).

    The cache keeps the ticket: its leases stay held until the copy's ack,
    then settle; nothing leaks and nothing is freed under the copy.
    """
    s.live("abandon")
    tid = parse_ticket(a.get_str("ticket"))
    t = s.tickets.pop(tid, None)
    if t is None:
        held = ", ".join(f"T{i}" for i in s.tickets) or "none"
        raise UnknownNameError("ticket", f"T{tid}", f"is not a load-back held by this session (held: {held}; "
                                                    f"settled tickets are consumed when their ack arrives)")
    leases = _leases_json(t.full, t.swa, t.mamba)
    t.abandon()
    return {"ticket": tid, "leases": leases}


def _p_overdue(p: ReplArgumentParser) -> None:
    p.add_argument("ticket", help="T<id> of a live ticket (load-back or backup), or one a reset quarantined")


@command("time-out", "give up on a ticket whose ack is overdue (its rows stay quarantined until the late ack)",
         Needs.LIVE, "cache", _p_overdue)
def cmd_time_out(s: Session, a: Args) -> JSONObject:
    """Time out TICKET, as a serving engine does when an ack is lost (`UniCache.time_out`).

    Its leases (and those of every ticket that joined its copy) are released
    now and it settles as timed_out; every row its copy may still touch stays
    quarantined until its late ack ('ack T<id>' then counts a late ack). A
    load-back this session holds settles timed_out at the next step.
    """
    cache = s.live("time-out")
    out = cache.time_out(parse_ticket(a.get_str("ticket")))
    return {"ticket": out.ticket, "generation": out.generation, "kind": out.kind.value,
            "joiners": list(out.joiners), "quarantined": out.quarantined_slots}


@command("reset", "drop the tree and advance the epoch (in-flight copies quarantined)", Needs.LIVE, "cache")
def cmd_reset(s: Session, a: Args) -> JSONObject:
    """Reset the cache: every lease is revoked, the tree dropped, the ledger epoch advanced.

    Slots an unfinished copy may still touch stay quarantined until that
    copy's (now stale) ack; ack it with 'ack T<id>' to see the stale ack
    counted and the quarantine released. Receipts held by the session stay
    valid to unlock (a stale settle).
    """
    cache = s.live("reset")
    epoch = cache.reset()
    s.aliases.clear()
    quarantine: list[JSON] = [
        {"ticket": q.ticket_id, "generation": q.generation, "kind": q.kind,
         "slots": {k: list(v) for k, v in q.slots.items()}}
        for q in cache.quarantine()
    ]
    return {"epoch": epoch, "root": cache.root.id, "quarantine": quarantine}


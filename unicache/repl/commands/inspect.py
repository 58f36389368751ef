"""Read-only commands, on a live cache or a dump: tree, pins, leases, lease, history, events, stats, check."""

from __future__ import annotations

from collections.abc import Callable

from leases import EventKind

from unicache.dump.schema import JSON, CrashDump, DumpEvent, JSONObject
from unicache.repl.commands.base import Needs, command
from unicache.repl.errors import CommandSyntaxError, OptionRangeError, UnknownNameError
from unicache.repl.parser import Args, ReplArgumentParser
from unicache.repl.refs import format_tokens, parse_lease, parse_node, parse_ticket
from unicache.repl.session import Session

_COMPONENTS = ("full", "swa", "mamba")


def _component(value: str | None) -> str | None:
    if value is None:
        return None
    c = value.lower()
    if c not in _COMPONENTS:
        raise CommandSyntaxError("", f"unknown component {value!r} (full, swa or mamba)")
    return c


def node_json(view: CrashDump, node_id: int, depth: int) -> JSONObject:
    node = view.nodes[node_id]
    doc = node.to_json()
    doc["depth"] = depth
    doc["path"] = format_tokens(view.tokens(node_id)) if node.parent is not None else ""
    return doc


def _p_tree(p: ReplArgumentParser) -> None:
    p.add_argument("node", nargs="?", default="root", help="subtree root (default: the whole tree)")
    p.add_argument("--depth", type=int, default=None, help="levels below NODE to show")
    p.add_argument("--pinned", action="store_true", help="only pinned nodes and their ancestors")


@command("tree", "the tree (or a subtree) with per-component residency and pins", Needs.VIEW, "inspect", _p_tree)
def cmd_tree(s: Session, a: Args) -> JSONObject:
    """Show the tree below NODE: each node's edge [start:end), its tokens, per component where the
    data is (D device, H host) and which leases pin it (L<id>)."""
    view = s.view()
    top = s.node_id(a.get_str("node"))
    limit = a.opt_int("depth")
    if limit is not None and limit < 0:
        raise OptionRangeError("tree", "--depth", limit, "an integer >= 0 (0: NODE alone)")
    keep: set[int] | None = None
    if a.flag("pinned"):
        keep = set()
        for node in view.subtree(top):
            if node.pins():
                keep.update(n.id for n in view.node_path(node.id))
        keep.add(top)
    nodes: list[JSON] = []
    stack = [(top, 0)]
    while stack:
        nid, depth = stack.pop()
        if keep is not None and nid not in keep:
            continue
        nodes.append(node_json(view, nid, depth))
        if limit is None or depth < limit:
            stack.extend((c, depth + 1) for c in reversed(view.nodes[nid].children))
    return {"root": top, "nodes": nodes}


def _lease_json(view: CrashDump, lease_id: int) -> JSONObject:
    """A live lease, its tickets and, in a dump of SGLang tree core "unicache" (`extra.lease_tiers`), the tier it pins."""
    lease = view.leases[lease_id]
    doc = lease.to_json()
    doc["tickets"] = [t.id for t in view.tickets if lease_id in t.leases.values()]
    tiers = view.extra.get("lease_tiers")
    if isinstance(tiers, dict) and isinstance(tiers.get(str(lease_id)), str):
        doc["tier"] = tiers[str(lease_id)]
    return doc


def _p_pins(p: ReplArgumentParser) -> None:
    p.add_argument("node", help="#ID, ID, t:TOKENS, root, @device, @anchor or @last")


@command("pins", "which leases pin a node, per component", Needs.VIEW, "inspect", _p_pins)
def cmd_pins(s: Session, a: Args) -> JSONObject:
    """List the leases pinning NODE, by component: owner, generation, acquisition site, and the
    ticket that owns each (if any)."""
    view = s.view()
    nid = s.node_id(a.get_str("node"))
    node = view.nodes[nid]
    comps: JSONObject = {}
    for name, res in node.components.items():
        comps[name] = {
            "device": res.to_json()["device"],
            "host": res.to_json()["host"],
            "leases": [_lease_json(view, lid) for lid in res.pins],
        }
    pinned: list[JSON] = [*sorted(node.pins())]
    return {
        "node": nid,
        "path": format_tokens(view.tokens(nid)),
        "span": [node.start, node.end],
        "components": comps,
        "pinned_by_components": pinned,
    }


def _p_leases(p: ReplArgumentParser) -> None:
    p.add_argument("--node", default=None, help="only leases pinning this node")
    p.add_argument("--component", default=None, help="full, swa or mamba")
    p.add_argument("--owner", default=None, help="only owners containing this text")


@command("leases", "live leases (filter by node, component, owner)", Needs.VIEW, "inspect", _p_leases)
def cmd_leases(s: Session, a: Args) -> JSONObject:
    """List live leases: id, component, owner, generation, the nodes they pin, acquisition site."""
    view = s.view()
    node = a.opt_str("node")
    nid = s.node_id(node) if node is not None else None
    comp = _component(a.opt_str("component"))
    owner = a.opt_str("owner")
    if owner == "":
        raise OptionRangeError("leases", "--owner", owner, "non-empty text (leave the option out for every owner)")
    out: list[JSON] = []
    for lease in view.leases.values():
        if nid is not None and nid not in lease.nodes:
            continue
        if comp is not None and lease.component != comp:
            continue
        if owner is not None and owner not in lease.owner:
            continue
        out.append(_lease_json(view, lease.id))
    return {"leases": out, "epoch": view.epoch}


def _events_for(view: CrashDump, *, lease: int | None = None, node: int | None = None,
                ticket: int | None = None) -> list[DumpEvent]:
    out: list[DumpEvent] = []
    for e in view.events:
        if lease is not None and e.lease != lease:
            continue
        if node is not None and node not in e.nodes:
            continue
        if ticket is not None and e.ticket != ticket and not (e.ticket is None and _owner_names_ticket(e.owner, ticket)):
            continue
        out.append(e)
    return out


def _of_component(view: CrashDump, comp: str | None) -> Callable[[DumpEvent], bool]:
    """The --component filter: an event of that component, or a ticket event (ack, failed or stale
    copy) of a ticket that took a lease of that component.

    Ticket events carry no component of their own (a ticket copies several); which components a
    ticket touched is read from the lease events in the ring that carry its id, so an ack whose
    ticket's acquires have aged out of the ring is left out.
    """
    if comp is None:
        return lambda e: True
    tickets = {e.ticket for e in view.events if e.component == comp and e.ticket is not None}
    return lambda e: e.component == comp or (e.component is None and e.lease is None and e.ticket in tickets)


def _owner_names_ticket(owner: str | None, ticket: int) -> bool:
    """Dumps written before lease events carried their ticket: the owner names it ("load_back#7@12")."""
    if owner is None:
        return False
    head = owner.split("@", 1)[0]
    return head.endswith(f"#{ticket}") and not head.startswith("lock")


def _p_overdue(p: ReplArgumentParser) -> None:
    p.add_argument("seconds", nargs="?", type=float, default=None,
                   help="age limit (default: the watchdog's limit recorded in a live dump)")


@command("overdue", "live leases held longer than an age limit (the lease watchdog's list)", Needs.VIEW, "inspect",
         _p_overdue)
def cmd_overdue(s: Session, a: Args) -> JSONObject:
    """List the live leases held longer than SECONDS, oldest first: id, component, owner, nodes, age.

    Ages come from the ledger's clock: a live dump records them (``extra.lease_ages``) and a REPL
    cache keeps one; the watchdog (``replay --lease-age-limit``) reports the same leases, and
    nothing here releases them. Without SECONDS the limit a live dump recorded is used."""
    view = s.view()
    ages = view.extra.get("lease_ages")
    if not isinstance(ages, dict):
        raise CommandSyntaxError("overdue", f"{s.source} records no lease ages (its ledger has no clock: a dump "
                                            f"written before ages were recorded, or by a cache built without one)")
    limit = a.opt_float("seconds")
    recorded = view.extra.get("lease_age_limit")
    if limit is None:
        if not isinstance(recorded, (int, float)) or isinstance(recorded, bool):
            raise CommandSyntaxError("overdue", "give the age limit in seconds (this view records none: "
                                                "replay --lease-age-limit puts it in live dumps)")
        limit = float(recorded)
    if not limit >= 0 or limit == float("inf"):
        raise OptionRangeError("overdue", "SECONDS", limit, "a finite number of seconds >= 0")
    out: list[tuple[float, JSONObject]] = []
    for lease in view.leases.values():
        age = ages.get(str(lease.id))
        if isinstance(age, (int, float)) and not isinstance(age, bool) and age > limit:
            doc = _lease_json(view, lease.id)
            doc["age_seconds"] = age
            out.append((age, doc))
    out.sort(key=lambda item: (-item[0], int(str(item[1]["id"]))))
    leases: list[JSON] = [doc for _, doc in out]
    return {"limit_seconds": limit, "leases": leases, "live": len(view.leases)}


def _p_lease(p: ReplArgumentParser) -> None:
    p.add_argument("lease", help="L<id>")


@command("lease", "one lease: owner, generation, site, what it pins, history", Needs.VIEW, "inspect", _p_lease)
def cmd_lease(s: Session, a: Args) -> JSONObject:
    """Show lease L<id>: component, owner, generation, acquisition site (debug mode), the nodes it
    pins now and its recorded scope, the ticket owning it, and its flight-recorder history.
    A lease that is no longer live is shown from its history alone."""
    view = s.view()
    lid = parse_lease(a.get_str("lease"))
    history = _events_for(view, lease=lid)
    if lid not in view.leases and not history:
        raise UnknownNameError("lease", f"L{lid}", "not live, and the flight recorder has no event for it")
    return {
        "lease": _lease_json(view, lid) if lid in view.leases else None,
        "live": lid in view.leases,
        "history": [e.to_json() for e in history],
    }


def _p_history(p: ReplArgumentParser) -> None:
    p.add_argument("target", nargs="?", default=None,
                   help="a node (#ID, t:TOKENS, ...), a lease L<id> or a ticket T<id> (default: every event)")
    p.add_argument("--ticket", default=None, help="only events of this ticket (T<id>) and its leases")
    p.add_argument("--lease", default=None, help="only events of this lease (L<id>)")
    p.add_argument("--node", default=None, help="only events touching this node")
    p.add_argument("--component", default=None, help="only events of this component: full, swa or mamba")
    p.add_argument("--kind", default=None, help="only events of this kind (see 'events --kind')")
    p.add_argument("--last", type=int, default=None, help="only the newest N events")


@command("history", "flight-recorder events of a node, lease, ticket or component (filters combine)",
         Needs.VIEW, "inspect", _p_history)
def cmd_history(s: Session, a: Args) -> JSONObject:
    """Events from the flight recorder touching TARGET: a node (pins, unpins, acquires and releases
    of leases pinning it, blocked evictions), a lease L<id>, or a ticket T<id> (its own events and
    those of its leases). --ticket, --lease, --node, --component and --kind narrow further; every
    filter must match. A node id no longer in the tree is still searched. A lease, ticket or node
    that is neither live nor in any event is an error (UnknownNameError), as for 'lease'."""
    view = s.view()
    lease: int | None = None
    ticket: int | None = None
    node: int | None = None
    target = a.opt_str("target")
    what: JSONObject = {}
    for text, kind in ((target, None), (a.opt_str("ticket"), "ticket"), (a.opt_str("lease"), "lease"),
                       (a.opt_str("node"), "node")):
        if text is None:
            continue
        kind = kind or _target_kind(text)
        if kind == "lease":
            lease = _known_lease(view, parse_lease(text))
            what["lease"] = lease
        elif kind == "ticket":
            ticket = _known_ticket(s, view, parse_ticket(text))
            what["ticket"] = ticket
        else:
            node = _known_node(s, view, text)
            what["node"] = node
    comp = _component(a.opt_str("component"))
    kind_filter = a.opt_str("kind")
    if kind_filter is not None and kind_filter not in _KINDS:
        raise CommandSyntaxError("history", f"unknown event kind {kind_filter!r} (one of {', '.join(sorted(_KINDS))})")
    if comp is not None:
        what["component"] = comp
    if kind_filter is not None:
        what["kind"] = kind_filter
    of_comp = _of_component(view, comp)
    events = [e for e in _events_for(view, lease=lease, node=node, ticket=ticket)
              if of_comp(e) and (kind_filter is None or e.kind == kind_filter)]
    last = a.opt_int("last")
    if last is not None:
        if last < 0:
            raise OptionRangeError("history", "--last", last, "an integer >= 0")
        events = events[-last:] if last > 0 else []
    return {"target": what, "events": [e.to_json() for e in events]}


_KINDS = frozenset(k.value for k in EventKind)


def _target_kind(text: str) -> str:
    if text[:1] in "Ll":
        return "lease"
    if text[:1] in "Tt" and not text.startswith("t:"):
        return "ticket"
    return "node"


def _known_lease(view: CrashDump, lid: int) -> int:
    if lid not in view.leases and not any(e.lease == lid for e in view.events):
        raise UnknownNameError("lease", f"L{lid}", "not live, and the flight recorder has no event for it")
    return lid


def _known_ticket(s: Session, view: CrashDump, tid: int) -> int:
    known = ({t.id for t in view.tickets} | {q.ticket for q in view.quarantine} | set(s.tickets) | set(s.results)
             | set(s.generations))
    if tid not in known and not _events_for(view, ticket=tid):
        raise UnknownNameError("ticket", f"T{tid}", "not live, not issued in this session, and the flight "
                                                    "recorder has no event for it")
    return tid


def _known_node(s: Session, view: CrashDump, text: str) -> int:
    ref = parse_node(text)
    if ref.id is None or ref.id in view.nodes:
        return s.node_id(text)
    if not _events_for(view, node=ref.id):
        raise UnknownNameError("node", text, "no such node in the tree, and the flight recorder has no event "
                                             "for it")
    return ref.id


def _p_events(p: ReplArgumentParser) -> None:
    p.add_argument("--last", type=int, default=30, help="newest N events (default 30; 0 = all)")
    p.add_argument("--kind", default=None, help="acquire, release, revoke, stale, leak, pin, unpin, epoch, ack, "
                                                 "stale-ack, duplicate-ack, failed-transfer, evict-blocked, "
                                                 "reclaim-blocked, note")
    p.add_argument("--component", default=None, help="full, swa or mamba")


@command("events", "the flight recorder (newest last)", Needs.VIEW, "inspect", _p_events)
def cmd_events(s: Session, a: Args) -> JSONObject:
    """The newest flight-recorder events: seq, step, kind, lease, component, owner, generation,
    nodes, ticket, detail."""
    view = s.view()
    kind = a.opt_str("kind")
    if kind is not None and kind not in _KINDS and all(e.kind != kind for e in view.events):
        raise CommandSyntaxError("events", f"unknown event kind {kind!r} (one of {', '.join(sorted(_KINDS))})")
    comp = _component(a.opt_str("component"))
    last = a.get_int("last")
    if last < 0:
        raise OptionRangeError("events", "--last", last, "an integer >= 0 (0: every event)")
    of_comp = _of_component(view, comp)
    events = [e for e in view.events if (kind is None or e.kind == kind) and of_comp(e)]
    if last > 0:
        events = events[-last:]
    return {"events": [e.to_json() for e in events], "total": len(view.events)}


@command("stats", "pools, counters, ledger", Needs.VIEW, "inspect")
def cmd_stats(s: Session, a: Args) -> JSONObject:
    """Pool occupancy (capacity, free, used, quarantined), cache counters, ledger counters, epoch."""
    view = s.view()
    return {
        "source": s.source,
        "epoch": view.epoch,
        "step": view.ledger.step,
        "nodes": len(view.nodes),
        "pools": {k: p.to_json() for k, p in view.pools.items()},
        "counters": dict(view.counters),
        "ledger": dict(view.ledger.counters),
        "leaks": [x.to_json() for x in view.ledger.leaks],
    }


@command("check", "sanity check (and the data oracle on a fresh cache)", Needs.VIEW, "inspect")
def cmd_check(s: Session, a: Args) -> JSONObject:
    """Run the cache's sanity check (pin sets recomputed from live leases, pool accounting, tree
    links, residency rules) and, on a fresh cache, compare every published slot with the
    reference model. On a dump, shows the check recorded when it was written plus every
    inconsistency re-checking the dump finds (one line each, naming its ids: tickets, jobs and
    leases that disagree, ledger counts, generations, pool counts, slots held twice; the
    last `inconsistencies` of `violations`). Reports; does not fail. Use 'assert clean' to make a script fail on violations."""
    cache = s.cache
    if cache is None or s.dump is not None:
        view = s.view()
        sanity = view.sanity
        recorded = [] if sanity is None else [v.to_json() for v in sanity.violations]
        found: list[JSON] = [v.to_json() for v in view.revalidate()]
        return {
            "recorded": True,
            "clean": None if sanity is None and not found else (sanity is None or sanity.ok) and not found,
            "violations": [*recorded, *found],
            "inconsistencies": len(found),
            "data": None,
        }
    report = cache.sanity_check()
    violations: list[JSON] = [
        {"kind": v.kind, "node": v.node_id, "component": v.component, "lease": v.lease_id, "detail": v.detail}
        for v in report.violations
    ]
    data: JSON = s.driver.data_check() if s.driver is not None else None
    clean = report.ok and (not isinstance(data, dict) or not data.get("mismatches"))
    return {"recorded": False, "clean": clean, "violations": violations, "data": data}

"""Human rendering (rich) of command envelopes; JSON mode prints the envelope itself.

Renderers only read the envelope, so what a person sees is exactly what a
script gets with --json. Data text is wrapped in `Text` so owner strings or
token lists are never parsed as rich markup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.console import Group, OverflowMethod, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from unicache.dump.schema import JSON, JSONObject
from unicache.repl.refs import format_tokens

Renderer = Callable[[JSONObject], RenderableType]
_RENDERERS: dict[str, Renderer] = {}


def _renders(name: str) -> Callable[[Renderer], Renderer]:
    def register(fn: Renderer) -> Renderer:
        _RENDERERS[name] = fn
        return fn

    return register


def _t(value: object, style: str = "") -> Text:
    return Text("-" if value is None else str(value), style=style)


def _obj(value: JSON) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _list(value: JSON) -> list[JSON]:
    return value if isinstance(value, list) else []


def _ids(prefix: str, values: JSON) -> str:
    return " ".join(f"{prefix}{v}" for v in _list(values)) or "-"


def _leases(leases: JSON) -> str:
    return "  ".join(f"{k} L{v}" for k, v in _obj(leases).items()) or "no leases"


def _kv_table(doc: JSONObject, keys: list[str] | None = None) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold cyan")
    table.add_column()
    for k in keys if keys is not None else [k for k in doc if k not in ("cmd", "args", "ok", "expect_error")]:
        if k in doc:
            v = doc[k]
            table.add_row(_t(k), _t(v if not isinstance(v, (dict, list)) else _compact(v)))
    return table


def _table(columns: Iterable[str], title: str = "", overflow: OverflowMethod = "ellipsis") -> Table:
    """A table with these column headers and, when given, a left-justified title."""
    table = Table(title=title or None, title_justify="left")
    for col in columns:
        table.add_column(col, overflow=overflow)
    return table


def _compact(value: JSON) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_compact(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v) for v in value) + "]"
    return "null" if value is None else str(value)


def render(envelope: JSONObject) -> RenderableType | None:
    """The human view of one command's outcome (None when there is nothing to show)."""
    if not envelope.get("ok"):
        err = _obj(envelope.get("error"))
        expected = " (expected)" if envelope.get("expect_error") else ""
        return Text.assemble(
            (f"error{expected} ", "bold red" if not expected else "yellow"),
            (f"[{err.get('type')}] ", "red"),
            (str(err.get("message")), ""),
        )
    name = envelope.get("cmd")
    fn = _RENDERERS.get(name if isinstance(name, str) else "")
    body = fn(envelope) if fn is not None else _kv_table(envelope)
    parts = [body]
    completions = _list(envelope.get("completions"))
    if completions:
        parts.append(_acks_table(completions, "settled by the engine's acks"))
    unmet = envelope.get("unmet")
    if isinstance(unmet, str):
        parts.append(Text.assemble(("unexpected success ", "bold red"), (unmet, "")))
    return body if len(parts) == 1 else Group(*parts)


@_renders("new")
def _new(d: JSONObject) -> RenderableType:
    return Text.assemble(("new cache ", "bold green"), (f"{'+'.join(str(c) for c in _list(d['components']))}, "
                                                        f"{d['transfer']} transfers, root #{d['root']}", ""))


@_renders("insert")
def _insert(d: JSONObject) -> RenderableType:
    mamba = f", mamba {d['mamba']}" if d.get("mamba") is not None else ""
    missing = " PREFIX MISSING (nothing inserted)" if d.get("prefix_missing") else ""
    return Text(f"inserted {d['tokens']} tokens -> node #{d['node']} (reused {d['reused']}, new {d['new_tokens']}, "
                f"unevicted {d['unevicted_tokens']}, duplicate pages freed {d['duplicate_pages_freed']}{mamba})"
                f"{missing}")


@_renders("match")
def _match(d: JSONObject) -> RenderableType:
    return _kv_table(d, ["matched_len", "device_node", "device_len", "anchor", "anchor_len", "host_len",
                         "full_host_tokens", "swa_host_tokens", "mamba_host", "needs_load_back", "worth_load_back"])


@_renders("lock")
def _lock(d: JSONObject) -> RenderableType:
    text = Text(f"R{d['receipt']} locks #{d['node']} ({d['length']} tokens, generation {d['generation']}): "
                f"{_leases(d['leases'])}")
    if d.get("host_only_tail"):
        text.append(f" — #{d['requested']} itself is host-only: only its device prefix is locked "
                    f"('load-back #{d['requested']}' to lock all of it)", style="yellow")
    return text


@_renders("unlock")
def _unlock(d: JSONObject) -> RenderableType:
    return Text(f"R{d['receipt']} unlocked: released {_ids('L', d['released'])}")


@_renders("backup")
def _backup(d: JSONObject) -> RenderableType:
    if d["ticket"] is None:
        return Text(f"nothing to back up at #{d['node']} (already backed up or in flight, or no host room)")
    return Text(f"T{d['ticket']}: backup of #{d['node']} submitted")


@_renders("evict")
def _evict(d: JSONObject) -> RenderableType:
    flushed = f", flushed backups {_ids('T', d['flushed'])}" if _list(d.get("flushed")) else ""
    started = _list(d.get("backups_started"))
    backups = f"; started backups {_ids('T', started)}" if started else ""
    held = "; ".join(f"T{_obj(x)['ticket']} ({_obj(x)['kind']}) {_compact(_obj(x)['rows'])}"
                     for x in _list(d.get("in_flight")))
    copies = f"; rows under in-flight copies: {held}" if held else ""
    return Text(f"evicted {d['freed']} {d['component']} {d['tier']} (asked {d['requested']}; "
                f"{d['blocked']} pinned candidates skipped{flushed}){backups}{copies}{_pinned_text(d)}")


@_renders("reclaim")
def _reclaim(d: JSONObject) -> RenderableType:
    return Text(f"reclaimed {d['freed']} Full host pages ({d['blocked']} skipped: Full-pinned){_pinned_text(d)}")


def _pinned_text(d: JSONObject) -> str:
    rows = _list(d.get("pinned"))
    if not rows:
        return ""
    by = "; ".join(f"#{_obj(x)['node']} {_obj(x)['component']} by "
                   f"{', '.join(f'L{i}' for i in _list(_obj(x)['leases']))}" for x in rows)
    return f"; pinned: {by}"


@_renders("load-back")
def _load_back(d: JSONObject) -> RenderableType:
    if d["ticket"] is None:
        summary = d.get("room_summary")
        room = f" ({summary})" if isinstance(summary, str) and summary != d["reason"] else ""
        return Text(f"no load-back at #{d['anchor']}: {d['reason']}{room}")
    moves = [f"{d['full_tokens']} full tokens"]
    if d.get("swa_tokens"):
        moves.append(f"{d['swa_tokens']} swa tokens")
    if d.get("mamba_moved"):
        moves.append("mamba state")
    return Text(f"T{d['ticket']}: load-back at #{d['anchor']} (generation {d['generation']}), "
                f"{_leases(d['leases'])}; moves {', '.join(moves)}")


@_renders("abandon")
def _abandon(d: JSONObject) -> RenderableType:
    return Text(f"T{d['ticket']} abandoned: its leases ({_leases(d['leases'])}) settle when its copy is acked")


@_renders("time-out")
def _time_out(d: JSONObject) -> RenderableType:
    joiners = _list(d["joiners"])
    riders = f" with joiners {', '.join(f'T{j}' for j in joiners)}" if joiners else ""
    return Text(f"T{d['ticket']} ({d['kind']}, generation {d['generation']}) timed out{riders}: leases released, "
                f"{d['quarantined']} rows quarantined until its late ack")


@_renders("refuse-alloc")
def _refuse_alloc(d: JSONObject) -> RenderableType:
    return Text(f"{d['component']} {d['tier']} pool: the next {d['refuse']} allocation(s) will be refused "
                f"({d['injected_refusals']} refused so far)")


@_renders("reset")
def _reset(d: JSONObject) -> RenderableType:
    q = _list(d["quarantine"])
    held = "; ".join(f"T{_obj(x)['ticket']} ({_compact(_obj(x)['slots'])})" for x in q) or "nothing"
    return Text(f"reset: epoch {d['epoch']}, new root #{d['root']}; quarantined until their stale acks: {held}")


def _acks_table(acks: list[JSON], title: str = "") -> Table:
    table = _table(("ticket", "generation", "ok", "kind", "status", "node"), title)
    for a in acks:
        x = _obj(a)
        status = str(x.get("status"))
        style = {"done": "green", "failed": "red", "stale": "yellow", "duplicate": "yellow"}.get(status, "")
        table.add_row(_t(f"T{x.get('ticket')}"), _t(x.get("generation")), _t(x.get("ok")), _t(x.get("kind")),
                      _t(status, style), _t(None if x.get("node") is None else f"#{x.get('node')}"))
    return table


@_renders("ack")
def _ack(d: JSONObject) -> RenderableType:
    acks = _list(d["acks"])
    if not acks:
        return Text("no ack to deliver")
    return _acks_table(acks)


@_renders("withhold")
def _withhold(d: JSONObject) -> RenderableType:
    return Text(f"T{d['ticket']} {'withheld' if d['withheld'] else 'released'}")


@_renders("tickets")
def _tickets(d: JSONObject) -> RenderableType:
    parts: list[RenderableType] = []
    tickets = _list(d["tickets"])
    table = _table(("ticket", "kind", "node", "gen", "status", "leases", "copies", "job", "held by"),
                   f"live tickets ({d.get('engine')})")
    for t in tickets:
        x = _obj(t)
        copies = ", ".join(f"{_obj(c).get('component')} {_obj(c).get('src_tier')}->{_obj(c).get('dst_tier')} "
                           f"{len(_list(_obj(c).get('src')))}" for c in _list(x.get("copies")))
        job = "withheld" if x.get("withheld") else "held" if x.get("job_held") else "-"
        table.add_row(_t(f"T{x['id']}"), _t(x["kind"]), _t(f"#{x['node']}"), _t(x["generation"]), _t(x["status"]),
                      _t(_leases(x["leases"])), _t(copies or "-"), _t(job, "yellow" if job == "withheld" else ""),
                      _t(_holder(x)))
    parts.append(table if tickets else Text("no live tickets"))
    settled = _list(d.get("settled"))
    if settled:
        done = _table(("ticket", "anchor", "status", "full tokens", "swa tokens", "mamba"),
                      "load-backs settled in this session")
        for item in settled:
            x = _obj(item)
            done.add_row(_t(f"T{x['ticket']}"), _t(f"#{x['anchor']}"), _t(x["status"]), _t(x["full_tokens"]),
                         _t(x["swa_tokens"]), _t(x["mamba_moved"]))
        parts.append(done)
    quarantine = _list(d["quarantine"])
    if quarantine:
        q = _table(("ticket", "kind", "generation", "slots"), "quarantine (waiting for stale acks)")
        for item in quarantine:
            x = _obj(item)
            q.add_row(_t(f"T{x['ticket']}"), _t(x["kind"]), _t(x["generation"]), _t(_compact(x["slots"])))
        parts.append(q)
    return Group(*parts)


def _holder(ticket: JSONObject) -> str:
    """Who owns a ticket: the cache (backups, abandoned load-backs), this session, or a request."""
    if ticket.get("kind") == "backup":
        return "cache"
    if ticket.get("abandoned"):
        return "cache (abandoned)"
    return "session" if ticket.get("held_by_session") else "request"


@_renders("step")
def _step(d: JSONObject) -> RenderableType:
    idle = " — idle, nothing left to do" if d["idle"] else ""
    lines: list[RenderableType] = [Text(f"{d['steps']} step(s), now at step {d['step']}{idle}")]
    acks = [a for r in _list(d["reports"]) for a in _list(_obj(r).get("acks"))]
    if acks:
        lines.append(_acks_table(acks))
    return Group(*lines)


@_renders("run")
def _run(d: JSONObject) -> RenderableType:
    head = Text(f"reached '{d['condition']}' after {d['steps']} step(s) (step {d['step']})", style="green")
    acks = _list(d.get("acks"))
    if not acks:
        return head
    title = f"acks delivered ({d['acks_delivered']}, newest {len(acks)} shown)" if d.get("acks_delivered") != len(
        acks) else "acks delivered"
    return Group(head, _acks_table(acks, title))


def _residency(node: JSONObject) -> Text:
    out = Text()
    for name, res in _obj(node["components"]).items():
        r = _obj(res)
        tiers = ("D" if r.get("device") is not None else "") + ("H" if r.get("host") is not None else "")
        out.append(f" {name}:", style="dim")
        out.append(tiers or "-", style="green" if "D" in tiers else "blue" if tiers else "dim")
    return out


def _pins_text(node: JSONObject) -> Text:
    out = Text()
    pinned = [(name, _list(_obj(res).get("pins"))) for name, res in _obj(node["components"]).items()]
    pinned = [(n, p) for n, p in pinned if p]
    style = "bold red" if len(pinned) >= 2 else "yellow"
    for name, ids in pinned:
        out.append(f"  {name}{{{' '.join(f'L{i}' for i in ids)}}}", style=style)
    return out


def _node_label(node: JSONObject) -> Text:
    label = Text(f"#{node['id']}", style="bold")
    if node.get("parent") is None:
        label.append(" root")
    else:
        label.append(f" [{node['start']}:{node['end']}) ", style="dim")
        label.append(_edge(node))
    label.append_text(_residency(node))
    label.append_text(_pins_text(node))
    return label


def _edge(node: JSONObject) -> str:
    key = _list(node.get("key"))
    return format_tokens([k for k in key if isinstance(k, int)], limit=4)


@_renders("tree")
def _tree(d: JSONObject) -> RenderableType:
    nodes = [_obj(n) for n in _list(d["nodes"])]
    if not nodes:
        return Text("empty")
    top = Tree(_node_label(nodes[0]))
    stack: list[tuple[int, Tree]] = [(int(str(nodes[0]["depth"])), top)]
    for node in nodes[1:]:
        depth = int(str(node["depth"]))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else top
        branch = parent.add(_node_label(node))
        stack.append((depth, branch))
    return top


def short_site(site: JSON) -> str | None:
    """`file.py:LINE:function` of an acquisition site (the JSON keeps the full path)."""
    if not isinstance(site, str):
        return None
    return site.replace("\\", "/").rsplit("/", 1)[-1]


def _lease_table(leases: list[JSON], title: str = "") -> Table:
    table = _table(("lease", "component", "owner", "gen", "nodes", "ticket", "site"), title, overflow="fold")
    for item in leases:
        x = _obj(item)
        comp = f"{x['component']} ({x['tier']})" if isinstance(x.get("tier"), str) else x["component"]
        table.add_row(_t(f"L{x['id']}"), _t(comp), _t(x["owner"]), _t(x["generation"]),
                      _t(_ids("#", x["nodes"])), _t(_ids("T", x.get("tickets", []))), _t(short_site(x.get("site")), "dim"))
    return table


@_renders("overdue")
def _overdue(d: JSONObject) -> RenderableType:
    leases = _list(d["leases"])
    if not leases:
        return Text(f"no lease held longer than {d['limit_seconds']}s ({d['live']} live)")
    table = _table(("lease", "component", "owner", "age (s)", "nodes", "ticket"),
                   f"{len(leases)} of {d['live']} live lease(s) held longer than {d['limit_seconds']}s "
                   f"(reported, never released by force)", overflow="fold")
    for item in leases:
        x = _obj(item)
        table.add_row(_t(f"L{x['id']}"), _t(x["component"]), _t(x["owner"]), _t(x["age_seconds"], "bold yellow"),
                      _t(_ids("#", x["nodes"])), _t(_ids("T", x.get("tickets", []))))
    return table


@_renders("pins")
def _pins(d: JSONObject) -> RenderableType:
    span = _list(d["span"])
    head = Text(f"#{d['node']} [{span[0]}:{span[1]}) path {d['path'] or '(root)'}", style="bold")
    parts: list[RenderableType] = [head]
    comps = _obj(d["components"])
    for name, res in comps.items():
        r = _obj(res)
        leases = _list(r.get("leases"))
        where = f"device {_compact(r.get('device'))}, host {_compact(r.get('host'))}"
        if leases:
            parts.append(_lease_table(leases, f"{name}: {len(leases)} lease(s); {where}"))
        else:
            parts.append(Text(f"{name}: not pinned; {where}", style="dim"))
    n = len(_list(d["pinned_by_components"]))
    if n >= 2:
        parts.append(Text(f"pinned by {n} components at once: {', '.join(str(c) for c in _list(d['pinned_by_components']))}",
                          style="bold red"))
    return Group(*parts)


@_renders("leases")
def _leases_cmd(d: JSONObject) -> RenderableType:
    leases = _list(d["leases"])
    if not leases:
        return Text("no live leases")
    return _lease_table(leases, f"{len(leases)} live lease(s), epoch {d['epoch']}")


def _events_table(events: list[JSON], title: str = "") -> Table:
    table = _table(("seq", "step", "kind", "lease", "comp", "owner", "gen", "nodes", "ticket", "detail"), title,
                   overflow="fold")
    for item in events:
        x = _obj(item)
        kind = str(x["kind"])
        style = {"leak": "bold red", "stale-ack": "yellow", "duplicate-ack": "yellow", "failed-transfer": "red", "revoke": "yellow",
                 "stale": "yellow", "evict-blocked": "magenta", "reclaim-blocked": "magenta"}.get(kind, "")
        lease = x.get("lease")
        table.add_row(_t(x["seq"]), _t(x["step"]), _t(kind, style), _t(None if lease is None else f"L{lease}"),
                      _t(x.get("component")), _t(x.get("owner")), _t(x["generation"]), _t(_ids("#", x["nodes"])),
                      _t(None if x.get("ticket") is None else f"T{x['ticket']}"), _t(x.get("detail") or ""))
    return table


@_renders("lease")
def _lease(d: JSONObject) -> RenderableType:
    parts: list[RenderableType] = []
    lease = d.get("lease")
    if isinstance(lease, dict):
        parts.append(_kv_table(lease, ["id", "component", "tier", "owner", "generation", "site", "nodes", "scope",
                                       "tickets"]))
    else:
        parts.append(Text("not live (released, revoked or leaked); history only", style="yellow"))
    history = _list(d["history"])
    parts.append(_events_table(history, "history") if history else Text("no events in the flight recorder"))
    return Group(*parts)


@_renders("history")
def _history(d: JSONObject) -> RenderableType:
    events = _list(d["events"])
    target = _obj(d["target"])
    prefix = {"node": "#", "lease": "L", "ticket": "T"}
    what = " ".join(f"{k} {prefix.get(k, '')}{v}" for k, v in target.items()) or "everything"
    return _events_table(events, f"history of {what}") if events else Text(f"no events for {what}")


@_renders("events")
def _events(d: JSONObject) -> RenderableType:
    events = _list(d["events"])
    return _events_table(events, f"{len(events)} of {d['total']} events") if events else Text("no events")


@_renders("stats")
def _stats(d: JSONObject) -> RenderableType:
    pools = _table(("pool", "capacity", "used", "free", "quarantined"),
                   f"{d['source']}: epoch {d['epoch']}, step {d['step']}, {d['nodes']} nodes")
    for name, p in _obj(d["pools"]).items():
        x = _obj(p)
        pools.add_row(_t(name), _t(x["capacity"]), _t(x["used"]), _t(x["free"]), _t(x["quarantined"]))
    counters: JSONObject = {k: v for k, v in _obj(d["counters"]).items() if v}
    ledger = _obj(d["ledger"])
    return Group(pools, Text("ledger: " + _compact(ledger)), Text("counters (non-zero): " + _compact(counters)))


def _inconsistencies(d: JSONObject) -> str:
    """How many of a dump check's findings re-checking the dump added (after the recorded ones)."""
    n = d.get("inconsistencies")
    if not isinstance(n, int) or not n:
        return ""
    return f"; re-checking the dump found {n} inconsistenc{'y' if n == 1 else 'ies'}"


def _finding_line(v: JSONObject) -> Text:
    """One finding of a dump check as one line: its kind, the ids it carries, its detail (wrapped, never cut)."""
    ids = [f"#{v['node']}" if v.get("node") is not None else "", str(v.get("component") or ""),
           f"L{v['lease']}" if v.get("lease") is not None else ""]
    where = " ".join(x for x in ids if x)
    return Text(f"{v['kind']}{' ' + where if where else ''}: {v['detail']}")


@_renders("check")
def _check(d: JSONObject) -> RenderableType:
    parts: list[RenderableType] = []
    recorded = " (as recorded in the dump)" if d.get("recorded") else ""
    clean = d.get("clean")
    if clean is None:
        parts.append(Text("the dump recorded no sanity check", style="yellow"))
    elif clean:
        data = _obj(d.get("data"))
        extra = f"; {data['checked']} slots match the reference model" if data else ""
        parts.append(Text(f"clean{recorded}{extra}", style="bold green"))
    else:
        parts.append(Text(f"NOT clean{recorded}{_inconsistencies(d)}", style="bold red"))
    violations = _list(d.get("violations"))
    mismatches = _list(_obj(d.get("data")).get("mismatches"))
    if d.get("recorded"):
        parts.extend(_finding_line(_obj(v)) for v in violations)
    elif violations or mismatches:
        table = _table(("kind", "node", "component", "lease", "detail"), overflow="fold")
        for v in violations:
            x = _obj(v)
            table.add_row(_t(x["kind"]), _t(x["node"]), _t(x["component"]),
                          _t(None if x.get("lease") is None else f"L{x['lease']}"), _t(x["detail"]))
        for m in mismatches:
            x = _obj(m)
            table.add_row(_t("data"), _t(x["node"]), _t(f"{x['component']}.{x['tier']}"), _t(None), _t(x["detail"]))
        parts.append(table)
    return Group(*parts)


@_renders("dot")
def _dot(d: JSONObject) -> RenderableType:
    if d.get("file") is None:
        return Text(str(d.get("dot", "")))
    return Text(f"wrote {d['file']} ({d['nodes']} nodes); render with: dot -Tsvg {d['file']} -o tree.svg")


@_renders("dump")
def _dump(d: JSONObject) -> RenderableType:
    return Text(f"wrote {d['file']}; open with: unicache repl --dump {d['file']}")


@_renders("help")
def _help(d: JSONObject) -> RenderableType:
    if "commands" in d:
        table = Table(title=f"commands ({d['source']})", title_justify="left", show_header=False, box=None)
        table.add_column(style="bold cyan")
        table.add_column()
        table.add_column(style="dim")
        for c in _list(d["commands"]):
            x = _obj(c)
            table.add_row(_t(x["name"]), _t(x["summary"]), _t("live cache" if x["needs"] == "live" else ""))
        note = Text("'live cache' commands are not available on a dump. 'help COMMAND' for details; "
                    "'help names', 'help conditions', 'help scripts'.", style="dim")
        return Group(table, note)
    return Text(str(d["help"]))


@_renders("assert")
def _assert(d: JSONObject) -> RenderableType:
    return Text(f"ok: {'not ' if d.get('negated') else ''}{d['condition']}", style="green")


@_renders("quit")
def _quit(d: JSONObject) -> RenderableType:
    return Text("")

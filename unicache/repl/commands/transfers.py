"""Commands about transfers and time: ack, withhold, tickets, step, run until."""

from __future__ import annotations

from unicache.dump.schema import JSON, JSONObject
from unicache.repl.commands.base import Needs, command
from unicache.repl.conditions import HELP as CONDITIONS_HELP
from unicache.repl.conditions import Probe, parse_condition
from unicache.repl.errors import (
    CommandSyntaxError,
    ConditionError,
    JoinedTicketError,
    NeedsManualTransferError,
    OptionRangeError,
)
from unicache.repl.interrupt import StepLoop
from unicache.repl.parser import Args, ReplArgumentParser
from unicache.repl.refs import parse_ticket
from unicache.repl.session import Session, deliver_json


def _p_ack(p: ReplArgumentParser) -> None:
    p.add_argument("ticket", help="T<id>, or 'all' (every held job that is not withheld, oldest first)")
    p.add_argument("--fail", action="store_true", help="the copy failed: nothing is copied, the ack says ok=false")
    p.add_argument("--detail", default="", help="text carried by a failed ack")
    p.add_argument("--generation", type=int, default=None,
                   help="deliver an ack with this generation (e.g. a forged or stale one)")


@command("ack", "complete a held copy now and deliver its ack (or a duplicate/stale one)", Needs.LIVE,
         "transfers", _p_ack)
def cmd_ack(s: Session, a: Args) -> JSONObject:
    """Deliver the ack of TICKET (or of every held, not withheld job with 'all'; Ctrl-C stops 'all'
    between two acks).

    With --transfer manual the held job's copy runs now, reading its source
    now, then the ack is delivered. A ticket whose job was already acked gets a
    duplicate ack (counted, never releases anything newer). A load-back (or
    backup) that joined another ticket's copy, still in flight, has no ack of
    its own: acking it is refused (JoinedTicketError, naming the ticket to
    ack, whose ack settles both), before anything changes. After 'reset' the
    ack is stale (counted, frees the ticket's quarantined slots). --generation
    forges the generation; an id or generation the cache never issued is an
    error (UnknownTicketError).
    """
    from unicache.transfer.base import Ack

    cache = s.live("ack")
    target = a.get_str("ticket")
    ok = not a.flag("fail")
    detail = a.get_str("detail")
    forced = a.opt_int("generation")
    manual = s.manual
    acks: list[JSON] = []
    if target == "all":
        if manual is None:
            for c in cache.poll():
                acks.append({"ticket": c.ticket, "generation": c.generation, "ok": True, "kind": c.kind.value,
                             "status": c.status.value, "node": c.anchor_id})
        else:
            loop = StepLoop(s, "ack", "ack")
            while (ticket := manual.next_ready()) is not None:
                if acks:
                    loop.between_steps(len(acks), f"T{ticket} and the jobs after it still held")
                ack = manual.take(ticket, ok=ok, detail=detail)
                acks.append(deliver_json(cache, ack.ticket, ack.generation, ack.ok, lambda: cache.deliver(ack)))
        return {"acks": acks}
    ticket = parse_ticket(target)
    copy = cache.ticket_table.joined(ticket)
    if copy is not None:
        raise JoinedTicketError("ack", ticket, copy.id)
    if manual is not None and manual.job(ticket) is not None and forced is None:
        ack = manual.take(ticket, ok=ok, detail=detail)
    else:
        generation = forced if forced is not None else s.generations.get(ticket)
        if generation is None:
            generation = cache.epoch
        ack = Ack(ticket, generation, ok, detail)
    acks.append(deliver_json(cache, ack.ticket, ack.generation, ack.ok, lambda: cache.deliver(ack)))
    return {"acks": acks}


def _p_withhold(p: ReplArgumentParser) -> None:
    p.add_argument("ticket", help="T<id> of a held job")
    p.add_argument("--release", action="store_true", help="undo: let 'ack all' and 'step' deliver it again")


@command("withhold", "keep a held copy's ack back from 'ack all', 'step' and flushes", Needs.LIVE,
         "transfers", _p_withhold)
def cmd_withhold(s: Session, a: Args) -> JSONObject:
    """Withhold TICKET's ack: 'ack all', 'step', 'run' and synchronous write-back flushes skip it.

    Only an explicit 'ack T<id>' delivers it. Needs --transfer manual.
    """
    s.live("withhold")
    manual = s.manual
    if manual is None:
        raise NeedsManualTransferError("withhold", s.source)
    ticket = parse_ticket(a.get_str("ticket"))
    held = s.tickets.get(ticket)
    if held is not None and held.joined is not None:
        ticket = held.joined  # a load-back that joined a copy in flight waits for that copy's ack
    if a.flag("release"):
        manual.release(ticket)
    else:
        manual.withhold(ticket)
    return {"ticket": ticket, "withheld": manual.is_withheld(ticket)}


@command("tickets", "live tickets, held transfer jobs and quarantine", Needs.VIEW, "transfers")
def cmd_tickets(s: Session, a: Args) -> JSONObject:
    """List live tickets (kind, anchor, status, leases by component, copies), the jobs the transfer
    engine still holds (withheld or not), the quarantine left by a reset, and the results of the
    load-backs this session saw settle."""
    view = s.view()
    jobs = {j.ticket: j for j in view.transfer.jobs} if view.transfer is not None else {}
    tickets: list[JSON] = []
    for t in view.tickets:
        doc = t.to_json()
        job = jobs.get(t.id)
        doc["job_held"] = job is not None
        doc["withheld"] = job is not None and job.withheld
        doc["held_by_session"] = t.id in s.tickets
        tickets.append(doc)
    settled: list[JSON] = [
        {"ticket": r.ticket_id, "anchor": r.anchor.id, "status": r.status.value, "full_tokens": r.full_tokens,
         "swa_tokens": r.swa_tokens, "mamba_moved": r.mamba_moved}
        for _, r in sorted(s.results.items())
    ]
    return {
        "tickets": tickets,
        "settled": settled,
        "jobs": [j.to_json() for j in jobs.values()],
        "quarantine": [q.to_json() for q in view.quarantine],
        "engine": view.transfer.engine if view.transfer is not None else None,
    }


def _p_step(p: ReplArgumentParser) -> None:
    p.add_argument("n", type=int, nargs="?", default=1, metavar="N", help="steps (default 1)")


@command("step", "advance N steps (fresh: deliver the oldest held ack; trace: one engine step)", Needs.LIVE,
         "transfers", _p_step)
def cmd_step(s: Session, a: Args) -> JSONObject:
    """Advance N steps. On a fresh cache a step delivers the oldest held, not withheld ack (manual
    transfers) or the acks the engine has (immediate). With --trace a step is one engine step.
    Stops early when there is nothing left to do (idle)."""
    cache = s.live("step")
    n = a.get_int("n")
    if n < 0:
        raise CommandSyntaxError("step", f"N must be >= 0, got {n}")
    driver = s.driver
    assert driver is not None
    reports: list[JSON] = []
    idle = False
    loop = StepLoop(s, "step")
    for done in range(n):
        if done:
            loop.between_steps(done, f"{n - done} of {n} not run")
        report = driver.step()
        if report is None:
            idle = True
            break
        reports.append({"step": report.step, **report.detail})
    s.sweep()
    return {"steps": len(reports), "idle": idle, "step": cache.ledger.step, "reports": reports[-50:]}


def _p_run(p: ReplArgumentParser) -> None:
    p.add_argument("until", choices=("until",), help="the word 'until'")
    p.add_argument("condition", nargs="+", help="a condition, see below")
    p.add_argument("--max", type=int, default=100_000, help="give up after this many steps (default 100000)")
    p.epilog = CONDITIONS_HELP


@command("run", "step until a condition holds (run until CONDITION)", Needs.LIVE, "transfers", _p_run)
def cmd_run(s: Session, a: Args) -> JSONObject:
    """Step until CONDITION holds; checked before the first step and after every step.

    Fails (ConditionError) when the driver goes idle or --max steps pass first.
    """
    cache = s.live("run")
    cond = parse_condition(a.strs("condition"))
    limit = a.get_int("max")
    if limit < 0:
        raise OptionRangeError("run", "--max", limit, "an integer >= 0")
    driver = s.driver
    assert driver is not None
    probe = Probe(s)
    baseline = probe.counters()
    steps = 0
    acks: list[JSON] = []
    loop = StepLoop(s, "run")
    while not cond.holds(probe, baseline):
        if steps:
            loop.between_steps(steps, f"{cond.text!r} still false")
        if steps >= limit:
            raise ConditionError(cond.text, f"still false after {steps} steps (--max {limit}); "
                                            f"acks delivered: {_ack_list(acks)}",
                                 expected=cond.text, actual=cond.actual(probe, baseline))
        report = driver.step()
        if report is None:
            s.sweep()
            raise ConditionError(cond.text, f"still false when the {driver.name} driver had nothing left to do "
                                            f"after {steps} steps; acks delivered: {_ack_list(acks)}",
                                 expected=cond.text, actual=cond.actual(probe, baseline))
        steps += 1
        acks.extend(_list(report.detail.get("acks")))
    s.sweep()
    return {"condition": cond.text, "reached": True, "steps": steps, "step": cache.ledger.step,
            "acks": acks[-_MAX_ACKS:], "acks_delivered": len(acks)}


_MAX_ACKS = 200


def _list(value: JSON) -> list[JSON]:
    return value if isinstance(value, list) else []


def _ack_list(acks: list[JSON]) -> str:
    """`T3 (done) T4 (stale)`, or `none`."""
    words = [f"T{x.get('ticket')} ({x.get('status')})" for x in acks if isinstance(x, dict)]
    if len(words) > 20:
        words = words[:20] + [f"... ({len(words)} in all)"]
    return " ".join(words) or "none"


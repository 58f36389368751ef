"""The device capacity a request needs to be served at all, and the refusal of a cache that lacks it.

What the scheduler (:mod:`unicache.engine.scheduler`) takes to start a request
whose device prefix of ``p`` tokens (whole pages) is cached:

- Full: its lock pins the prefix's ``p / page_size`` pages and it allocates
  ``ceil((prompt + output - p) / page_size)`` more, so ``ceil((prompt + output)
  / page_size)`` pages whatever ``p`` is. Everything else on the device is
  evictable once the requests ahead of it finish and their copies are acked,
  so that many pages are enough and one fewer never is: the request waits at
  the head of the queue for ever (``SchedulerStuckError``).
- SWA: the window pages of the prefix plus as many new pages as Full, never
  more than Full's need; a replay gives SWA the Full capacity, so the Full
  check covers it.
- Mamba: one slot for the request's own state, and one more when its device
  prefix ends at a cached state (a Mamba device hit always does): the lock
  pins that state, and with a single slot the request can never start. A hit
  needs an earlier request of the trace to have inserted a path through the
  request's first page, so a request that shares no first page with an
  earlier one needs 1 slot. The scheduler's other slots (the prompt's and the
  branch points' states) are taken only when free.

:func:`check_capacity` refuses a configuration one request of the trace can
never fit, before any cache exists, naming the request, its need, the
capacity and the option to raise.
"""

from __future__ import annotations

from dataclasses import dataclass

from unicache.config import CacheConfig
from unicache.markers import Full
from unicache.traces.request import Trace, TraceRequest


class CapacityError(ValueError):
    """A request of the trace needs more device capacity than the cache has; the message names both."""


@dataclass(frozen=True, slots=True)
class RequestNeed:
    """The least device capacity one request needs: Full pages and (with Mamba) state slots."""

    rid: int
    prompt_tokens: int
    output_tokens: int
    full_pages: int
    mamba_slots: int

    def full_tokens(self, page_size: int) -> int:
        return self.full_pages * page_size


def request_needs(config: CacheConfig, trace: Trace) -> list[RequestNeed]:
    """Every request's need under ``config`` (page size, Mamba), in trace order."""
    ps = config.page_size
    resumes = _may_resume(trace.requests, ps) if config.mamba else set()
    out: list[RequestNeed] = []
    for i, req in enumerate(trace.requests):
        prompt = len(req.tokens)
        total = prompt + req.output_tokens
        slots = (2 if i in resumes else 1) if config.mamba else 0
        out.append(RequestNeed(req.rid, prompt, req.output_tokens, -(-total // ps), slots))
    return out


def _may_resume(requests: list[TraceRequest], page_size: int) -> set[int]:
    """Positions of the requests that can have a device hit: an earlier request inserted their first page.

    Every path a request inserts starts with its prompt (then its decoded
    tokens), so an earlier prompt of at least a page must equal the request's
    first page, and a shorter one must be a prefix of the request's prompt.
    """
    pages: set[bytes] = set()
    short: dict[int, set[bytes]] = {}
    out: set[int] = set()
    for i, req in enumerate(requests):
        toks = req.tokens
        n = len(toks)
        if n < page_size:
            short.setdefault(n, set()).add(toks.tobytes())
            continue
        head = toks[:page_size].tobytes()
        if head in pages or any(toks[:k].tobytes() in prompts for k, prompts in short.items()):
            out.add(i)
        pages.add(head)
    return out


def check_capacity(config: CacheConfig, trace: Trace) -> None:
    """Refuse (CapacityError) ``config`` when some request of ``trace`` can never be served by it.

    The first request with the largest Full need, and the first one needing
    more Mamba slots than there are, are named (with ``--device-tokens`` and
    ``--mamba-slots``, the options that set those capacities).
    """
    needs = request_needs(config, trace)
    if not needs:
        return
    ps = config.page_size
    pages = config.device_capacity(Full)
    worst = max(needs, key=lambda need: need.full_pages)
    if worst.full_pages > pages:
        tokens = worst.full_tokens(ps)
        unit = "" if ps == 1 else f", rounded up to pages of {ps}"
        raise CapacityError(
            f"request {worst.rid} of {trace.name} needs {tokens:,} device tokens ({worst.prompt_tokens:,} prompt + "
            f"{worst.output_tokens:,} output{unit}) but the cache has {pages * ps:,}; it could never start: "
            f"raise --device-tokens to at least {tokens:,}")
    if config.mamba:
        slots = config.mamba_device_slots
        short = next((need for need in needs if need.mamba_slots > slots), None)
        if short is not None:
            raise CapacityError(
                f"request {short.rid} of {trace.name} needs {short.mamba_slots} Mamba slots (it shares its first "
                f"page with an earlier request, so it can resume from a cached state, which its lock pins, and "
                f"needs a slot of its own) but the cache has {slots}; it could never start after such a hit: "
                f"raise --mamba-slots to at least {short.mamba_slots}")

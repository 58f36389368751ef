"""Capture a cache's state as a crash-dump document and write it atomically.

The writer runs when something already went wrong, so it never trusts the
cache: each section is captured on its own, and a section that raises is
recorded under `capture_errors` (with the exception) instead of aborting the dump.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import platform
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from unicache.dump.schema import FORMAT, VERSION, JSON, JSONObject
from unicache.outputs import OutputPathError, OutputWriteError, write_atomic

if TYPE_CHECKING:
    from leases import Borrowed, Held, Lease

    from unicache.cache import UniCache
    from unicache.components.mamba import MambaStore
    from unicache.components.store import ComponentStore
    from unicache.tree.node import Node

T = TypeVar("T")

_ERROR_ID_ATTRS = (
    "node_id", "ticket_id", "generation", "object_id", "lease_id", "component",
    "pool", "slots", "field", "cache", "owner", "seed", "step",
)


@runtime_checkable
class DescribesJobs(Protocol):
    """A transfer engine that can list the jobs it holds: (ticket, generation, kind, withheld)."""

    def describe_jobs(self) -> list[tuple[int, int, str, bool]]: ...


def to_json_value(value: object) -> JSON:
    """A JSON-safe copy of `value`: containers recursed, dataclasses as objects, anything else as str."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, Mapping):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_json_value(v) for v in items]
    if is_dataclass(value) and not isinstance(value, type):
        return to_json_value(asdict(value))
    if isinstance(value, type):
        return value.__name__
    return str(value)


def describe_error(error: BaseException) -> JSONObject:
    """Class, module, message, traceback and the ids a typed error carries as attributes."""
    ids: JSONObject = {}
    for attr in _ERROR_ID_ATTRS:
        if hasattr(error, attr):
            ids[attr] = to_json_value(getattr(error, attr))
    lease = getattr(error, "lease", None)
    if lease is not None:
        ids["lease"] = to_json_value(lease)
    leaks = getattr(error, "leaks", None)
    if leaks is not None:
        ids["leaks"] = to_json_value(leaks)
    report = getattr(error, "report", None)
    violations = getattr(report, "violations", None)
    if violations is not None:
        ids["violations"] = to_json_value(violations)
    tb = traceback.format_exception(type(error), error, error.__traceback__)
    return {
        "type": type(error).__name__,
        "module": type(error).__module__,
        "message": str(error),
        "traceback": [line.rstrip("\n") for line in tb],
        "ids": ids,
    }


class SectionCapture:
    """Runs each section of a capture, keeping what failed (the `capture_errors` of the document)."""

    def __init__(self) -> None:
        self.errors: list[JSON] = []

    def __call__(self, section: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except Exception as exc:  # the cache may be corrupt: record and carry on
            self.errors.append({"section": section, "type": type(exc).__name__, "message": str(exc)})
            return None


def _slots(value: list[int] | int | None) -> JSON:
    if value is None or isinstance(value, int):
        return value
    return list(value)


def node_json(node: Node, components: JSONObject) -> JSONObject:
    """A tree node's dump record: its place in the tree, key, access stats and `components` (per component)."""
    parent = node.parent
    return {
        "id": node.id,
        "parent": None if parent is None else parent.id,
        "start": node.start,
        "end": node.end,
        "key": list(node.key),
        "children": [c.id for c in node.children.values()],
        "last_access": node.last_access,
        "hits": node.hits,
        "components": components,
    }


def _node_json(
    node: Node, stores: tuple[ComponentStore, ...], mamba: MambaStore, pinned: dict[int, _Pinned]
) -> JSONObject:
    comps: JSONObject = {}
    for store in stores:
        name = store.name.lower()
        dev: list[int] | int | None
        host: list[int] | int | None
        if store is mamba:
            dev, host = mamba.device_state(node), mamba.host_state(node)
        else:
            d, h = store.device_slots(node), store.host_slots(node)
            dev = None if d is None else list(d)
            host = None if h is None else list(h)
        pins = store.pins(node)
        ids: list[JSON] = []
        for lease in pins if pins is not None else ():
            ids.append(lease.id)
            entry = pinned.get(lease.id)
            if entry is None:
                pinned[lease.id] = entry = _Pinned(lease, [])
            entry.nodes.append(node.id)
        comps[name] = {"device": _slots(dev), "host": _slots(host), "pins": ids}
    return node_json(node, comps)


class _Pinned:
    """A lease found in some pin set, and the nodes whose sets hold it."""

    __slots__ = ("lease", "nodes")

    def __init__(self, lease: Borrowed[Lease[Any, Held]], nodes: list[int]) -> None:
        self.lease = lease
        self.nodes = nodes


def _tree(cache: UniCache, components: tuple[str, ...], pinned: dict[int, _Pinned]) -> JSONObject:
    comps = cache.components
    stores = tuple(st for st in comps.configured if st.name.lower() in components)
    nodes: list[JSON] = [_node_json(node, stores, comps.mamba, pinned) for node in cache.nodes()]
    return {"root": cache.root.id, "nodes": nodes}


def _leases(cache: UniCache, pinned: dict[int, _Pinned], capture: SectionCapture) -> list[JSON]:
    """Every live lease, plus any lease found in a pin set that the ledger no longer lists."""
    scopes = capture("lease_coverage", cache.lease_coverage) or {}
    live = capture("leases", cache.ledger.live) or []
    seen = {lease.id for lease in live}
    extra = [p.lease for lid, p in sorted(pinned.items()) if lid not in seen]
    out: list[JSON] = []
    for lease in [*live, *extra]:
        scope = scopes.get(lease.id)
        where = pinned.get(lease.id)
        out.append({
            "id": lease.id,
            "component": lease.component.__name__.lower(),
            "owner": str(lease.owner),
            "generation": lease.generation,
            "site": lease.site,
            "nodes": [] if where is None else list(where.nodes),
            "scope": None if scope is None else list(scope[2]),
        })
    return out


def _ledger(cache: UniCache) -> JSONObject:
    ledger = cache.ledger
    counters: JSONObject = dict(ledger.counters())
    leaks: list[JSON] = [
        {"id": i.id, "component": i.component, "owner": i.owner, "generation": i.generation, "site": i.site}
        for i in ledger.leaks()
    ]
    return {"name": ledger.name, "epoch": ledger.epoch, "step": ledger.step, "counters": counters, "leaks": leaks}


def _tickets(cache: UniCache) -> list[JSON]:
    out: list[JSON] = []
    for t in cache.tickets():
        out.append({
            "id": t.id,
            "generation": t.generation,
            "kind": t.kind,
            "node": t.node_id,
            "status": t.status,
            "owner": t.owner,
            "leases": {name.lower(): lid for name, lid in t.leases.items()},
            "copies": [
                {
                    "component": str(op["component"]).lower(),
                    "src_tier": to_json_value(op["src_tier"]),
                    "dst_tier": to_json_value(op["dst_tier"]),
                    "src": to_json_value(op["src"]),
                    "dst": to_json_value(op["dst"]),
                }
                for op in t.copies
            ],
            "abandoned": t.abandoned,
        })
    return out


def _transfer(cache: UniCache) -> JSONObject:
    engine = cache.engine
    jobs: list[JSON] = []
    if isinstance(engine, DescribesJobs):
        jobs = [
            {"ticket": t, "generation": g, "kind": k, "withheld": w}
            for t, g, k, w in engine.describe_jobs()
        ]
    return {"engine": type(engine).__name__, "pending": engine.pending, "jobs": jobs}


def _quarantine(cache: UniCache) -> list[JSON]:
    return [
        {"ticket": q.ticket_id, "generation": q.generation, "kind": q.kind,
         "slots": {k: list(v) for k, v in q.slots.items()}}
        for q in cache.quarantine()
    ]


def _events(cache: UniCache, last: int | None) -> list[JSON]:
    out: list[JSON] = []
    for e in cache.ledger.events(last=last):
        doc = e.to_json()
        comp = doc.get("component")
        if isinstance(comp, str):
            doc["component"] = comp.lower()
        out.append(to_json_value(doc))
    return out


def _sanity(cache: UniCache) -> JSONObject:
    report = cache.sanity_check()
    return {
        "ok": report.ok,
        "violations": [
            {
                "kind": v.kind,
                "node": v.node_id,
                "component": v.component,
                "lease": v.lease_id,
                "detail": v.detail,
            }
            for v in report.violations
        ],
    }


@functools.cache
def _installed_version() -> str:
    """The installed unicache version, looked up once (reading package metadata costs milliseconds, and
    the REPL captures the live cache once per command)."""
    try:
        from importlib.metadata import version

        return version("unicache")
    except Exception:
        return "unknown"


def producer() -> JSONObject:
    """Who wrote a dump: the unicache version, Python, the command line, the pid."""
    return {
        "unicache": _installed_version(),
        "python": platform.python_version(),
        "argv": list(sys.argv),
        "pid": os.getpid(),
    }


def capture(
    cache: UniCache,
    *,
    error: BaseException | None = None,
    seed: int | None = None,
    step: int | None = None,
    extra: Mapping[str, object] | None = None,
    sanity: bool = True,
    events: int | None = None,
) -> JSONObject:
    """The crash-dump document for `cache` as it is now (valid for `CrashDump.from_json`).

    `events` keeps only the newest so many flight-recorder entries (all by default).
    `sanity=False` skips running the sanity check (the section is then null).
    """
    cap = SectionCapture()
    components = cap("components", lambda: tuple(c.__name__.lower() for c in cache.config.components)) or ("full",)
    pinned: dict[int, _Pinned] = {}
    tree = cap("tree", lambda: _tree(cache, components, pinned))
    config = cap("config", lambda: {k: to_json_value(v) for k, v in cache.config.to_json().items()})
    pools = cap("pools", lambda: {k: to_json_value(v.to_json()) for k, v in cache.pools.stats().items()})
    ledger = cap("ledger", lambda: _ledger(cache))
    doc: JSONObject = {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "producer": producer(),
        "error": None if error is None else describe_error(error),
        "seed": seed,
        "step": step,
        "config": config or {},
        "components": list(components),
        "epoch": cap("epoch", lambda: cache.ledger.epoch) or 0,
        "tree": tree if tree is not None else {"root": 0, "nodes": [dict(_EMPTY_ROOT)]},
        "pools": pools or {},
        "leases": _leases(cache, pinned, cap),
        "ledger": ledger or {"name": "?", "epoch": 0, "step": 0, "counters": {}, "leaks": []},
        "tickets": cap("tickets", lambda: _tickets(cache)) or [],
        "transfer": cap("transfer", lambda: _transfer(cache)),
        "quarantine": cap("quarantine", lambda: _quarantine(cache)) or [],
        "events": cap("events", lambda: _events(cache, events)) or [],
        "counters": dict(cap("counters", cache.counters.as_dict) or {}),
        "sanity": cap("sanity", lambda: _sanity(cache)) if sanity else None,
        "extra": _extra(cache, extra, cap),
    }
    doc["capture_errors"] = cap.errors
    return doc


def _lease_ages(cache: UniCache) -> JSONObject | None:
    """Seconds each live lease has been held, by lease id, when the ledger has a clock (else None)."""
    ledger = cache.ledger
    clock = ledger.clock
    if clock is None:
        return None
    now = clock()
    return {str(lease.id): round(now - lease.acquired_at, 6) for lease in ledger.live()}


def _extra(cache: UniCache, extra: Mapping[str, object] | None, cap: SectionCapture) -> JSONObject:
    """The free-form section: the cache's refusal and skip counts per `op:kind[:component]` under
    `reasons` (version 1 has no field of its own for them), the seconds each live lease has been
    held under `lease_ages` (ledgers with a clock), then the caller's entries."""
    reasons: JSONObject = dict((cap("reasons", cache.reasons.counts) or {}).items())
    out: JSONObject = {"reasons": reasons}
    ages = cap("lease_ages", lambda: _lease_ages(cache))
    if ages is not None:
        out["lease_ages"] = ages
    out.update({str(k): to_json_value(v) for k, v in (extra or {}).items()})
    return out


_EMPTY_ROOT: JSONObject = {
    "id": 0, "parent": None, "start": 0, "end": 0, "key": [], "children": [],
    "last_access": 0, "hits": 0, "components": {},
}


def default_name(seed: int | None, step: int | None) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    parts = ["unicache-crash", stamp]
    if seed is not None:
        parts.append(f"seed{seed}")
    if step is not None:
        parts.append(f"step{step}")
    return "-".join(parts) + ".json"


def _unused(directory: Path, name: str) -> Path:
    """``directory / name``, or with ``-2``, ``-3``, ... before the suffix, whichever is not taken yet."""
    stem, suffix = os.path.splitext(name)
    candidate, n = directory / name, 1
    while os.path.lexists(candidate):
        n += 1
        candidate = directory / f"{stem}-{n}{suffix}"
    return candidate


def write_document(doc: JSONObject, path: str | os.PathLike[str], *, option: str = "crash dump") -> Path:
    """Write `doc` with :func:`unicache.outputs.write_atomic` (which names `option` in its errors).

    A directory (existing, or a path ending in a separator) gets a generated
    file name `unicache-crash-<time>[-seed<S>][-step<N>].json` inside it
    (`-2`, `-3`, ... before `.json` when that name is taken: an earlier dump is never replaced).
    Raises `unicache.outputs.OutputPathError` for a target that is not a regular
    file or a missing path, `OutputWriteError` when writing fails.
    """
    target = Path(path)
    if target.is_dir() or str(path).endswith(("/", os.sep)):
        seed = doc.get("seed")
        step = doc.get("step")
        name = default_name(seed if isinstance(seed, int) else None, step if isinstance(step, int) else None)
        target = _unused(target, name)
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    return write_atomic(target, text.encode("utf-8"), option).resolve()


def write_crash_dump(
    cache: UniCache,
    path: str | os.PathLike[str],
    *,
    error: BaseException | None = None,
    seed: int | None = None,
    step: int | None = None,
    extra: Mapping[str, object] | None = None,
    announce: bool = True,
    option: str = "crash dump",
) -> Path:
    """Capture `cache` and write one JSON crash dump to `path` (a file, or a directory to put it in).

    Returns the absolute path written. With `announce`, prints
    `unicache: crash dump written to PATH` on stderr (the path is what a user
    passes to `unicache repl --dump`). `option` names the path in a refusal or
    write error (see `write_document`).
    """
    doc = capture(cache, error=error, seed=seed, step=step, extra=extra)
    written = write_document(doc, path, option=option)
    if announce:
        why = f" ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})" if error else ""
        print(f"unicache: crash dump written to {written}{why}", file=sys.stderr)
    return written


@contextmanager
def dump_on_error(
    cache: UniCache,
    directory: str | os.PathLike[str],
    *,
    seed: int | None = None,
    step: Callable[[], int | None] | None = None,
    extra: Callable[[], Mapping[str, object]] | None = None,
    catch: tuple[type[BaseException], ...] = (Exception,),
) -> Iterator[None]:
    """Write a crash dump when an exception of `catch` escapes the block, then re-raise it.

    The dump's path is added to the exception as a note (`add_note`); a dump that
    could not be written is noted instead, and the original exception still propagates.
    """
    try:
        yield
    except catch as exc:
        try:
            written = write_crash_dump(
                cache, directory, error=exc, seed=seed,
                step=step() if step is not None else None,
                extra=extra() if extra is not None else None,
            )
        except (OutputPathError, OutputWriteError) as failed:
            exc.add_note(f"crash dump not written: {failed}")
        else:
            exc.add_note(f"crash dump: {written}")
        raise

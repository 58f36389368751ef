"""A dump of tree core ``"unicache"`` in the project's crash-dump format (version 1), which ``unicache repl --dump`` opens.

The document is the one `unicache.dump.writer.capture` writes for a
`UniCache`, with what differs for an engine-owned SGLang core:

* **Values.** A node's ``full`` device and host lists are SGLang's KV index
  values (one per token, handed in by SGLang's allocators), not pages of
  pools of ours: ``pools`` is empty (the allocators are SGLang's), and the
  configuration records no pool sizes (so no pool check applies).
* **Pins.** The ledger has two lease components, `Full` (device tier) and
  `FullHost` (host tier: host locks, write-through marks, load-back pins);
  both are the cache component ``full``, so a node's ``full`` pins list the
  leases of both of its pin sets, and ``extra.lease_tiers`` says which tier
  each lease pins (the REPL shows ``full (device)`` / ``full (host)``).
  Owners are the core's: ``device lock #L``, ``host lock #L``, ``Full pin
  #L`` (the receipt of lease L), ``write-through ack A``, ``load-back #S
  anchor N``. A device lock's or Full pin's ``scope`` is its anchor's path
  to the root (what it must pin); host-tier leases record none.
* **No tickets, no transfer engine.** SGLang's controller owns the copies;
  what is in flight is the write-through marks and load-back pins (leases
  above, and ``extra.in_flight``): ``tickets`` and ``quarantine`` are empty,
  ``transfer`` null.
* **Events.** The ledger's ring when it keeps one
  (`UNICACHE_SGLANG_LEASE_HISTORY` > 0: lease events, acks and refusals in
  one order); otherwise the core's own record of its last acks and refused
  load-backs (`record`), numbered from 1. Refusals are ``note`` events
  whose detail says why; ``extra.load_back_refusals`` lists them too.
* **Sanity.** The core's `sanity_check` run while dumping, without SGLang's
  in-flight lists (it checks the core against its own leases); a dump for a
  failed check records that check's problems instead.

Capture never trusts the core: each section runs on its own and one that
raises is listed under ``capture_errors`` (`SectionCapture`).
"""

from __future__ import annotations

import datetime
import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import torch
from leases import Borrowed, Held, Lease, PinSet
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

from unicache.dump.schema import FORMAT, VERSION, JSON, JSONObject
from unicache.dump.writer import SectionCapture, describe_error, node_json, producer, to_json_value
from unicache.integrations.sglang.treecore.errors import TreeCoreSanityError, UnknownNodeError
from unicache.integrations.sglang.treecore.receipts import (
    DEVICE_LOCK,
    FULL_PIN,
    FullHost,
    MambaHost,
    SWAHost,
    TreeReceipt,
)
from unicache.integrations.sglang.treecore.corestate import CoreState

if TYPE_CHECKING:
    from unicache.tree.node import Node

DUMP_DIR_ENV: Final = "UNICACHE_SGLANG_DUMP_DIR"
"""Where the core writes its dumps (on a failure, on SIGUSR1); empty: none. Default `DEFAULT_DUMP_DIR`."""
DEFAULT_DUMP_DIR: Final = Path("unicache-crash")
"""The directory dumps go to when `DUMP_DIR_ENV` is unset: ``unicache-crash`` under the process's working
directory, as for ``unicache replay --crash-dir``."""
_NODE = re.compile(r"(?:node|anchor) (\d+)")


def dump_directory() -> Path | None:
    """The dump directory `DUMP_DIR_ENV` names (`DEFAULT_DUMP_DIR` when unset), or None when it is empty (off)."""
    raw = os.environ.get(DUMP_DIR_ENV)
    if raw is None:
        return DEFAULT_DUMP_DIR
    return Path(raw) if raw.strip() else None


def _holder_ids(lease: Borrowed[Lease[Any, Held]]) -> list[JSON]:
    """The ids of the nodes a lease pins (every pin set of the core is made by a store for a node)."""
    return [cast("Node", p.holder).id for p in lease.pin_sets()]


def _tier(lease: Borrowed[Lease[Any, Held]]) -> str:
    component = lease.component
    return "host" if component is FullHost or component is MambaHost or component is SWAHost else "device"


def _component_name(marker: object) -> str:
    """The dump's component of a lease component (``mamba``, ``swa`` for their tiers, else ``full``)."""
    name = marker if isinstance(marker, str) else getattr(marker, "__name__", "")
    if name.startswith("Mamba"):
        return "mamba"
    return "swa" if name.startswith("SWA") else "full"


class _Pinned:
    """A lease met in some pin set, and the nodes whose sets hold it."""

    __slots__ = ("lease", "nodes")

    def __init__(self, lease: Borrowed[Lease[Any, Held]]) -> None:
        self.lease = lease
        self.nodes: list[int] = []


def _pins_json(node: Node, pin_sets: tuple[PinSet[Any] | None, ...], pinned: dict[int, _Pinned]) -> list[JSON]:
    """The ids of the leases in `pin_sets` (one component's tiers), each noted in `pinned` as holding `node`."""
    pins: list[JSON] = []
    for pin_set in pin_sets:
        for lease in pin_set if pin_set is not None else ():
            pins.append(lease.id)
            entry = pinned.get(lease.id)
            if entry is None:
                entry = pinned[lease.id] = _Pinned(lease)
            entry.nodes.append(node.id)
    return pins


def _state_json(state: torch.Tensor | None) -> JSON:
    """A node's Mamba state index (SGLang hands one per node, a 1-element tensor), as the dump's one slot."""
    return None if state is None else int(state.item())


def _node_json(core: CoreState, node: Node, pinned: dict[int, _Pinned]) -> JSONObject:
    dev, host = core.device_values(node), core.host_values(node)
    pins = _pins_json(node, (core.store.pins(node), core.handed.host_pins(node)), pinned)
    components: JSONObject = {"full": {"device": None if dev is None else list(dev),
                                       "host": None if host is None else list(host), "pins": pins}}
    mamba = core.mamba
    if mamba is not None:
        components["mamba"] = {
            "device": _state_json(mamba.device_state(node)), "host": _state_json(mamba.host_state(node)),
            "pins": _pins_json(node, (mamba.store.pins(node), mamba.handed.host_pins(node)), pinned),
        }
    swa = core.swa
    if swa is not None:
        sd, sh = swa.device_state(node), swa.host_state(node)
        components["swa"] = {
            "device": None if sd is None else [int(v) for v in sd.tolist()],
            "host": None if sh is None else [int(v) for v in sh.tolist()],
            "pins": _pins_json(node, (swa.store.pins(node), swa.handed.host_pins(node)), pinned),
        }
    return node_json(node, components)


def _scope(core: CoreState, lease: Borrowed[Lease[Any, Held]]) -> list[JSON] | None:
    """What a device lock or Full pin must pin: its anchor's path to the root, for Mamba its anchor alone
    (none for host-tier leases, nor for SWA's window segment, which splits since the lock may have grown)."""
    owner = lease.owner
    if not isinstance(owner, TreeReceipt) or owner.kind not in (DEVICE_LOCK, FULL_PIN):
        return None
    name = _component_name(lease.component)
    if name == "swa":
        return None
    mamba = name == "mamba"
    if not mamba and ComponentType.FULL in owner.skipped_lock_components:
        return []
    try:
        x: Node | None = core.node(owner.node_id or 0)
    except UnknownNodeError:
        return None
    if mamba:
        return [] if x is None or x is core.root else [x.id]
    ids: list[int] = []
    while x is not None and x is not core.root:
        ids.append(x.id)
        x = x.parent
    return [*sorted(ids)]


def _leases(core: CoreState, pinned: dict[int, _Pinned], cap: SectionCapture) -> tuple[list[JSON], JSONObject]:
    """Every live lease (plus any met in a pin set that the ledger no longer lists), and each one's tier."""
    live = cap("leases", core.ledger.live) or []
    seen = {lease.id for lease in live}
    extra = [p.lease for lid, p in sorted(pinned.items()) if lid not in seen]
    out: list[JSON] = []
    tiers: JSONObject = {}
    for lease in [*live, *extra]:
        where = pinned.get(lease.id)
        out.append({
            "id": lease.id,
            "component": _component_name(lease.component),
            "owner": str(lease.owner),
            "generation": lease.generation,
            "site": lease.site,
            "nodes": [] if where is None else list(where.nodes),
            "scope": cap("lease_scope", functools.partial(_scope, core, lease)),
        })
        tiers[str(lease.id)] = _tier(lease)
    return out, tiers


def _ledger(core: CoreState) -> JSONObject:
    ledger = core.ledger
    leaks: list[JSON] = [
        {"id": i.id, "component": i.component, "owner": i.owner, "generation": i.generation, "site": i.site}
        for i in ledger.leaks()
    ]
    counters: JSONObject = dict(ledger.counters())
    return {"name": ledger.name, "epoch": ledger.epoch, "step": ledger.step, "counters": counters, "leaks": leaks}


def _events(core: CoreState) -> list[JSON]:
    """The ledger's ring (components as the cache component ``full``), else the core's own record."""
    ledger = core.ledger
    out: list[JSON] = []
    if ledger.history:
        for e in ledger.events():
            doc = e.to_json()
            component = doc.get("component")
            if isinstance(component, str):
                doc["component"] = _component_name(component)
            out.append(to_json_value(doc))
        return out
    for seq, c in enumerate(core.record.events, start=1):
        out.append({"seq": seq, "step": ledger.step, "kind": c.kind.value, "lease": c.lease,
                    "component": "full", "owner": c.owner, "generation": c.generation, "nodes": list(c.nodes),
                    "ticket": None, "detail": c.detail})
    return out


def _violations(problems: list[str]) -> JSONObject:
    found: list[JSON] = []
    for text in problems:
        m = _NODE.search(text)
        found.append({"kind": "tree-core", "node": None if m is None else int(m.group(1)), "component": "full",
                      "lease": None, "detail": text})
    return {"ok": not problems, "violations": found}


def _sanity(core: CoreState, error: BaseException | None) -> JSONObject:
    if isinstance(error, TreeCoreSanityError):
        return _violations(error.problems)
    try:
        core.sanity_check([], [])
    except TreeCoreSanityError as exc:
        return _violations(exc.problems)
    return _violations([])


def _config(core: CoreState) -> JSONObject:
    return {
        "page_size": core.page_size,
        "token_bytes": 8,
        "ledger_name": core.ledger.name,
        "history": core.ledger.history,
        "write_policy": "write_back" if core.is_write_back else "write_through",
        "engine": "sglang",
        "tree_core": "unicache",
        "hicache": core.enable_hicache,
        "device": str(core.device),
    }


def _counters(core: CoreState) -> dict[str, int]:
    sizes = {"total_tokens": core.total_size()[0], "protected_tokens": core.protected_size(),
             "evictable_tokens": core.total_size()[0] - core.protected_size(), "device_locks": len(core.device_locks),
             "host_locks": len(core.host_locks), "full_pins": sum(len(s) for s in core.full_pins.values()),
             "write_through_marks": len(core.write_marks),
             "load_backs_in_flight": sum(len(f) for f in core.load_backs.values())}
    return {**sizes, **core.record.counts()}


def _in_flight(core: CoreState) -> JSONObject:
    """SGLang's copies in flight as the core sees them: write-through marks by ack, load-back pins by anchor."""
    marks: JSONObject = {}
    for ack, lease in core.write_marks.items():
        marks[str(ack)] = {"lease": lease.id, "nodes": _holder_ids(lease)}
    loads: JSONObject = {}
    for anchor, fifo in core.load_backs.items():
        loads[str(anchor)] = [{"lease": lease.id, "owner": str(lease.owner),
                               "nodes": _holder_ids(lease)} for lease in fifo]
    return {"write_through": marks, "load_back": loads}


def _lease_ages(core: CoreState) -> JSONObject | None:
    ledger = core.ledger
    clock = ledger.clock
    if clock is None:
        return None
    now = clock()
    return {str(lease.id): round(now - lease.acquired_at, 6) for lease in ledger.live()}


def capture_core(core: CoreState, *, error: BaseException | None = None,
                 extra: Mapping[str, object] | None = None, sanity: bool = True) -> JSONObject:
    """The crash-dump document of `core` as it is now (valid for `CrashDump.from_json`; see the module docstring)."""
    cap = SectionCapture()
    pinned: dict[int, _Pinned] = {}

    def tree() -> JSONObject:
        return {"root": core.root.id, "nodes": [_node_json(core, x, pinned) for x in core.nodes()]}

    tree_doc = cap("tree", tree)
    leases, tiers = _leases(core, pinned, cap)
    more: JSONObject = {"tree_core": "unicache", "engine": "sglang", "lease_tiers": tiers}
    in_flight = cap("in_flight", lambda: _in_flight(core))
    if in_flight is not None:
        more["in_flight"] = in_flight
    more["load_back_refusals"] = [to_json_value(r.to_json()) for r in core.record.refusals]
    ages = cap("lease_ages", lambda: _lease_ages(core))
    if ages is not None:
        more["lease_ages"] = ages
    more.update({str(k): to_json_value(v) for k, v in (extra or {}).items()})
    doc: JSONObject = {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "producer": producer(),
        "error": None if error is None else describe_error(error),
        "seed": None,
        "step": None,
        "config": cap("config", lambda: _config(core)) or {},
        "components": ["full", *(["swa"] if core.swa is not None else []), *(["mamba"] if core.mamba is not None else [])],
        "epoch": cap("epoch", lambda: core.ledger.epoch) or 0,
        "tree": tree_doc if tree_doc is not None else {"root": 0, "nodes": [dict(_EMPTY_ROOT)]},
        "pools": {},
        "leases": leases,
        "ledger": cap("ledger", lambda: _ledger(core))
        or {"name": "?", "epoch": 0, "step": 0, "counters": {}, "leaks": []},
        "tickets": [],
        "transfer": None,
        "quarantine": [],
        "events": cap("events", lambda: _events(core)) or [],
        "counters": dict(cap("counters", lambda: _counters(core)) or {}),
        "sanity": cap("sanity", lambda: _sanity(core, error)) if sanity else None,
        "extra": more,
    }
    doc["capture_errors"] = cap.errors
    return doc


_EMPTY_ROOT: JSONObject = {
    "id": 0, "parent": None, "start": 0, "end": 0, "key": [], "children": [],
    "last_access": 0, "hits": 0, "components": {},
}

"""Dumps of tree core "unicache": captured from SGLang's real cache, opened by the real REPL, clean when healthy.

The state: chain X -> D backed up and evicted, a load-back of D in flight
(its ack withheld: a load-back pin, a device lock and a host lock on its
anchor), a fresh node F locked by a request and Full-pinned, and two
refused load-backs of a third branch E (SGLang's threshold, then no device
room: every device token held). The dump names each pin's lease, owner and
generation per node, the last acks and the refusals with their reasons;
the REPL shows them; `check` finds nothing. Over the random driver's states
(both write policies, with and without the lease history) every dump is
clean (`revalidate` empty, the recorded sanity check ok).
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from pathlib import Path

import pytest
from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, EvictParams, MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey

from tests.integrations.sglang.chains import D, X, insert_tokens, node_of, start_load_back
from tests.integrations.sglang.treecore.test_random_driver import drive
from unicache.dump import CrashDump, load_dump, write_document
from unicache.integrations.sglang.treecore.core import LEASE_HISTORY_ENV, UnicacheTreeCore
from unicache.integrations.sglang.treecore.dump import capture_core
from unicache.integrations.sglang.workload import CacheSetup, build_cache
from unicache.repl import main

E = list(range(500, 516))
F = list(range(700, 712))


@dataclass
class State:
    setup: CacheSetup
    core: UnicacheTreeCore
    d: int
    x: int
    e: int
    f: int
    f_lock: DecLockRefParams

    def finish(self) -> None:
        """Ack the load-back, release F's lock and pin: no lease outlives the test."""
        cache = self.setup.cache
        cache.ready_to_load_host_cache()
        cache.loading_check()
        cache.dec_lock_ref(self.f, self.f_lock)
        self.core.dec_full_pin(self.f)
        assert self.core.ledger.live_count == 0
        cache.release_host_resources()


def _core(setup: CacheSetup) -> UnicacheTreeCore:
    core = setup.cache.tree_core
    assert isinstance(core, UnicacheTreeCore)
    return core


def _state() -> State:
    setup = build_cache(backend="unicache", mamba=False, device_tokens=128, max_context_len=256)
    cache, core = setup.cache, _core(setup)
    cache.load_back_threshold = 1
    for tokens in (X, D, E):
        insert_tokens(setup, tokens)
    cache.evict_for_alloc(EvictParams(num_tokens=128))  # write-back: backed up, then demoted
    d, x, e = node_of(setup, D), node_of(setup, X), node_of(setup, E)
    assert start_load_back(setup, D, 1)[3], "the load-back of D started (its ack withheld)"
    insert_tokens(setup, F)
    f = node_of(setup, F)
    f_lock = cache.inc_lock_ref(f).to_dec_params()
    core.inc_full_pin(f)
    cache.load_back_threshold = 100
    assert start_load_back(setup, E, 2)[2] == 0, "refused: 16 host tokens below the threshold"
    cache.load_back_threshold = 1
    held = setup.allocator.alloc(setup.allocator.available_size())  # a running batch holds the rest
    assert held is not None
    assert start_load_back(setup, E, 3)[2] == 0, "refused: no device room"
    return State(setup, core, d, x, e, f, f_lock)


def _pins(dump: CrashDump, node: int) -> dict[str, int]:
    """Owner -> generation of every lease pinning `node`."""
    return {dump.leases[lid].owner: dump.leases[lid].generation for lid in dump.nodes[node].components["full"].pins}


def test_a_dump_names_every_pin_with_its_owner_and_the_refused_load_backs_with_why() -> None:
    s = _state()
    core = s.core
    doc = capture_core(core)
    dump = CrashDump.from_json(json.loads(json.dumps(doc)))
    assert dump.revalidate() == []
    assert dump.sanity is not None and dump.sanity.ok
    (mark,) = core.load_backs[s.d]
    (lock,) = [lease for lease in core.device_locks.values() if getattr(lease.owner, "node_id") == s.d]
    (host,) = [lease for lease in core.host_locks.values() if getattr(lease.owner, "node_id") == s.d]
    gen = core.ledger.epoch
    assert dump.epoch == gen
    assert _pins(dump, s.d) == {str(mark.owner): gen, str(lock.owner): gen, str(host.owner): gen}
    assert str(mark.owner) == f"load-back #1 anchor {s.d}"
    assert set(_pins(dump, s.x)) == {str(mark.owner), str(lock.owner)}  # the chain and the lock's path
    f_owners = sorted(_pins(dump, s.f))
    assert len(f_owners) == 2 and f_owners[0].startswith("Full pin #") and f_owners[1].startswith("device lock #")
    tiers = dump.extra["lease_tiers"]
    assert isinstance(tiers, dict)
    assert tiers[str(mark.id)] == tiers[str(host.id)] == "host" and tiers[str(lock.id)] == "device"
    for lease in (mark, lock, host):
        assert sorted(dump.leases[lease.id].nodes) == sorted(getattr(p.holder, "id") for p in lease.pin_sets())
    assert dump.leases[lock.id].scope == tuple(sorted([s.d, s.x]))
    refusals = dump.extra["load_back_refusals"]
    assert isinstance(refusals, list)
    assert [(r["anchor"], r["reason"], r["tokens"]) for r in refusals if isinstance(r, dict)] == [
        (s.e, "threshold_or_quota", len(E)), (s.e, "no_device_room", len(E))]
    notes = [e for e in dump.events if e.kind == "note"]
    assert [e.nodes[0] for e in notes] == [s.e, s.e] and "no device room for 16 tokens" in notes[1].detail
    assert dump.counters["load_back_refusals_no_device_room"] == 1 and dump.counters["load_backs"] == 1
    assert dump.counters["device_locks"] == 2 and dump.counters["full_pins"] == 1
    s.finish()


def _script(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "look.repl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_repl_opens_the_dump_and_shows_who_pins_which_node(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    s = _state()
    path = write_document(capture_core(s.core), tmp_path / "core.json")
    script = _script(tmp_path, f"pins #{s.d}", f"leases --node #{s.f}", "events --kind note", "check")
    capsys.readouterr()
    assert main(["--dump", str(path), "--script", str(script), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    pins, leases, notes, check = out
    gen = s.core.ledger.epoch
    shown = {(x["owner"], x["tier"], x["generation"]) for x in pins["components"]["full"]["leases"]}
    assert shown == {(o, t, gen) for o, t in _owner_tiers(s.core, s.d)}
    assert (f"load-back #1 anchor {s.d}", "host", gen) in shown and len(shown) == 3
    assert {x["owner"].split(" #")[0] for x in leases["leases"]} == {"device lock", "Full pin"}
    assert all(s.f in x["nodes"] for x in leases["leases"])
    assert [e["detail"].split(":")[0] for e in notes["events"]] == [f"load-back at #{s.e} refused"] * 2
    assert check["clean"] is True and check["violations"] == []
    capsys.readouterr()
    assert main(["--dump", str(path), "--script", str(_script(tmp_path, f"pins #{s.d}"))]) == 0
    text = capsys.readouterr().out
    assert "SGLang tree core 'unicache'" in text and "2 refused load-back(s)" in text
    assert f"load-back #1 anchor {s.d}" in text and "full (host)" in text and "full (device)" in text
    s.finish()


def _owner_tiers(core: UnicacheTreeCore, node: int) -> list[tuple[str, str]]:
    x = core.node(node)
    out = [(str(lease.owner), "device") for lease in core.store.pins(x) or ()]
    return out + [(str(lease.owner), "host") for lease in core.handed.host_pins(x) or ()]


def test_with_the_lease_history_the_dump_carries_the_lease_events_acks_included(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(LEASE_HISTORY_ENV, "512")
    s = _state()
    cache = s.setup.cache
    cache.ready_to_load_host_cache()
    cache.loading_check()  # the load-back of D is acked
    cache.dec_lock_ref(s.f, s.f_lock)
    dump = load_dump(write_document(capture_core(s.core), tmp_path / "core.json"))
    assert dump.revalidate() == []
    kinds = [e.kind for e in dump.events]
    assert "acquire" in kinds and "release" in kinds and kinds.count("note") == 2
    acks = [e for e in dump.events if e.kind == "ack"]
    assert acks[:-1] and all((e.owner or "").startswith("write-through ack ") for e in acks[:-1])
    assert acks[-1].owner == f"load-back #1 anchor {s.d}" and s.d in acks[-1].nodes
    acquired = {e.lease: e.owner for e in dump.events if e.kind == "acquire"}
    for lease in dump.leases.values():
        assert acquired[lease.id] == lease.owner  # the receipt's name is fixed when its lease is acquired
    assert [lease.owner.split(" #")[0] for lease in dump.leases.values()] == ["Full pin"]
    s.core.dec_full_pin(s.f)
    cache.release_host_resources()


@pytest.mark.parametrize("components", ["full", "full+mamba", "full+swa"])
@pytest.mark.parametrize("history", [0, 256])
@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_every_dump_along_the_random_driver_is_clean(policy: str, history: int, components: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEASE_HISTORY_ENV, str(history))
    mamba, swa = components == "full+mamba", components == "full+swa"
    seen = {"dumps": 0, "leases": 0, "events": 0, "mamba_leases": 0, "swa_leases": 0}

    def clean(core: UnicacheTreeCore) -> None:
        dump = CrashDump.from_json(json.loads(json.dumps(capture_core(core))))
        assert dump.revalidate() == [], dump.revalidate()
        assert dump.sanity is not None and dump.sanity.ok
        seen["dumps"] += 1
        seen["leases"] += len(dump.leases)
        seen["mamba_leases"] += sum(1 for lease in dump.leases.values() if lease.component == "mamba")
        seen["swa_leases"] += sum(1 for lease in dump.leases.values() if lease.component == "swa")
        seen["events"] += len(dump.events)

    drive("unicache", 3, policy, check=True, after=clean, mamba=mamba, mamba_slots=3,
          swa_window=4 if swa else None)
    assert seen["dumps"] > 100 and seen["leases"] > 0 and seen["events"] > 0
    assert (seen["mamba_leases"] > 0) == mamba and (seen["swa_leases"] > 0) == swa


def test_a_match_still_serves_after_a_capture() -> None:
    """Capturing reads only: the tree, sizes and leases are those of before."""
    s = _state()
    core = s.core
    before = (core.evictable_size(), core.protected_size(), core.ledger.live_count, core.ledger.acquired)
    capture_core(core)
    assert (core.evictable_size(), core.protected_size(), core.ledger.live_count, core.ledger.acquired) == before
    m = s.setup.cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", F))))
    assert int(m.device_prefix_len) == len(F)
    s.finish()

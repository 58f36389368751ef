"""Side by side with SGLang's own UnifiedRadixCache on the identical request sequence.

    python benchmarks/peer_sglang.py [--harness ../shared/bench/sglang_harness.py]
        [--sglang-venv /tmp/sglang-venv] [--rounds 3] [--configs full/1,full/16,full+mamba/1]
        [--policies write_back,write_through] [--builds pure,compiled] [--no-memory] [--json PATH]
        [--token-bytes 4|8]

For every configuration it alternates, round by round, our replay on each
build (`pure` in this process; `compiled`, the default whenever `make setup`
built the mypyc copy in build/compiled, in a fresh interpreter on that copy)
and SGLang's harness (in its own venv, set up with the harness's
`setup-sglang-venv.sh` when missing), on the same requests (the harness's
`gen_workload`, whose page-size-1 form is its `--dump-workload`; both sides
get the harness's `array("q")` token sequences), the same pool sizes
(device = max(unique/12, 2*longest), host 12x, 64 Mamba slots), immediate
acks and no data movement on either side. It prints both requests/s, the
ratio ours/theirs for each SGLang core, per-op means, the work each side did
(device-hit tokens, host-hit tokens, load-backs, evictions) with a note
wherever that work differs by more than 10%, and the peak Python memory per
cached node of both sides (tracemalloc over the run, started once the cache
is built, divided by the peak node count; SGLang's Python core only: the Rust
core's nodes are not Python objects). Both builds must do identical work
(same counters and digest). The issue's targets are judged on the best build
a normal set-up gives: the compiled one when a C compiler exists.

Per-op figures are exclusive like the harness's: every eviction (explicit,
or run inside a load-back or an allocation) is timed as `evict` and its time
is taken out of the enclosing operation (through the device room's `clock`
hook: `DeviceRoom.evict_ns`).

On our side leases, pin sets and the runtime checks stay on: the ledger runs
at its cheapest setting (no event ring, no sites), as a production engine
would, and every pin is still a lease. Our keys take `--token-bytes` bytes a
token id (`CacheConfig.token_bytes`, default 4: the harness's ids are
vocabulary ids below 150,000); our side narrows the harness's `array("q")`
requests inside the timed `match_prefix` / `insert`.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from rich.console import Console
from rich.table import Table

from unicache import CacheConfig, Full, ImmediateEngine, Mamba, UniCache

REPO = Path(__file__).resolve().parent.parent
DEFAULT_HARNESS = REPO.parent / "shared" / "bench" / "sglang_harness.py"
COMPILED = REPO / "build" / "compiled"
HOST_RATIO = 12
MAMBA_SLOTS = 64
LOAD_BACK_THRESHOLD = 10
OPS = ("match", "insert", "lock", "unlock", "load_back", "evict", "alloc", "events")

# Run by SGLang's interpreter: the harness's own `run_once` (python core) with
# tracemalloc started once the cache is built and read before its final
# sanity check; prints {"peak_bytes", "peak_nodes"}.
_THEIR_MEMORY = r"""
import gc, importlib.util, json, sys, tracemalloc
path, comps, ps, policy = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
spec = importlib.util.spec_from_file_location("sglang_harness", path)
h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
import torch
torch.set_num_threads(1)
h._install_cpu_shims()
from sglang.srt.mem_cache.unified_cache.components.base import ComponentType
state = {}
build = h.build_cache
def traced_build(**kw):
    out = build(**kw)
    cache = out[0]
    check = cache.sanity_check
    def sanity_check(*a, **k):
        state.setdefault("peak", tracemalloc.get_traced_memory()[1] - state["base"])
        return check(*a, **k)
    cache.sanity_check = sanity_check
    gc.collect()
    tracemalloc.start()
    state["base"] = tracemalloc.get_traced_memory()[0]
    return out
h.build_cache = traced_build
reqs, unique = h.gen_workload(0, page_size=ps)
longest = max(len(t) for _, _, t in reqs)
device = h._align(max(int(unique / 12), 2 * longest), ps)
cfg = dict(components=tuple(ComponentType[c] for c in comps.split("+")), page_size=ps,
           device_tokens=device, host_ratio=12.0, policy=policy, backend="python",
           mamba_slots=64, max_context_len=longest + 2 * ps)
r = h.run_once(cfg, reqs, sample_nodes_every=1)
print(json.dumps({"peak_bytes": state["peak"], "peak_nodes": r["peak_nodes"]}))
"""


@dataclass(frozen=True)
class PeerConfig:
    components: str
    page_size: int
    policy: str
    token_bytes: int = 4

    @property
    def label(self) -> str:
        keys = "" if self.token_bytes == 4 else f"/keys{self.token_bytes}"
        return f"{self.components.upper()}/ps{self.page_size}/{self.policy}{keys}"

    @property
    def spec(self) -> str:
        """The `--worker` form of this configuration."""
        return f"{self.components}/{self.page_size}/{self.policy}/{self.token_bytes}"

    @property
    def mamba(self) -> bool:
        return "mamba" in self.components

    @property
    def harness_components(self) -> str:
        return "FULL+MAMBA" if self.mamba else "FULL"


@dataclass
class Run:
    wall_s: float
    op_ns: dict[str, list[int]] = field(default_factory=dict)
    work: dict[str, int] = field(default_factory=dict)

    def add(self, op: str, ns: int) -> None:
        entry = self.op_ns.setdefault(op, [0, 0])
        entry[0] += ns
        entry[1] += 1

    def mean_us(self, op: str) -> float:
        total, calls = self.op_ns.get(op, [0, 0])
        return total / calls / 1e3 if calls else 0.0


def load_harness(path: Path) -> ModuleType:
    """Import the harness file for its workload generator (it needs no SGLang for that)."""
    spec = importlib.util.spec_from_file_location("sglang_harness", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import the harness at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def workload(harness: ModuleType, seed: int, page_size: int) -> tuple[list[array[int]], int, int]:
    """The harness's requests (its `array("q")` token sequences), unique tokens, device tokens."""
    reqs, unique = harness.gen_workload(seed, page_size=page_size)
    tokens: list[array[int]] = [t for _, _, t in reqs]
    longest = max(len(t) for t in tokens)
    device = max(int(unique / HOST_RATIO), 2 * longest)
    device = max(page_size, device // page_size * page_size)
    return tokens, unique, device


def build_ours(cfg: PeerConfig, device_tokens: int) -> UniCache:
    return UniCache(CacheConfig(
        device_tokens=device_tokens,
        page_size=cfg.page_size,
        host_ratio=HOST_RATIO,
        mamba=cfg.mamba,
        mamba_device_slots=MAMBA_SLOTS,
        mamba_host_slots=MAMBA_SLOTS * HOST_RATIO if cfg.mamba else None,
        write_policy="write_back" if cfg.policy == "write_back" else "write_through",
        write_through_threshold=1,
        load_back_threshold=LOAD_BACK_THRESHOLD,
        kv_width=1,
        mamba_width=1,
        device="cpu",
        history=0,
        token_bytes=4 if cfg.token_bytes == 4 else 8,
    ), ImmediateEngine(copy=False))


def run_ours(
    cfg: PeerConfig,
    requests: Sequence[Sequence[int]],
    device_tokens: int,
    *,
    memory: bool = False,
    cache: UniCache | None = None,
    check: bool = True,
) -> Run:
    """Replay the harness's per-request op sequence (its README §2) on UniCache.

    `memory=True` traces Python allocations instead of timing (slow): the run's
    `work` then holds `peak_bytes` and `peak_nodes`. `cache` replays on a cache
    built beforehand by `build_ours` (a fresh one is built when omitted);
    `check=False` skips the closing sanity check (outside the timed part; the
    instruction counts of `core_icount.py` leave it out).
    """
    if cache is None:
        cache = build_ours(cfg, device_tokens)
    run = Run(wall_s=0.0)
    page = cfg.page_size
    full_alloc = cache.pools.device_pool(Full).alloc
    ns = time.perf_counter_ns
    room = cache.room
    room.clock = ns
    dev_hit = host_hit_total = loaded_total = load_backs = peak_nodes = 0
    digest = 0
    gc.collect()
    gc.disable()
    if memory:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0] if memory else 0
    start = ns()
    for tokens in requests:
        n = len(tokens)
        t0 = ns()
        m = cache.match_prefix(tokens)
        run.add("match", ns() - t0)
        # host_hit is Full KV on host only, like the harness's `host_hit_length`
        node, dev_len, host_hit, loaded = m.device_node, m.device_len, m.full_host_tokens, 0
        dev_hit += dev_len
        host_hit_total += host_hit
        if m.worth_load_back:
            e0 = room.evict_ns
            t0 = ns()
            ticket = cache.load_back(m.anchor)
            if ticket is not None:
                cache.poll()
                result = ticket.result()
                run.add("load_back", ns() - t0 - (room.evict_ns - e0))
                if result.ok:
                    load_backs += 1
                    loaded = m.anchor_len - dev_len
                    loaded_total += loaded
                    node, dev_len = m.anchor, m.anchor_len
        t0 = ns()
        receipt = cache.lock(node)
        run.add("lock", ns() - t0)
        need = (n - dev_len) // page
        free = full_alloc.free_count
        if need > free:
            cache.evict_device(Full, need - free)
        e0 = room.evict_ns
        t0 = ns()
        slots = cache.alloc_device(Full, need) if need else []
        run.add("alloc", ns() - t0 - (room.evict_ns - e0))
        if slots is None:
            cache.unlock(receipt)
            raise RuntimeError(f"device KV allocation failed (need {need} pages)")
        mamba_slot = None
        if cfg.mamba:
            got = cache.alloc_device(Mamba, 1)
            if not got:
                cache.unlock(receipt)
                raise RuntimeError("mamba slot allocation failed")
            mamba_slot = got[0]
        t0 = ns()
        cache.insert(tokens, slots, start=dev_len, mamba_slot=mamba_slot)
        run.add("insert", ns() - t0)
        t0 = ns()
        cache.unlock(receipt)
        run.add("unlock", ns() - t0)
        t0 = ns()
        cache.poll()
        run.add("events", ns() - t0)
        digest = (digest * 1_000_003 + dev_len * 7 + host_hit * 13 + loaded) % (1 << 61)
        if memory:
            peak_nodes = max(peak_nodes, cache.node_count)
    run.wall_s = (ns() - start) / 1e9
    run.op_ns["evict"] = [room.evict_ns, room.evict_calls]
    peak_bytes = 0
    if memory:
        peak_bytes = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    gc.enable()
    c = cache.counters
    run.work = {
        "device_hit_tokens": dev_hit,
        "host_hit_tokens": host_hit_total,
        "load_backs": load_backs,
        "loaded_tokens": loaded_total,
        "device_evictions": c.demotions + c.dropped_nodes,
        "mamba_evicted": c.mamba_evicted,
        "backups": c.backups,
        "host_evictions": c.host_evictions,
        "digest": digest,
        "nodes": cache.node_count,
        "peak_bytes": peak_bytes,
        "peak_nodes": peak_nodes,
    }
    if check:
        report = cache.sanity_check()
        if not report.ok:
            raise RuntimeError(f"sanity check failed after the peer replay:\n{report.describe()}")
    return run


def ensure_sglang_venv(venv: Path, harness: Path) -> Path:
    python = venv / "bin" / "python"
    if python.exists():
        return python
    setup = harness.parent / "setup-sglang-venv.sh"
    print(f"setting up the SGLang venv at {venv} with {setup} (a few minutes, ~6 GB)...", file=sys.stderr)
    subprocess.run(["bash", str(setup), str(venv)], check=True)
    return python


def run_theirs(python: Path, harness: Path, cfg: PeerConfig) -> dict[str, dict[str, object]]:
    """One harness invocation (one run per backend); results keyed by backend."""
    proc = subprocess.run(
        [str(python), str(harness), "--seed", "0", "--repeats", "1",
         "--page-sizes", str(cfg.page_size), "--components", cfg.harness_components,
         "--policies", cfg.policy, "--backends", "python,rust", "--transfer", "noop"],
        capture_output=True, text=True, check=True,
    )
    last = proc.stdout.strip().splitlines()[-1]
    results = json.loads(last)["results"]
    out: dict[str, dict[str, object]] = {}
    for r in results:
        if "error" in r or "skipped" in r:
            raise RuntimeError(f"harness failed for {cfg.label}: {r}")
        out[str(r["label"]).rsplit("/", 1)[-1]] = r
    return out


def their_memory(python: Path, harness: Path, cfg: PeerConfig) -> tuple[int, int]:
    """(peak traced bytes, peak nodes) of SGLang's Python core over the same run."""
    proc = subprocess.run(
        [str(python), "-c", _THEIR_MEMORY, str(harness), cfg.harness_components,
         str(cfg.page_size), cfg.policy],
        capture_output=True, text=True, check=True,
    )
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return int(data["peak_bytes"]), int(data["peak_nodes"])


def _their_work(r: dict[str, object]) -> dict[str, int]:
    counters = r["counters"]
    assert isinstance(counters, dict)
    return {
        "device_hit_tokens": int(counters.get("matched_device_tokens", 0)),
        "host_hit_tokens": int(counters.get("matched_host_tokens", 0)),
        "load_backs": int(counters.get("load_backs", 0)),
        "loaded_tokens": int(counters.get("loaded_tokens", 0)),
        "device_evictions": int(counters.get("device_leaf_evictions", 0)),
        "mamba_evicted": int(counters.get("evicted_mamba_states", 0)),
        "backups": int(counters.get("backups_d2h", 0)),
        "host_evictions": int(counters.get("host_eviction_calls", 0)),
        "digest": int(str(r.get("digest", 0))),
        "nodes": int(str(r.get("peak_nodes") or 0)),
    }


def _their_op(runs: list[dict[str, object]], op: str) -> float:
    values = []
    for r in runs:
        means = r["op_mean_us"]
        assert isinstance(means, dict)
        values.append(float(means.get(op, 0.0)))
    return statistics.median(values)


WORK_KEYS = ("device_hit_tokens", "host_hit_tokens", "load_backs", "loaded_tokens",
             "device_evictions", "mamba_evicted", "backups")
WORK_NOTES = {
    "host_hit_tokens": "with Mamba, our Mamba eviction frees only the state while SGLang's can take "
                       "a leaf's Full KV with it, so more of a path is host-only there",
    "loaded_tokens": "same cause as host-hit tokens: a load-back here moves less Full KV",
    "load_backs": "victims chosen differently earlier (LRU ties) leave different anchors evicted",
    "mamba_evicted": "Mamba victims differ with the LRU clock and tie order",
}


def _run_to_json(run: Run) -> dict[str, object]:
    return {"wall_s": run.wall_s, "op_ns": run.op_ns, "work": run.work}


def _run_from_json(data: dict[str, object]) -> Run:
    op_ns = data["op_ns"]
    work = data["work"]
    assert isinstance(op_ns, dict) and isinstance(work, dict)
    return Run(wall_s=float(str(data["wall_s"])), op_ns={str(k): [int(a), int(b)] for k, (a, b) in op_ns.items()},
               work={str(k): int(v) for k, v in work.items()})


def loaded_build() -> str:
    """`compiled` when the core's ops are C extensions in this process, else `pure`."""
    import unicache.ops.insert as probe

    return "compiled" if str(probe.__file__).endswith((".so", ".pyd")) else "pure"


def run_ours_in(build: str, harness: Path, cfg: PeerConfig, *, memory: bool = False) -> Run:
    """Our replay on `build`: in this process for `pure`; for `compiled`, a fresh interpreter on the
    mypyc copy in build/compiled (PYTHONPATH and UNICACHE_BUILD as `make test-compiled` sets them),
    which regenerates the same requests from the harness and checks it loaded the compiled core."""
    if build == "pure":
        tokens, _, device = workload(load_harness(harness), 0, cfg.page_size)
        return run_ours(cfg, tokens, device, memory=memory)
    root = COMPILED
    env = dict(os.environ, PYTHONPATH=str(root), UNICACHE_BUILD="compiled")
    cmd = [sys.executable, str(root / "benchmarks" / "peer_sglang.py"), "--harness", str(harness),
           "--worker", cfg.spec] + (["--worker-memory"] if memory else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
    if proc.returncode != 0:
        raise RuntimeError(f"compiled worker failed for {cfg.label}:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    if data.get("build") != "compiled":
        raise RuntimeError(f"the compiled worker loaded the {data.get('build')} build (is build/compiled stale?)")
    return _run_from_json(data)


def _worker(harness: Path, spec: str, memory: bool) -> None:
    comp, ps, policy, tb = spec.split("/")
    cfg = PeerConfig(comp, int(ps), policy, int(tb))
    tokens, _, device = workload(load_harness(harness), 0, cfg.page_size)
    run = run_ours(cfg, tokens, device, memory=memory)
    print(json.dumps({"build": loaded_build(), **_run_to_json(run)}))


def default_builds() -> str:
    marker = COMPILED / "BUILD"
    return "pure,compiled" if marker.exists() and marker.read_text().strip() == "compiled" else "pure"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--harness", type=Path, default=DEFAULT_HARNESS)
    parser.add_argument("--sglang-venv", type=Path, default=Path("/tmp/sglang-venv"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default="full/1,full/16,full+mamba/1")
    parser.add_argument("--policies", default="write_back,write_through")
    parser.add_argument("--builds", default=None,
                        help="our builds to run: pure,compiled (default: both when build/compiled is compiled)")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory runs")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--token-bytes", type=int, choices=(4, 8), default=4,
                        help="our key width (CacheConfig.token_bytes; default 4)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-memory", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.harness.exists():
        raise SystemExit(f"no harness at {args.harness}; pass --harness PATH")
    harness_path = args.harness.resolve()
    if args.worker:
        _worker(harness_path, args.worker, args.worker_memory)
        return
    builds = (args.builds or default_builds()).split(",")
    for b in builds:
        if b not in ("pure", "compiled"):
            raise SystemExit(f"unknown build {b!r}: pure or compiled")
    best = builds[-1]
    harness = load_harness(harness_path)
    python = ensure_sglang_venv(args.sglang_venv, harness_path)
    console = Console(width=220)
    configs = [
        PeerConfig(comp, int(ps), policy, args.token_bytes)
        for spec in args.configs.split(",")
        for comp, ps in [spec.split("/")]
        for policy in args.policies.split(",")
    ]
    caption = (f"targets are judged on the best build a normal set-up gives: {best}"
               + (" (make setup compiles the core with mypyc when a C compiler works)" if best == "compiled" else ""))
    summary = Table(title=f"requests/s, median of {args.rounds} alternating rounds (same run)", caption=caption)
    summary.add_column("config", justify="right")
    for b in builds:
        summary.add_column(f"ours {b}", justify="right")
    for col in ("sglang python", "sglang rust"):
        summary.add_column(col, justify="right")
    for b in builds:
        summary.add_column(f"{b}/python", justify="right")
        summary.add_column(f"{b}/rust", justify="right")
    ops = Table(title="per-op mean, µs (median over rounds; exclusive of eviction): "
                      "ours | sglang python | sglang rust", caption=caption)
    ops.add_column("config")
    ops.add_column("build")
    for op in OPS[:-1]:
        ops.add_column(op, justify="right")
    work = Table(title=f"work done (ours {best} | sglang): comparable when within 10%")
    work.add_column("config")
    for key in WORK_KEYS:
        work.add_column(key.replace("_", " "), justify="right")
    work.add_column("note")
    mem = Table(title="peak Python memory per cached node (tracemalloc, ours | sglang python)", caption=caption)
    for col in ("config", "build", "ours B/node", "sglang B/node", "ours/sglang", "ours peak MB | nodes",
                "sglang peak MB | nodes"):
        mem.add_column(col, justify="right")
    dump: list[dict[str, object]] = []
    for cfg in configs:
        tokens, unique, device = workload(harness, 0, cfg.page_size)
        ours: dict[str, list[Run]] = {b: [] for b in builds}
        theirs: dict[str, list[dict[str, object]]] = {"python": [], "rust": []}
        for _ in range(args.rounds):
            for b in builds:
                ours[b].append(run_ours_in(b, harness_path, cfg))
            for backend, r in run_theirs(python, harness_path, cfg).items():
                theirs[backend].append(r)
        rps = {b: statistics.median(len(tokens) / r.wall_s for r in ours[b]) for b in builds}
        t_rps = {b: statistics.median(float(str(r["req_per_s"])) for r in rs) for b, rs in theirs.items()}
        row = [cfg.label] + [f"{rps[b]:,.0f}" for b in builds]
        row += [f"{t_rps['python']:,.0f}", f"{t_rps['rust']:,.0f}"]
        for b in builds:
            row += [f"{rps[b] / t_rps['python']:.2f}x", f"{rps[b] / t_rps['rust']:.2f}x"]
        summary.add_row(*row)
        mine_ops = {b: {op: statistics.median(r.mean_us(op) for r in ours[b]) for op in OPS} for b in builds}
        for b in builds:
            cells = [cfg.label, b]
            for op in OPS[:-1]:
                cells.append(f"{mine_ops[b][op]:.1f} | {_their_op(theirs['python'], op):.1f} | "
                             f"{_their_op(theirs['rust'], op):.1f}")
            ops.add_row(*cells)
        for b in builds[1:]:
            if ours[b][0].work != ours[builds[0]][0].work:
                raise RuntimeError(f"{cfg.label}: the {b} build did different work from {builds[0]}: "
                                   f"{ours[b][0].work} vs {ours[builds[0]][0].work}")
        mine_w, their_w = ours[best][0].work, _their_work(theirs["python"][0])
        notes = []
        cells = [cfg.label]
        for key in WORK_KEYS:
            a, b2 = mine_w[key], their_w[key]
            cells.append(f"{a:,} | {b2:,}")
            if abs(a - b2) > 0.1 * max(a, b2, 1) and key in WORK_NOTES:
                notes.append(f"{key}: {WORK_NOTES[key]}")
            elif abs(a - b2) > 0.1 * max(a, b2, 1):
                notes.append(key)
        cells.append("comparable" if not notes else "differs: " + "; ".join(notes))
        work.add_row(*cells)
        entry: dict[str, object] = {
            "config": cfg.label, "unique_tokens": unique, "device_tokens": device, "builds": builds,
            "ours_req_per_s": rps, "sglang_req_per_s": t_rps,
            "ours_req_per_s_all": {b: [len(tokens) / r.wall_s for r in ours[b]] for b in builds},
            "ours_op_mean_us": mine_ops,
            "ours_work": mine_w, "sglang_work": their_w,
            "sglang_op_mean_us": {b: {op: _their_op(rs, op) for op in OPS} for b, rs in theirs.items()},
        }
        if not args.no_memory:
            t_bytes, t_nodes = their_memory(python, harness_path, cfg)
            their_per = t_bytes / max(1, t_nodes)
            memory: dict[str, object] = {"sglang_peak_bytes": t_bytes, "sglang_peak_nodes": t_nodes}
            for b in builds:
                m = run_ours_in(b, harness_path, cfg, memory=True).work
                ours_per = m["peak_bytes"] / max(1, m["peak_nodes"])
                mem.add_row(cfg.label, b, f"{ours_per:,.0f}", f"{their_per:,.0f}", f"{ours_per / their_per:.2f}x",
                            f"{m['peak_bytes'] / 1e6:.2f} | {m['peak_nodes']:,}",
                            f"{t_bytes / 1e6:.2f} | {t_nodes:,}")
                memory[b] = {"ours_peak_bytes": m["peak_bytes"], "ours_peak_nodes": m["peak_nodes"]}
            entry["memory"] = memory
        dump.append(entry)
        console.print(f"[dim]{cfg.label}: ours " + ", ".join(f"{b} {rps[b]:,.0f}" for b in builds)
                      + f" req/s; sglang python {t_rps['python']:,.0f}, rust {t_rps['rust']:,.0f}[/dim]")
    console.print(summary)
    console.print(ops)
    console.print(work)
    if not args.no_memory:
        console.print(mem)
    if args.json:
        args.json.write_text(json.dumps(dump, indent=2, default=str))


if __name__ == "__main__":
    main()

"""Watching a running server from outside: its ``/metrics`` scraped over HTTP, a live dump on SIGUSR1, the REPL on it.

`scrape` reads SGLang's ``/metrics`` with prometheus_client's own text
parser into `Samples` (every sample by its sample name, e.g. a counter's
``..._total``). SGLang's multiprocess mode shows our families as the
scheduler process last mirrored them (every second,
`unicache.integrations.sglang.metrics.SGLangMetrics`), so `poll_metrics`
scrapes until a condition on what the server did holds, up to a deadline
that only guards against metrics that never come; the last scrape is
returned either way, for the tests to judge. `scheduler_process` finds the
process of the server's group SGLang titles ``sglang::scheduler`` (the one whose
main thread built the cache and took over SIGUSR1); `wait_for_dump` polls
the dump directory for the file the core writes (atomically) at its next
safe point; `repl_on_dump` runs the ``unicache repl --dump`` command line
on it with a script and returns its ``--json`` answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.integrations.sglang.server.launch import ROOT, group_members

SCRAPE_TIMEOUT_S: Final = 30.0
METRICS_DEADLINE_S: Final = 60.0
DUMP_DEADLINE_S: Final = 60.0
POLL_S: Final = 0.2
SCHEDULER_TITLE: Final = "sglang::scheduler"
LIVE_DUMP_GLOB: Final = "unicache-live-*.json"


@dataclass(slots=True)
class Samples:
    """One scrape: each sample name's (labels, value) rows, and the family names seen."""

    rows: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    families: set[str] = field(default_factory=set)
    text: str = ""

    def get(self, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
        """The rows of sample `name` whose labels include `labels`."""
        return [(lv, v) for lv, v in self.rows.get(name, []) if all(lv.get(k) == x for k, x in labels.items())]

    def total(self, name: str, **labels: str) -> float:
        """The sum of `get(name, **labels)` (0 when there is none)."""
        return sum(v for _, v in self.get(name, **labels))

    def values(self, label: str, name: str, **labels: str) -> set[str]:
        """The values label `label` takes in `get(name, **labels)`."""
        return {lv[label] for lv, _ in self.get(name, **labels) if label in lv}


def parse(text: str) -> Samples:
    """`Samples` of Prometheus text exposition `text`."""
    out = Samples(text=text)
    for family in text_string_to_metric_families(text):
        out.families.add(family.name)
        for sample in family.samples:
            out.rows.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def scrape(url: str) -> Samples:
    """``GET /metrics`` of the server at `url`, parsed; raises unless it answers 200."""
    resp = requests.get(f"{url}/metrics", timeout=SCRAPE_TIMEOUT_S)
    if resp.status_code != 200:
        raise RuntimeError(f"GET {url}/metrics: HTTP {resp.status_code}: {resp.text[:500]}")
    return parse(resp.text)


@dataclass(frozen=True, slots=True)
class Polled:
    """The last scrape of `poll_metrics`, whether `ready` held on it, how many scrapes it took."""

    samples: Samples
    ready: bool
    scrapes: int
    waited_s: float


def poll_metrics(url: str, ready: Callable[[Samples], bool], *, deadline_s: float = METRICS_DEADLINE_S) -> Polled:
    """Scrape until `ready` holds on a scrape or `deadline_s` passes; the last scrape."""
    started = time.monotonic()
    scrapes = 0
    while True:
        samples = scrape(url)
        scrapes += 1
        waited = time.monotonic() - started
        if ready(samples):
            return Polled(samples, True, scrapes, waited)
        if waited > deadline_s:
            return Polled(samples, False, scrapes, waited)
        time.sleep(POLL_S)


def scheduler_process(group: int) -> tuple[int, str]:
    """Pid and title of the one process of process group `group` titled ``sglang::scheduler...``.

    SGLang sets the title with setproctitle, which rewrites the command line
    (Linux's ``/proc/<pid>/cmdline``; the short name, ``comm``, is cut at 15 bytes).
    """
    found: list[tuple[int, str]] = []
    for member in group_members(group):
        pid = int(member.split(" ", 1)[0])
        try:
            title = Path("/proc", str(pid), "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if title.startswith(SCHEDULER_TITLE):
            found.append((pid, title.strip()))
    if len(found) != 1:
        raise RuntimeError(f"expected one {SCHEDULER_TITLE} process in group {group}, found {found}")
    return found[0]


def wait_for_dump(directory: Path, alive: Callable[[], bool], *, deadline_s: float = DUMP_DEADLINE_S) -> Path | None:
    """The live dump in `directory` once there is exactly one, polled until `deadline_s` (None then).

    The core writes it atomically (a temporary file renamed), so a file
    that is there is whole. Stops early, with None, when `alive()` turns false.
    """
    end = time.monotonic() + deadline_s
    while True:
        found = sorted(directory.glob(LIVE_DUMP_GLOB)) if directory.is_dir() else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise RuntimeError(f"more than one live dump in {directory}: {found}")
        if not alive() or time.monotonic() > end:
            return None
        time.sleep(POLL_S)


def repl_on_dump(path: Path, script: str, workdir: Path) -> list[dict[str, object]]:
    """``unicache repl --dump PATH --script S --json`` as a process; one JSON answer per command of `script`."""
    script_path = workdir / "look.repl"
    script_path.write_text(script, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    done = subprocess.run([sys.executable, "-m", "unicache.cli", "repl", "--dump", str(path), "--script",
                           str(script_path), "--json"], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"unicache repl --dump {path}: exit {done.returncode}:\n{done.stdout[-2000:]}"
                           f"\n{done.stderr[-2000:]}")
    answers: list[dict[str, object]] = []
    for line in done.stdout.splitlines():
        if line.strip():
            answer = json.loads(line)
            if not isinstance(answer, dict):
                raise RuntimeError(f"unicache repl --json printed {line[:200]!r}, not an object")
            answers.append(answer)
    return answers


def lease_metric_problems(samples: Samples, cache_type: str, ledgers: Mapping[str, bool],
                          epochs: Mapping[str, int]) -> list[str]:
    """What in `samples` contradicts a lease core at rest after serving (empty: nothing), for `cache_type`'s series.

    `ledgers`: every ledger the core has, and whether it acquired leases
    while serving. At rest none is live, none leaked, every acquisition is
    accounted for (acquired == released + revoked + live), and a ledger that
    acquired observed hold times; one that did not shows its counters at 0.
    `epochs`: the epoch some ledgers are at by then (each reset advances it).
    """
    labels = {"cache_type": cache_type}
    names = samples.values("ledger", "unicache_leases_acquired_total", **labels)
    problems = [] if names == set(ledgers) else [f"ledgers {sorted(names)}, expected {sorted(ledgers)}"]
    for name in sorted(names & set(ledgers)):
        per = dict(labels, ledger=name)
        acquired = samples.total("unicache_leases_acquired_total", **per)
        released = samples.total("unicache_leases_released_total", **per)
        revoked = samples.total("unicache_leases_revoked_total", **per)
        leaked = samples.total("unicache_leases_leaked_total", **per)
        live = samples.total("unicache_leases_live", **per)
        held = samples.total("unicache_lease_hold_seconds_count", **per)
        busy = ledgers[name]
        epoch = samples.total("unicache_ledger_epoch", **per)
        if name in epochs and epoch != epochs[name]:
            problems.append(f"{name}: epoch {epoch}, expected {epochs[name]}")
        if ((acquired > 0) != busy or live != 0 or leaked != 0 or acquired != released + revoked + live
                or (held > 0) != busy):
            problems.append(f"{name}: acquired {acquired} released {released} revoked {revoked} leaked {leaked} "
                            f"live {live} hold-time count {held}")
    return problems

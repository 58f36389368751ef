"""`python -m sglang.launch_server` as a subprocess: command line per tree core, readiness, clean stop.

The server's environment gets the repository root on PYTHONPATH (so the
processes import this checkout's unicache) and, on CPU, the directory of
the stand-ins' ``sitecustomize`` (`standins`). Readiness is SGLang's own
``/health`` answering 200, polled until a generous deadline that only
guards against a server that never comes up (it fails the test, naming the
log). Stopping sends SIGTERM to the launcher, which stops its HTTP server
and kills its scheduler and detokenizer; the exit status is returned.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import requests

from unicache.integrations.sglang.report import RESET_REPORT_ENV
from unicache.integrations.sglang.treecore.dump import DUMP_DIR_ENV

ROOT: Final = Path(__file__).resolve().parents[4]
SITE: Final = Path(__file__).resolve().parent / "site"
TREE_CORE_ENV: Final = "SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND"
READY_DEADLINE_S: Final = 300.0
STOP_DEADLINE_S: Final = 120.0
GROUP_DEADLINE_S: Final = 30.0

CORE_SETTINGS: Final[dict[str, tuple[dict[str, str], tuple[str, ...]]]] = {
    "rust": ({TREE_CORE_ENV: "rust"}, ()),
    "leases": ({}, ("--radix-cache-backend", "leases")),
    "unicache": ({}, ("--radix-cache-backend", "unicache")),
}
"""Tree core -> (environment, flags) selecting it: SGLang's default core; ours, as docs/sglang.md recommends."""

CPU_FLAGS: Final = (
    "--device", "cpu", "--attention-backend", "torch_native", "--sampling-backend", "pytorch",
    "--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled",
    "--hicache-io-backend", "direct", "--hicache-mem-layout", "layer_first",
)


def free_port() -> int:
    """A TCP port nobody listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_members(pgid: int) -> list[str]:
    """``pid (name) state`` of every process in process group `pgid` (from Linux's ``/proc/<pid>/stat``)."""
    out: list[str] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        head, _, rest = stat.rpartition(")")
        fields = rest.split()
        if int(fields[2]) == pgid:
            out.append(f"{head}) {fields[0]}")
    return out


@dataclass(slots=True)
class ServerConfig:
    """What one launch needs: tree core, model, pool sizes, metrics, and where its log, report and dumps go.

    The host pool is `hicache_ratio` times the device pool (16 x 4,096
    tokens by default: a few MB for the tiny model, allocated in well under
    a second, where ``--hicache-size 1`` takes seconds to map 1 GB).
    """

    core: str
    model: Path
    workdir: Path
    on_cpu: bool
    max_total_tokens: int = 4096
    hicache_ratio: int = 16
    max_running_requests: int = 8
    enable_metrics: bool = True
    extra_args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)

    @property
    def log(self) -> Path:
        return self.workdir / f"server-{self.core}.log"

    @property
    def report(self) -> Path:
        return self.workdir / f"reset-report-{self.core}.jsonl"

    @property
    def dump_dir(self) -> Path:
        """Where tree core ``unicache`` writes its live and crash dumps (``UNICACHE_SGLANG_DUMP_DIR``)."""
        return self.workdir / "dumps"

    def command(self) -> list[str]:
        _, flags = CORE_SETTINGS[self.core]
        return [
            sys.executable, "-m", "sglang.launch_server", "--model-path", str(self.model),
            "--host", "127.0.0.1", "--port", str(self.port), "--skip-server-warmup",
            "--max-total-tokens", str(self.max_total_tokens), "--mem-fraction-static", "0.1",
            "--max-running-requests", str(self.max_running_requests), "--grammar-backend", "none",
            "--enable-hierarchical-cache", "--hicache-ratio", str(self.hicache_ratio),
            *(CPU_FLAGS if self.on_cpu else ()), *(("--enable-metrics",) if self.enable_metrics else ()),
            *flags, *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != TREE_CORE_ENV}
        core_env, _ = CORE_SETTINGS[self.core]
        env.update(core_env)
        paths = [str(SITE)] if self.on_cpu else []
        paths += [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env[RESET_REPORT_ENV] = str(self.report)
        env[DUMP_DIR_ENV] = str(self.dump_dir)
        return env


class ServerFailed(RuntimeError):
    """The server exited or never became ready; the message names its log and ends with its tail."""

    def __init__(self, config: ServerConfig, what: str) -> None:
        tail = config.log.read_text(errors="replace")[-4000:] if config.log.exists() else ""
        super().__init__(f"SGLang server (core {config.core!r}) {what}; log {config.log}:\n{tail}")


class SGLangServer:
    """One running ``sglang.launch_server``; `start` returns once ``/health`` answers 200."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.url = f"http://127.0.0.1:{config.port}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        cfg = self.config
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        self._log = open(cfg.log, "wb")
        self._proc = subprocess.Popen(cfg.command(), env=cfg.environment(), stdout=self._log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + READY_DEADLINE_S
        while True:
            if self._proc.poll() is not None:
                raise ServerFailed(cfg, f"exited with {self._proc.returncode} before it was ready")
            try:
                if requests.get(f"{self.url}/health", timeout=10).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise ServerFailed(cfg, f"was not ready within {READY_DEADLINE_S:.0f} s")
            time.sleep(0.5)

    @property
    def pid(self) -> int:
        """The launcher's pid, which is also its process group (it leads its own session)."""
        if self._proc is None:
            raise RuntimeError("pid before start()")
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> int:
        """SIGTERM, then wait for the launcher to exit; its exit status (killed after the deadline).

        `processes_left` then says whether any process of the server's group outlived it.
        """
        proc = self._proc
        if proc is None:
            raise RuntimeError("stop() before start()")
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise ServerFailed(self.config, f"did not stop within {STOP_DEADLINE_S:.0f} s of SIGTERM")
        self._close_log()
        return proc.returncode

    def processes_left(self) -> list[str]:
        """Processes of the server's group still there after `GROUP_DEADLINE_S` (each ``pid name status``).

        The launcher SIGKILLs its scheduler and detokenizer; processes they
        started are reparented and reaped by init, asynchronously, so the
        group is polled until it is empty or the deadline passes.
        """
        deadline = time.monotonic() + GROUP_DEADLINE_S
        while True:
            left = group_members(self.pid)
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL the server's whole process group (the launcher started it as its own session)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        return self.config.log.read_text(errors="replace")

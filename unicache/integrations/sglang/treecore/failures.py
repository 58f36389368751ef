"""A dump when a lease error or the sanity check fails inside tree core ``"unicache"``, then the error re-raised.

`dumps_on_failure` wraps the core's methods that release a lease, take one
other than a device lock, or hand values back (`GUARDED`), and
`sanity_check`: an escaping
`TreeCoreError`, `TreeCoreSanityError`, lease-runtime `LeaseError` or
unicache `CacheError` (the engine-owned store's `PinnedValuesError`) makes
the core's `FailureDumps` write a dump (`dump.capture_core`) into the dump
directory (`dump.dump_directory`), and the error propagates with the path
in its message (``... [crash dump: PATH]``) and as a note. The refusals of
configurations the core does not cover (`RefusedFeatureError`,
`NamespacedKeyError`) are not failures: nothing is dumped for them.

The core's typed errors are raised before anything changes, so the dump
shows the state the failing call met. One dump per error (a method the core calls
from another guarded one does not dump it twice), at most `MAX_DUMPS` per
core (a loop of failures does not fill the disk: later errors say so); a
dump that cannot be written is named in the message instead
(``[crash dump not written: WHY]``). The wrapper is a frame per call of a
guarded method, generated with the method's own parameters (0.04-0.15 us;
7.6 calls a request on the harness workload: `benchmarks/bench_treecore_tools.py`
measures it); Python's ``try`` costs nothing until something is raised.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Concatenate, Final, ParamSpec, Protocol, TypeVar, cast

from leases import LeaseError

from unicache.dump.writer import write_document
from unicache.errors import CacheError
from unicache.integrations.sglang.treecore.dump import capture_core
from unicache.integrations.sglang.treecore.errors import (
    NamespacedKeyError,
    RefusedFeatureError,
    TreeCoreError,
    TreeCoreSanityError,
)
from unicache.integrations.sglang.treecore.corestate import CoreState
from unicache.outputs import OutputPathError, OutputWriteError

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T", bound=type)

MAX_DUMPS: Final = 16
"""Failure dumps one core writes at most."""
FAILURES: Final = (TreeCoreError, TreeCoreSanityError, LeaseError, CacheError)
NOT_FAILURES: Final = (RefusedFeatureError, NamespacedKeyError)
GUARDED: Final = (
    "dec_lock_ref", "dec_swa_lock_only", "inc_host_lock_ref", "dec_host_lock_ref", "inc_full_pin", "dec_full_pin",
    "evict_device_leaf", "demote", "drop_subtree_no_host", "drive_host_eviction", "commit_backup",
    "mark_write_through_pending", "finish_write_through", "commit_load_back", "finish_load_back", "reset",
    "sanity_check",
)
"""The methods a failure of which writes a dump: every one that releases a lease, takes one other than a
device lock, or hands values back, and the sanity check. Not guarded, being the hottest calls (several per
request) whose only errors are a stale node id or a refusal: `inc_lock_ref`, `match_prefix`, the insert
steps, the eviction walk's candidates, the backup and load-back specs, `collect_full_device_indices`."""


class FailureDumps:
    """Where one core's failure dumps go, and how many it wrote."""

    __slots__ = ("core", "directory", "written", "_capturing")

    def __init__(self, core: CoreState, directory: Path | None) -> None:
        self.core = core
        self.directory = directory
        self.written: list[Path] = []
        self._capturing = False

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """No failure dump while the block runs (a capture running the sanity check on a broken core)."""
        was, self._capturing = self._capturing, True
        try:
            yield
        finally:
            self._capturing = was

    def failed(self, error: BaseException) -> None:
        """Dump the core for `error` (once), and put the dump's path (or why there is none) into its message."""
        if getattr(error, "crash_dump", None) is not None or self._capturing or isinstance(error, NOT_FAILURES):
            return
        directory = self.directory
        if directory is None:
            return
        if len(self.written) >= MAX_DUMPS:
            _name(error, f"crash dump not written: this core already wrote {MAX_DUMPS}")
            return
        self._capturing = True
        try:
            doc = capture_core(self.core, error=error)
            path = write_document(doc, str(directory) + "/", option="crash dump")
        except (OutputPathError, OutputWriteError) as exc:
            _name(error, f"crash dump not written: {exc}")
            return
        finally:
            self._capturing = False
        self.written.append(path)
        _name(error, f"crash dump: {path}")
        print(f"unicache: crash dump of tree core 'unicache' written to {path} "
              f"({type(error).__name__}; open it with unicache repl --dump)", file=sys.stderr, flush=True)


class DumpedCore(CoreState, Protocol):
    """A core with its failure dumps (what the guarded methods and the live dump reach)."""

    @property
    def failure_dumps(self) -> FailureDumps: ...


def _name(error: BaseException, text: str) -> None:
    """Say `text` in `error`'s message (its first argument, when a string) and as a note; mark it dumped."""
    args = error.args
    if args and isinstance(args[0], str):
        error.args = (f"{args[0]} [{text}]", *args[1:])
    error.add_note(text)
    setattr(error, "crash_dump", text)


_GUARD = """
def {name}(self, {params}):
    try:
        return fn(self, {args})
    except FAILURES as exc:
        self.failure_dumps.failed(exc)
        raise
"""


def _guard(fn: Callable[Concatenate[DumpedCore, P], R]) -> Callable[Concatenate[DumpedCore, P], R]:
    """`fn` inside ``try``: a wrapper with `fn`'s own parameters (generated from its signature).

    A ``*args, **kwargs`` wrapper costs about 0.27 us a call, one with the
    method's parameters about 0.04 us; only plain and keyword-only parameters
    occur in the guarded methods (anything else is refused here).
    """
    params: list[str] = []
    args: list[str] = []
    namespace: dict[str, object] = {"fn": fn, "FAILURES": FAILURES}
    star = False
    for i, (name, p) in enumerate(list(inspect.signature(fn).parameters.items())[1:]):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"dumps_on_failure: cannot guard {fn.__qualname__}: parameter {name} is {p.kind}")
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        default = ""
        if p.default is not p.empty:
            namespace[f"_default{i}"] = p.default
            default = f"=_default{i}"
        params.append(name + default)
        args.append(f"{name}={name}" if p.kind is p.KEYWORD_ONLY else name)
    exec(_GUARD.format(name=fn.__name__, params=", ".join(params), args=", ".join(args)), namespace)
    guarded = namespace[fn.__name__]
    assert callable(guarded)
    functools.update_wrapper(guarded, fn)
    return cast("Callable[Concatenate[DumpedCore, P], R]", guarded)


def dumps_on_failure(cls: T) -> T:
    """Class decorator: wrap `GUARDED` methods of the tree core `cls` (see the module docstring)."""
    for name in GUARDED:
        setattr(cls, name, _guard(getattr(cls, name)))
    return cls

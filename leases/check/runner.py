"""One mypy build through its build API, then the ownership pass over the typed trees.

mypy's diagnostics stream out unchanged while it builds; the ownership
diagnostics follow, formatted by mypy's own formatter (so `--show-column-numbers`,
`--hide-error-codes`, `-O json` and colours apply), then one summary line
counting both.

Incremental mode: leasecheck keeps its own mypy cache (`<cache-dir>/leasecheck`)
because its plugin changes type metadata. Modules mypy re-checks are analysed
from their trees; modules mypy finds fresh have no tree, so their findings
come from `leasecheck.json` beside the cache, keyed by the source hash and the
interface hashes of their dependencies (exactly what makes mypy call them
fresh). A module without a valid entry is re-checked by passing its text,
which makes mypy skip its cache. With no findings file at all (a cold cache)
the first build keeps no trees (keeping every typeshed and dependency tree
costs memory and time) and a second build re-checks just the analysed modules
against the cache the first one wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

from mypy import build, util
from mypy.build import BuildResult, State
from mypy.cache import ErrorTuple
from mypy.errors import CompileError
from mypy.find_sources import InvalidSourceList
from mypy.main import process_options, show_messages
from mypy.modulefinder import BuildSource
from mypy.modules_state import modules_state
from mypy.options import Options

from leases.check import codes
from leases.check.flow import check_tree
from leases.check.plugin import OwnershipPlugin
from leases.check.report import Diagnostic, apply_ignores, find_ignores

CACHE_SUBDIR: Final = "leasecheck"
FINDINGS_FILE: Final = "leasecheck.json"


def analysis_version(exits_at: frozenset[str] = frozenset()) -> str:
    """A digest of the analysis code, its settings and mypy's version: findings depend on all."""
    import mypy.version

    digest = hashlib.sha256(mypy.version.__version__.encode())
    digest.update(",".join(sorted(exits_at)).encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(slots=True)
class Outcome:
    """Everything one run produced, for the CLI and for tests."""

    mypy_messages: list[str] = field(default_factory=list)
    findings: dict[str, list[Diagnostic]] = field(default_factory=dict)
    lease_messages: list[str] = field(default_factory=list)
    partial: dict[str, list[Diagnostic]] = field(default_factory=dict)
    """Per file: what was analysed partially or on the code's word (escapes, suppressions, ...)."""
    partial_messages: list[str] = field(default_factory=list)
    blockers: bool = False
    builds: int = 0
    analysed: int = 0
    from_cache: int = 0

    @property
    def exit_code(self) -> int:
        if self.blockers:
            return 2
        messages = self.mypy_messages + self.lease_messages
        _, n_notes, _ = util.count_stats(messages)
        return 1 if messages and n_notes < len(messages) else 0


def prepare_options(options: Options) -> None:
    """The settings the ownership pass needs from the build (see leasecheck-notes pitfalls)."""
    options.preserve_asts = True
    options.export_types = True
    options.num_workers = 0
    if options.cache_dir != os.devnull and os.path.basename(options.cache_dir) != CACHE_SUBDIR:
        options.cache_dir = os.path.join(options.cache_dir, CACHE_SUBDIR)


def _findings_path(options: Options) -> str | None:
    if not options.incremental or options.cache_dir == os.devnull:
        return None
    version = "{}.{}".format(*options.python_version)
    return os.path.join(options.cache_dir, version, FINDINGS_FILE)


class FindingsCache:
    """Per-module ownership findings of the last run that analysed the module."""

    def __init__(self, path: str | None, version: str) -> None:
        self.path = path
        self.version = version
        self.entries: dict[str, dict[str, object]] = {}
        self.dirty = False
        self.loaded = False
        if path is None:
            return
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("version") == version:
            entries = data.get("modules")
            if isinstance(entries, dict):
                self.entries = entries
                self.loaded = True

    def get(self, module: str, key: str) -> list[Diagnostic] | None:
        entry = self.entries.get(module)
        if entry is None or entry.get("key") != key:
            return None
        raw = entry.get("findings")
        if not isinstance(raw, list):
            return None
        return [Diagnostic(int(d[0]), int(d[1]), str(d[2]), str(d[3])) for d in raw]

    def has(self, module: str) -> bool:
        return module in self.entries

    def put(self, module: str, key: str, findings: list[Diagnostic]) -> None:
        self.entries[module] = {
            "key": key,
            "findings": [[d.line, d.column, d.code, d.message] for d in findings],
        }
        self.dirty = True

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"version": self.version, "modules": self.entries}, f)
        os.replace(tmp, self.path)


def module_key(state: State, graph: dict[str, State]) -> str:
    """What makes a module's findings reusable: its source and its dependencies' interfaces."""
    source_hash = state.source_hash or state.meta_source_hash or (
        state.meta.hash if state.meta is not None else ""
    )
    digest = hashlib.sha256(source_hash.encode())
    for dep in sorted(state.dependencies):
        dep_state = graph.get(dep)
        digest.update(dep.encode())
        digest.update(dep_state.interface_hash if dep_state is not None else b"-")
    return digest.hexdigest()


def _wanted(state: State) -> bool:
    """Modules whose errors mypy reports: `.py` files, not silenced, not installed packages."""
    return (
        not state.ignore_all
        and state.path is not None
        and state.path.endswith(".py")
        and not state.options.ignore_errors
    )


def _source_text(state: State) -> str:
    if state.source is not None:
        return state.source
    assert state.path is not None
    try:
        with open(state.path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return ""


def _with_text(source: BuildSource) -> BuildSource:
    if source.text is not None or source.path is None:
        return source
    try:
        with open(source.path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return source  # mypy reports it the way it always does
    return BuildSource(source.path, source.module, text, source.base_dir, source.followed)


def _finalize(diags: list[Diagnostic], state: State, text: str) -> list[Diagnostic]:
    """Findings after disabled codes and `# lease: ignore`, then the partial notes.

    Each finding a `# lease: ignore` drops becomes a note too: a suppression
    is an escape, and `--partial` lists it.
    """
    notes = [d for d in diags if d.code == codes.PARTIAL]
    diags = [d for d in diags if d.code != codes.PARTIAL]
    disabled = {c.code for c in state.options.disabled_error_codes}
    if disabled:
        diags = [d for d in diags if d.code not in disabled]
    kept = apply_ignores(diags, find_ignores(text), warn_unused=state.options.warn_unused_ignores)
    remaining = set(kept)
    for d in diags:
        if d not in remaining:
            notes.append(Diagnostic(d.line, d.column, codes.PARTIAL,
                                    f"suppressed: [{d.code}] {d.message}"))
    notes.sort(key=lambda d: (d.line, d.column))
    return kept + notes


def run_check(
    sources: list[BuildSource],
    options: Options,
    *,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
    echo: bool = True,
    exits_at: frozenset[str] = frozenset(),
    show_partial: bool = False,
) -> Outcome:
    """Build once, print mypy's messages as they come (if `echo`), analyse, format findings.

    `exits_at` may name "await" and "yield": suspension points where the
    function can be left by cancellation or generator close (see `--lease-exits`).
    `show_partial` also prints the partial notes and their count (`--partial`).
    """
    prepare_options(options)
    formatter = util.FancyFormatter(stdout, stderr, options.hide_error_codes,
                                    hide_success=bool(options.output))
    outcome = Outcome()
    cache = FindingsCache(_findings_path(options), analysis_version(exits_at))
    if cache.path is not None and not cache.loaded and any(s.text is None for s in sources):
        # Nothing reusable yet: let mypy build (and cache) the world without keeping
        # trees and types, then re-check only the analysed modules from that cache.
        options.preserve_asts = options.export_types = False
    elif cache.path is not None:
        sources = [s if cache.has(s.module) else _with_text(s) for s in sources]

    def flush(filename: str | None, new_messages: list[str], serious: bool) -> None:
        if options.pretty:
            new_messages = formatter.fit_in_terminal(new_messages)
        outcome.mypy_messages.extend(new_messages)
        if echo:
            show_messages(new_messages, stderr if serious else stdout, formatter, options)

    result = _build(sources, options, flush, stdout, stderr, outcome)
    if result is None:
        return outcome
    results: dict[str, list[Diagnostic]] = {}
    missing = _analyse(result, cache, results, outcome, exits_at)
    if missing:
        forced = [_with_text(s) if s.module in missing else s for s in sources]
        known = {s.module for s in forced}
        forced += [
            _with_text(BuildSource(result.graph[m].path, m, None))
            for m in sorted(missing - known)
            if result.graph[m].path is not None
        ]
        quiet = Outcome()
        options.preserve_asts = options.export_types = True
        second = _build(forced, options, lambda *_: None, stdout, stderr, quiet)
        outcome.builds += quiet.builds
        if second is None:
            outcome.blockers = True
            return outcome
        still = _analyse(second, cache, results, outcome, exits_at, only=missing)
        for module_id in sorted(still):
            stderr.write(f"leasecheck: internal error: no typed tree for {module_id}; "
                         f"its ownership was not checked\n")
            outcome.blockers = True
        result = second
    cache.save()
    errors = result.manager.errors
    for path in sorted(results):
        display = errors.simplify_path(path)
        notes = [d for d in results[path] if d.code == codes.PARTIAL]
        diags = [d for d in results[path] if d.code != codes.PARTIAL]
        if notes:
            outcome.partial[display] = notes
            note_tuples: list[ErrorTuple] = [
                (display, d.line, d.column, -1, -1, "note", d.message, None) for d in notes
            ]
            outcome.partial_messages.extend(errors.format_messages(
                display, note_tuples, formatter=result.manager.error_formatter))
        if not diags:
            continue
        outcome.findings[display] = diags
        tuples: list[ErrorTuple] = [
            (display, d.line, d.column, -1, -1, "error", d.message, d.code) for d in diags
        ]
        outcome.lease_messages.extend(
            errors.format_messages(display, tuples, formatter=result.manager.error_formatter)
        )
    if echo and outcome.lease_messages:
        show_messages(outcome.lease_messages, stdout, formatter, options)
    if echo and show_partial:
        show_messages(outcome.partial_messages, stdout, formatter, options)
        stdout.write(partial_summary(outcome) + "\n")
    _forget_build()
    return outcome


PARTIAL_KINDS: Final = (
    ("escape:", "untracked() escapes"),
    ("suppressed:", "suppressed findings"),
    ("partial:", "partially analysed loops"),
    ("unchecked:", "functions not analysed"),
    ("skipped:", "blocks mypy found unreachable"),
)


def partial_summary(outcome: Outcome) -> str:
    """One line counting the partial notes by kind."""
    notes = [d.message for ds in outcome.partial.values() for d in ds]
    parts = [f"{sum(1 for m in notes if m.startswith(prefix))} {what}"
             for prefix, what in PARTIAL_KINDS]
    return f"leasecheck: {len(notes)} partial or escaped analyses ({', '.join(parts)})"


def _forget_build() -> None:
    """Drop mypy's module-global reference to the last build, so its trees can be freed."""
    modules_state.modules = {}
    modules_state.node_fixer = None


def _build(
    sources: list[BuildSource],
    options: Options,
    flush: Callable[[str | None, list[str], bool], None],
    stdout: TextIO,
    stderr: TextIO,
    outcome: Outcome,
) -> BuildResult | None:
    outcome.builds += 1
    try:
        result = build.build(sources, options, None, flush, None, stdout, stderr,
                             extra_plugins=[OwnershipPlugin(options)])
    except CompileError:
        outcome.blockers = True
        return None
    result.manager.metastore.close()
    return result


def _analyse(
    result: BuildResult,
    cache: FindingsCache,
    results: dict[str, list[Diagnostic]],
    outcome: Outcome,
    exits_at: frozenset[str],
    only: set[str] | None = None,
) -> set[str]:
    """Analyse re-checked modules, reuse cached findings for fresh ones; return the rest."""
    graph = result.graph
    rechecked = result.manager.rechecked_modules
    missing: set[str] = set()
    for module_id, state in graph.items():
        if only is not None and module_id not in only:
            continue
        if not _wanted(state):
            continue
        assert state.path is not None
        key = module_key(state, graph)
        tree = state.tree
        kept = result.manager.options.preserve_asts
        if kept and module_id in rechecked and tree is not None and not tree.is_cache_skeleton:
            text = _source_text(state)
            diags = _finalize(check_tree(tree, result.types, exits_at, text), state, text)
            cache.put(module_id, key, diags)
            results[state.xpath] = diags
            outcome.analysed += 1
            continue
        cached = cache.get(module_id, key) if cache.path is not None else None
        if cached is None:
            missing.add(module_id)
            continue
        results[state.xpath] = cached
        outcome.from_cache += 1
    return missing


def summary(outcome: Outcome, options: Options, n_sources: int, stdout: TextIO,
            stderr: TextIO) -> None:
    """mypy's closing line, counting ownership findings as errors."""
    if not options.error_summary:
        return
    formatter = util.FancyFormatter(stdout, stderr, options.hide_error_codes,
                                    hide_success=bool(options.output))
    messages = outcome.mypy_messages + outcome.lease_messages
    n_errors, n_notes, n_files = util.count_stats(messages)
    if n_errors:
        line = formatter.format_error(n_errors, n_files, n_sources, blockers=outcome.blockers,
                                      use_color=options.color_output)
        stdout.write(line + "\n")
    elif not messages or n_notes == len(messages):
        stdout.write(formatter.format_success(n_sources, options.color_output) + "\n")
    stdout.flush()


def usage_problem(options: Options) -> str | None:
    """The option combinations mypy's own `main` rejects before building."""
    if options.allow_redefinition and not options.local_partial_types:
        return "error: --local-partial-types must be enabled if using --allow-redefinition"
    if options.allow_redefinition and options.allow_redefinition_old:
        return "--allow-redefinition-old and --allow-redefinition should not be used together"
    if options.install_types:
        return "error: --install-types is not supported by leasecheck; run mypy --install-types"
    return None


EXIT_POINTS: Final = frozenset({"await", "yield"})
PARTIAL_FLAG: Final = "--partial"


def split_lease_options(argv: Sequence[str]) -> tuple[list[str], frozenset[str], str | None]:
    """Take leasecheck's own `--lease-exits=await,yield` out of mypy's arguments."""
    rest: list[str] = []
    exits: set[str] = set()
    for arg in argv:
        if arg == PARTIAL_FLAG:
            continue
        if not arg.startswith("--lease-exits="):
            rest.append(arg)
            continue
        names = {n.strip() for n in arg.split("=", 1)[1].split(",") if n.strip()}
        unknown = names - EXIT_POINTS
        if unknown:
            return rest, frozenset(), (f"--lease-exits: unknown {', '.join(sorted(unknown))} "
                                       f"(choose from await, yield)")
        exits |= names
    return rest, frozenset(exits), None


def main_run(argv: Sequence[str], stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    """The whole command: parse mypy options, check, print, return the exit status."""
    assert codes.ALL_CODES
    sys.setrecursionlimit(2**14)
    argv_in = list(argv)
    argv, exits_at, bad = split_lease_options(argv)
    if bad is not None:
        stderr.write(f"leasecheck: {bad}\n")
        return 2
    try:
        sources, options = process_options(
            list(argv), stdout=stdout, stderr=stderr, program="leasecheck"
        )
    except InvalidSourceList as err:
        stderr.write(f"leasecheck: {err}\n")
        return 2
    problem = usage_problem(options)
    if problem is not None:
        stderr.write(problem + "\n")
        return 2
    outcome = run_check(sources, options, stdout=stdout, stderr=stderr, exits_at=exits_at,
                        show_partial=PARTIAL_FLAG in argv_in)
    summary(outcome, options, len(sources), stdout, stderr)
    return outcome.exit_code

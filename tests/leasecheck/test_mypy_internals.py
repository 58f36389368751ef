"""The mypy internals leasecheck relies on, checked one by one.

mypy is pinned exactly (pyproject.toml), but an upgrade must fail here,
naming what moved, before it can silently change what the checker sees:
everything but `mypy.api` is internal (leasecheck-notes, pitfall 9).
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import mypy.argmap
import mypy.build
import mypy.errorcodes
import mypy.main
import mypy.modules_state
import mypy.nodes
import mypy.patterns
import mypy.plugin
import mypy.types
import mypy.util
import mypy.version
from mypy.nodes import CallExpr, Decorator, FuncDef, MypyFile, TypeInfo
from mypy.options import Options
from mypy.types import CallableType, TypeAliasType, get_proper_type

from leases.check.codes import CODE_NAMES
from leases.check.model import BORROWED, CONSUMES_DECORATOR, LEASE, LINEAR_DECORATOR, META_KEY
from leases.check.walk import CHILDREN, LEAVES, NOT_IN_TREES
from tests.leasecheck.conftest import build_modules

PINNED = "2.4.1"

NODE_ATTRIBUTES: dict[type, tuple[str, ...]] = {
    mypy.nodes.NameExpr: ("name", "node", "kind", "is_new_def"),
    mypy.nodes.MemberExpr: ("expr", "name", "node"),
    mypy.nodes.CallExpr: ("callee", "args", "arg_kinds", "arg_names"),
    mypy.nodes.FuncDef: ("arguments", "body", "type", "info", "is_static", "is_trivial_body",
                         "expanded", "end_line"),
    mypy.nodes.LambdaExpr: ("arguments", "body", "type", "expanded"),
    mypy.nodes.Argument: ("variable", "kind", "line"),
    mypy.nodes.Var: ("name", "type", "is_self", "is_cls", "is_classvar", "is_property", "line"),
    mypy.nodes.Decorator: ("func", "var", "original_decorators"),
    mypy.nodes.OverloadedFuncDef: ("items", "impl"),
    mypy.nodes.Block: ("body", "is_unreachable"),
    mypy.nodes.MypyFile: ("defs", "is_stub", "is_cache_skeleton"),
    mypy.nodes.TypeInfo: ("metadata", "mro", "defn", "module_name", "names", "is_enum",
                          "enum_members"),
    mypy.nodes.AssignmentStmt: ("lvalues", "rvalue", "is_alias_def"),
    mypy.nodes.IfStmt: ("expr", "body", "else_body"),
    mypy.nodes.TryStmt: ("body", "types", "vars", "handlers", "else_body", "finally_body"),
    mypy.nodes.WithStmt: ("expr", "target", "body", "is_async"),
    mypy.nodes.ForStmt: ("index", "expr", "body", "else_body"),
    mypy.nodes.WhileStmt: ("expr", "body", "else_body"),
    mypy.nodes.MatchStmt: ("subject", "patterns", "guards", "bodies"),
    mypy.nodes.GeneratorExpr: ("left_expr", "sequences", "condlists", "indices"),
    mypy.nodes.DictionaryComprehension: ("key", "value", "sequences", "condlists", "indices"),
    mypy.nodes.ComparisonExpr: ("operators", "operands"),
    mypy.patterns.AsPattern: ("pattern", "name"),
    mypy.patterns.SingletonPattern: ("value",),
    mypy.patterns.ClassPattern: ("class_ref",),
    mypy.patterns.ValuePattern: ("expr",),
    mypy.patterns.OrPattern: ("patterns",),
}

TYPEINFO_METHODS = ("get", "get_method", "has_base")
STATE_ATTRIBUTES = ("tree", "path", "xpath", "source", "source_hash", "meta_source_hash",
                    "meta", "dependencies", "interface_hash", "ignore_all", "options")
OPTIONS_FIELDS = ("preserve_asts", "export_types", "num_workers", "cache_dir", "incremental",
                  "python_version", "disabled_error_codes", "warn_unused_ignores",
                  "error_summary", "hide_error_codes", "pretty", "output", "color_output",
                  "allow_redefinition", "allow_redefinition_old", "local_partial_types",
                  "install_types", "ignore_errors")


def _attrs(cls: type) -> set[str]:
    names = set(getattr(cls, "__mypyc_attrs__", ()))
    for klass in cls.__mro__:
        names.update(vars(klass))
    return names


def test_mypy_is_the_pinned_version() -> None:
    assert mypy.version.__version__ == PINNED, (
        f"mypy {mypy.version.__version__} is installed; leasecheck was verified against "
        f"{PINNED}. Re-run this module and the golden corpus, then move the pin."
    )


def test_build_api_signatures() -> None:
    build_params = inspect.signature(mypy.build.build).parameters
    for name in ("sources", "options", "alt_lib_path", "flush_errors", "fscache", "stdout",
                 "stderr", "extra_plugins"):
        assert name in build_params, f"mypy.build.build lost parameter {name!r}"
    process = inspect.signature(mypy.main.process_options).parameters
    for name in ("args", "stdout", "stderr", "require_targets", "fscache", "program", "header"):
        assert name in process, f"mypy.main.process_options lost parameter {name!r}"
    argmap = list(inspect.signature(mypy.argmap.map_actuals_to_formals).parameters)
    assert argmap == ["actual_kinds", "actual_names", "formal_kinds", "formal_names",
                      "actual_arg_type"], f"mypy.argmap.map_actuals_to_formals is now {argmap}"
    for name in ("show_messages",):
        assert hasattr(mypy.main, name), f"mypy.main.{name} is gone"
    for name in ("FancyFormatter", "count_stats"):
        assert hasattr(mypy.util, name), f"mypy.util.{name} is gone"
    for method in ("fit_in_terminal", "format_error", "format_success", "colorize"):
        assert hasattr(mypy.util.FancyFormatter, method), f"FancyFormatter.{method} is gone"
    state = mypy.modules_state.modules_state
    assert hasattr(state, "modules") and hasattr(state, "node_fixer"), (
        "mypy.modules_state.modules_state no longer holds modules/node_fixer"
    )


def test_options_fields() -> None:
    options = Options()
    for name in OPTIONS_FIELDS:
        assert hasattr(options, name), f"mypy Options.{name} is gone"


def test_node_attributes() -> None:
    for cls, names in NODE_ATTRIBUTES.items():
        have = _attrs(cls)
        for name in names:
            assert name in have, f"mypy {cls.__module__}.{cls.__name__}.{name} is gone"
    for name in TYPEINFO_METHODS:
        assert hasattr(TypeInfo, name), f"mypy TypeInfo.{name} is gone"
    assert hasattr(TypeAliasType, "_expand_once"), "mypy TypeAliasType._expand_once is gone"
    for name in ("get_class_decorator_hook_2", "report_config_data"):
        assert hasattr(mypy.plugin.Plugin, name), f"mypy Plugin.{name} is gone"


def test_walk_table_knows_every_node_class() -> None:
    for module in (mypy.nodes, mypy.patterns):
        for name, cls in vars(module).items():
            if not (inspect.isclass(cls) and issubclass(cls, mypy.nodes.Node)):
                continue
            if cls.__module__ != module.__name__:
                continue
            assert name in CHILDREN or name in LEAVES or name in NOT_IN_TREES, (
                f"mypy node class {module.__name__}.{name} is new: tell leases/check/walk.py "
                f"which of its attributes hold child nodes"
            )
    for name, attrs in CHILDREN.items():
        cls = getattr(mypy.nodes, name, None) or getattr(mypy.patterns, name)
        have = _attrs(cls)
        for attr in attrs:
            assert attr in have, f"mypy {name}.{attr} (a child attribute in walk.py) is gone"


def test_error_codes_are_registered_with_mypy() -> None:
    for code in CODE_NAMES:
        assert code in mypy.errorcodes.error_codes, f"{code} is not in mypy.errorcodes.error_codes"


def test_runtime_names_the_checker_matches_exist() -> None:
    import leases

    linear, consumes = leases.linear, leases.consumes
    assert f"{leases.Lease.__module__}.Lease" == LEASE
    assert f"{linear.__module__}.{linear.__name__}" == LINEAR_DECORATOR
    assert f"{consumes.__module__}.{consumes.__name__}" == CONSUMES_DECORATOR
    borrow = importlib.import_module("leases.borrow")
    assert f"{borrow.__name__}.Borrowed" == BORROWED and hasattr(borrow, "Borrowed")
    lease_module = importlib.import_module(leases.Lease.__module__)
    assert lease_module.__file__ is not None
    source = Path(lease_module.__file__).read_text()
    assert "@consumes\n" in source.split("def release(")[0][-120:], (
        "Lease.release is no longer decorated @consumes: model.LEASE_CONSUMING is stale"
    )


BEHAVIOUR = '''
from typing import TypeVar

from leases import Held, Lease, LeaseLedger, Released, consumes, linear
from leases.borrow import Borrowed


class Full: ...


S = TypeVar("S", Held, Released)


@linear
class Ticket:
    @consumes
    def settle(self) -> None: ...


def lend(lease: Borrowed[Lease[Full, Held]]) -> None: ...


def generic(lease: Lease[Full, S]) -> int:
    return lease.id


def work(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="x")
    lend(lease)
    lease.release()
'''


def test_build_behaviour_the_analysis_depends_on(mypy_cache: Path) -> None:
    result = build_modules(mypy_cache, {"internals_probe": BEHAVIOUR})
    state = result.graph["internals_probe"]
    for name in STATE_ATTRIBUTES:
        assert hasattr(state, name), f"mypy State.{name} is gone"
    assert "internals_probe" in result.manager.rechecked_modules, (
        "a module passed with text was not in BuildManager.rechecked_modules"
    )
    tree = state.tree
    assert isinstance(tree, MypyFile) and tree.defs, (
        "Options.preserve_asts=True no longer keeps the module tree (State.finish_passes)"
    )
    calls = [e for e in result.types if isinstance(e, CallExpr)]
    assert calls, "Options.export_types=True no longer fills BuildResult.types"
    funcs = {d.name: d for d in tree.defs if isinstance(d, FuncDef)}
    generic = funcs["generic"]
    assert len(generic.expanded) == 2, "FuncDef.expanded no longer holds value-restricted copies"
    assert any(e in result.types for e in _names_in(generic.expanded[0])), (
        "the expanded copies of a value-restricted function are no longer type-checked"
    )
    lend_calls = [
        c for c in calls if isinstance(c.callee, mypy.nodes.NameExpr) and c.callee.name == "lend"
    ]
    callee = get_proper_type(result.types[lend_calls[0].callee])
    assert isinstance(callee, CallableType)
    formal = callee.arg_types[0]
    assert isinstance(formal, TypeAliasType) and formal.alias is not None, (
        "the Borrowed alias no longer survives in the inferred callee type of a call"
    )
    assert formal.alias.fullname == BORROWED
    ticket = next(d for d in tree.defs if isinstance(d, mypy.nodes.ClassDef) and d.name == "Ticket")
    assert ticket.info.metadata.get(META_KEY) == {"linear": True, "consumes": ["settle"]}, (
        "the class decorator hook (Plugin.get_class_decorator_hook_2) did not run for @linear"
    )
    settle = ticket.info.names["settle"].node
    assert isinstance(settle, Decorator)
    assert settle.original_decorators, "Decorator.original_decorators is empty after analysis"


def test_cached_modules_keep_metadata_and_lose_trees(tmp_path: Path) -> None:
    module = tmp_path / "cached_probe.py"
    module.write_text(BEHAVIOUR)
    cache = tmp_path / "cache"
    from mypy.modulefinder import BuildSource

    from leases.check.plugin import OwnershipPlugin
    from leases.check.runner import prepare_options
    from tests.leasecheck.conftest import corpus_options

    results = []
    for _ in range(2):
        options = corpus_options(cache)
        prepare_options(options)
        results.append(mypy.build.build(
            [BuildSource(str(module), "cached_probe", None)], options,
            extra_plugins=[OwnershipPlugin(options)],
        ))
    warm = results[1]
    assert "cached_probe" not in warm.manager.rechecked_modules, (
        "an unchanged module was re-checked: the incremental cache is not being used"
    )
    state = warm.graph["cached_probe"]
    assert state.tree is None or not state.tree.defs, (
        "a module loaded from the cache now has a full tree: leasecheck could analyse it "
        "directly instead of reusing cached findings"
    )
    ticket = state.tree.names["Ticket"].node if state.tree is not None else None
    if isinstance(ticket, TypeInfo):
        assert ticket.metadata.get(META_KEY, {}).get("linear"), (
            "TypeInfo.metadata did not survive the cache round trip"
        )
    forced = corpus_options(cache)
    prepare_options(forced)
    third = mypy.build.build(
        [BuildSource(str(module), "cached_probe", module.read_text())], forced,
        extra_plugins=[OwnershipPlugin(forced)],
    )
    assert "cached_probe" in third.manager.rechecked_modules, (
        "BuildSource(text=...) no longer forces mypy to re-check a cached module"
    )


def _names_in(fn: mypy.nodes.FuncItem) -> list[mypy.nodes.Expression]:
    from leases.check.walk import name_refs

    return list(name_refs(fn.body))

"""The checker's shape: one state object per function, the module pass on its own, rules through a protocol."""

from __future__ import annotations

from pathlib import Path

from mypy.nodes import FuncDef

from leases.check.flow import FunctionChecker
from leases.check.function_state import FunctionState
from leases.check.module import ModuleChecker
from tests.leasecheck.conftest import CASES, SOURCE_SUFFIX, build_modules, case_names

SAMPLE = '''
from leases import Held, Lease, LeaseLedger


class Part:
    pass


def outer(ledger: LeaseLedger) -> None:
    def inner() -> None:
        ledger.acquire(Part, owner="inner").release()

    inner()


class Holder:
    def drop(self, lease: Lease[Part, Held]) -> None:
        lease.release()

# lease: takes-from nothing
'''


def test_module_pass_yields_top_level_then_what_each_body_enqueues(tmp_path: Path) -> None:
    result = build_modules(tmp_path, {"sample": SAMPLE})
    assert not result.errors, result.errors
    tree = result.graph["sample"].tree
    assert tree is not None
    module = ModuleChecker(tree, result.types, text=SAMPLE)
    seen: list[str] = []
    for fn, body, enclosing in module.pending():
        seen.append("<module>" if fn is None else fn.name if isinstance(fn, FuncDef) else "<class body>")
        FunctionChecker(module, fn, body, enclosing).run()
    assert seen[0] == "<module>"
    assert {"outer", "inner", "drop"} <= set(seen)
    assert seen.index("outer") < seen.index("inner")
    findings = module.finish()
    assert [d.code for d in findings] == ["lease-unchecked"]
    assert findings[0].line == SAMPLE.splitlines().index("# lease: takes-from nothing") + 1


def test_every_rule_keeps_its_state_in_the_function_state(tmp_path: Path) -> None:
    """Over the whole golden corpus, a checker's own attributes are its state object and its rules."""
    names = case_names()
    modules = {name: (CASES / (name + SOURCE_SUFFIX)).read_text() for name in names}
    result = build_modules(tmp_path, modules)
    checked = 0
    for name in names:
        tree = result.graph[name].tree
        assert tree is not None
        module = ModuleChecker(tree, result.types, text=modules[name])
        for fn, body, enclosing in module.pending():
            checker = FunctionChecker(module, fn, body, enclosing)
            checker.run()
            assert set(vars(checker)) == {"s", "rules"}, (name, sorted(vars(checker)))
            assert isinstance(checker.s, FunctionState) and checker.rules is checker
            checked += 1
    assert checked > 1000

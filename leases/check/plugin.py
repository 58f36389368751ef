"""The mypy plugin half of leasecheck: record `@linear` and `@consumes` in type metadata.

A module loaded from mypy's incremental cache has symbol tables but no
decorator lists, so linearity must live where the cache keeps it:
`TypeInfo.metadata`, which is serialized and part of the module's interface
hash. Changing `@linear`/`@consumes` on a class therefore re-checks every
module that uses it. `report_config_data` stamps each module with the plugin
version so a cache written without this plugin is never trusted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from mypy.nodes import Decorator, RefExpr, Statement
from mypy.options import Options
from mypy.plugin import ClassDefContext, Plugin, ReportConfigContext

from leases.check.model import CONSUMES_DECORATOR, LINEAR_DECORATOR, META_KEY


def plugin_version() -> str:
    """A digest of the code that decides what the metadata says."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in ("plugin.py", "model.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def _consuming_names(body: list[Statement]) -> list[str]:
    names = []
    for stmt in body:
        if isinstance(stmt, Decorator) and any(
            isinstance(dec, RefExpr) and dec.fullname == CONSUMES_DECORATOR
            for dec in stmt.original_decorators
        ):
            names.append(stmt.func.name)
    return names


def _mark_linear(ctx: ClassDefContext) -> bool:
    info = ctx.cls.info
    consumes = _consuming_names(ctx.cls.defs.body)
    for base in info.mro[1:]:
        if base.defn.defs.body:
            consumes.extend(_consuming_names(base.defn.defs.body))
    info.metadata[META_KEY] = {"linear": True, "consumes": sorted(set(consumes))}
    return True


class OwnershipPlugin(Plugin):
    """Marks `@linear` classes and their `@consumes` methods for the flow analysis."""

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._stamp = {"leasecheck": plugin_version()}

    def get_class_decorator_hook_2(
        self, fullname: str
    ) -> Callable[[ClassDefContext], bool] | None:
        return _mark_linear if fullname == LINEAR_DECORATOR else None

    def report_config_data(self, ctx: ReportConfigContext) -> dict[str, str]:
        return self._stamp

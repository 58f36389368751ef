"""Child iteration over mypy AST nodes without `TraverserVisitor`.

Compiled mypy refuses interpreted subclasses of its visitor traits (mypy
#16497), so the checker walks nodes through an explicit table of the
attributes that hold child nodes. `tests/leasecheck/test_mypy_internals.py`
fails if a mypy upgrade adds a node class this table does not know or
renames one of these attributes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mypy.nodes import Expression, FuncItem, ListExpr, NameExpr, Node, TupleExpr

CHILDREN: Final[dict[str, tuple[str, ...]]] = {
    "Argument": ("initializer",),
    "AssertStmt": ("expr", "msg"),
    "AssertTypeExpr": ("expr",),
    "AssignmentExpr": ("target", "value"),
    "AssignmentStmt": ("lvalues", "rvalue"),
    "AwaitExpr": ("expr",),
    "Block": ("body",),
    "CallExpr": ("callee", "args"),
    "CastExpr": ("expr",),
    "ClassDef": ("decorators", "defs"),
    "ComparisonExpr": ("operands",),
    "ConditionalExpr": ("cond", "if_expr", "else_expr"),
    "Decorator": ("original_decorators", "func"),
    "DelStmt": ("expr",),
    "DictExpr": ("items",),
    "DictionaryComprehension": ("indices", "sequences", "condlists", "key", "value"),
    "ExpressionStmt": ("expr",),
    "ForStmt": ("index", "expr", "body", "else_body"),
    "FuncDef": ("arguments", "body"),
    "GeneratorExpr": ("indices", "sequences", "condlists", "left_expr"),
    "IfStmt": ("expr", "body", "else_body"),
    "IndexExpr": ("base", "index"),
    "LambdaExpr": ("arguments", "body"),
    "ListComprehension": ("generator",),
    "ListExpr": ("items",),
    "MatchStmt": ("subject", "patterns", "guards", "bodies"),
    "MemberExpr": ("expr",),
    "MypyFile": ("defs",),
    "OpExpr": ("left", "right"),
    "OperatorAssignmentStmt": ("lvalue", "rvalue"),
    "OverloadedFuncDef": ("items", "impl"),
    "RaiseStmt": ("expr", "from_expr"),
    "ReturnStmt": ("expr",),
    "RevealExpr": ("expr",),
    "SetComprehension": ("generator",),
    "SetExpr": ("items",),
    "SliceExpr": ("begin_index", "end_index", "stride"),
    "StarExpr": ("expr",),
    "SuperExpr": ("call",),
    "TemplateStrExpr": ("items",),
    "TryStmt": ("body", "types", "vars", "handlers", "else_body", "finally_body"),
    "TupleExpr": ("items",),
    "TypeApplication": ("expr",),
    "UnaryExpr": ("expr",),
    "WhileStmt": ("expr", "body", "else_body"),
    "WithStmt": ("expr", "target", "body"),
    "YieldExpr": ("expr",),
    "YieldFromExpr": ("expr",),
    "AsPattern": ("pattern", "name"),
    "ClassPattern": ("class_ref", "positionals", "keyword_values"),
    "MappingPattern": ("keys", "values", "rest"),
    "OrPattern": ("patterns",),
    "SequencePattern": ("patterns",),
    "StarredPattern": ("capture",),
    "ValuePattern": ("expr",),
}
"""Node class name -> the attributes that hold its child nodes, in evaluation order."""

LEAVES: Final = frozenset(
    {
        "BreakStmt", "BytesExpr", "ComplexExpr", "ContinueStmt", "EllipsisExpr",
        "EnumCallExpr", "FloatExpr", "GlobalDecl", "Import", "ImportAll", "ImportFrom",
        "IntExpr", "NameExpr", "NamedTupleExpr", "NewTypeExpr", "NonlocalDecl",
        "ParamSpecExpr", "PassStmt", "PromoteExpr", "SingletonPattern", "StrExpr",
        "TempNode", "TypeAliasExpr", "TypeAliasStmt", "TypeFormExpr", "TypeVarExpr",
        "TypeVarTupleExpr", "TypedDictExpr",
    }
)
"""Node classes with no child node the checker needs to see."""

NOT_IN_TREES: Final = frozenset(
    {
        "Expression", "FakeExpression", "FakeInfo", "FuncBase", "FuncItem", "ImportBase",
        "Lvalue", "Node", "Pattern", "PlaceholderNode", "RefExpr", "Statement",
        "SymbolNode", "TypeAlias", "TypeInfo", "TypeVarLikeExpr", "Var",
    }
)
"""Abstract bases and symbol-table nodes: never met while walking statements."""


def _flatten(value: object) -> Iterator[Node]:
    if isinstance(value, Node):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _flatten(item)


def children(node: Node) -> Iterator[Node]:
    """The direct child nodes of `node`, in source order."""
    attrs = CHILDREN.get(type(node).__name__)
    if attrs is None:
        return
    for attr in attrs:
        yield from _flatten(getattr(node, attr))


def name_refs(node: Node, *, into_functions: bool = True) -> Iterator[NameExpr]:
    """Every `NameExpr` below `node` (optionally not descending into nested functions)."""
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, NameExpr):
            yield current
            continue
        if not into_functions and isinstance(current, FuncItem):
            continue
        stack.extend(children(current))


def target_names(target: Expression) -> list[NameExpr]:
    """The names a `for` (or comprehension) target binds (`x`, or each name of `a, (b, c)`)."""
    if isinstance(target, NameExpr):
        return [target]
    if isinstance(target, (TupleExpr, ListExpr)):
        return [name for item in target.items for name in target_names(item)]
    return []

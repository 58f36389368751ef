"""One typed JSON decoder for the dump records, driven by their dataclass fields and type hints.

:func:`decode` reads a JSON object into a frozen dataclass derived from
:class:`Record`: the field names are the JSON keys (unknown keys are refused),
each value is checked against the field's type hint (``int`` never accepts a
bool, ``float`` must be finite, ``X | None``, ``tuple[T, ...]`` from a list,
``dict[str, T]`` from an object, nested records). Field metadata narrows a
value: ``raw`` (a free-form ``JSONObject`` section, kept as it is but bounded
in depth and free of non-finite numbers),
``minimum`` (ints, and the ints of a tuple), ``choices`` with a ``label``
(strings), ``keys`` (the allowed keys of a map). After the fields, the
record's :meth:`Record.validate` checks what spans several fields. Every
error is a :class:`DumpFormatError` naming the JSON path of the bad value.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeAlias, TypeVar, Union, get_args, get_origin, get_type_hints

from unicache.dump.errors import DumpFormatError

JSON: TypeAlias = Union[dict[str, "JSON"], list["JSON"], str, int, float, bool, None]
JSONObject: TypeAlias = dict[str, JSON]

MAX_INT = (1 << 63) - 1
"""Largest magnitude an int field may have (ids, sizes and counters are int64 in the cache)."""
MAX_DEPTH = 32
"""Deepest nesting accepted inside a free-form section (producer, config, extra, error ids)."""

_R = TypeVar("_R", bound="Record")
_NONE = type(None)


def type_name(value: object) -> str:
    """How a JSON value is named in errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an int"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def at(where: str, key: str) -> str:
    """The JSON path of ``key`` inside the object at ``where``."""
    return f"{where}.{key}" if where else key


@dataclass(frozen=True, slots=True)
class Record:
    """Base of the dump records: field names are the JSON keys, in order."""

    def validate(self, where: str) -> None:
        """Checks across fields (the fields' own types and ranges are already checked)."""

    def to_json(self) -> JSONObject:
        return {f.name: to_json(getattr(self, f.name)) for f in fields(self)}


def to_json(value: object) -> JSON:
    """A record field as JSON: records by their `to_json`, tuples as lists, maps copied."""
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    assert value is None or isinstance(value, (str, int, float))
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type[Record]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        namespace = {**globals(), **vars(sys.modules[cls.__module__])}
        hints = _HINTS[cls] = get_type_hints(cls, globalns=namespace)
    return hints


def decode(cls: type[_R], data: object, where: str) -> _R:
    """Read the JSON object ``data`` (found at ``where``) into a ``cls`` record."""
    if not isinstance(data, dict):
        raise DumpFormatError(where or "<document>", f"expected an object, got {type_name(data)}")
    hints = _hints(cls)
    names = [f.name for f in fields(cls)]
    extra = sorted(set(data) - set(names))
    if extra:
        raise DumpFormatError(at(where, extra[0]), "unknown field")
    values: dict[str, object] = {}
    for f in fields(cls):
        path = at(where, f.name)
        if f.name not in data:
            raise DumpFormatError(path, "missing")
        values[f.name] = _value(hints[f.name], data[f.name], path, f.metadata)
    record = cls(**values)
    record.validate(where)
    return record


def expected(tp: object) -> str:
    """How a type is named in errors ("an int", "a list of ints", "an int or null", ...)."""
    if tp is int:
        return "an int"
    if tp is str:
        return "a string"
    if tp is bool:
        return "a bool"
    if tp is float:
        return "a number"
    if tp is _NONE:
        return "null"
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(expected(a) for a in get_args(tp))
    if origin is tuple:
        item = get_args(tp)[0]
        return "a list of " + (_plural(item) if get_origin(item) not in (Union, types.UnionType) else "values")
    return "an object"


_PLURALS: dict[object, str] = {int: "ints", str: "strings", bool: "bools", float: "numbers"}


def _plural(tp: object) -> str:
    return _PLURALS.get(tp, "objects")


def _kind_matches(tp: object, value: object) -> bool:
    """Whether a union member ``tp`` is the one a JSON value of this kind must be."""
    origin = get_origin(tp)
    if tp is int:
        return is_int(value)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp is bool:
        return isinstance(value, bool)
    if origin is tuple:
        return isinstance(value, list)
    return isinstance(value, dict)


def _value(tp: Any, value: object, where: str, meta: Mapping[str, Any]) -> object:
    if tp is int:
        return check_int(value, where, meta.get("minimum"))
    if tp is str:
        if not isinstance(value, str):
            raise DumpFormatError(where, f"expected a string, got {type_name(value)}")
        choices = meta.get("choices")
        if choices is not None and value not in choices:
            raise DumpFormatError(where, f"unknown {meta.get('label', 'value')} {value!r} "
                                         f"(expected one of {', '.join(sorted(choices))})")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise DumpFormatError(where, f"expected a bool, got {type_name(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DumpFormatError(where, f"expected a finite number, got {value!r}")
        return value
    if meta.get("raw"):
        if not isinstance(value, dict):
            raise DumpFormatError(where, f"expected an object, got {type_name(value)}")
        check_depth(value, where)
        return value
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        members = get_args(tp)
        if value is None and _NONE in members:
            return None
        for member in members:
            if member is not _NONE and _kind_matches(member, value):
                return _value(member, value, where, meta)
        raise DumpFormatError(where, f"expected {expected(tp)}, got {type_name(value)}")
    if origin is tuple:
        if not isinstance(value, list):
            raise DumpFormatError(where, f"expected {expected(tp)}, got {type_name(value)}")
        item = get_args(tp)[0]
        return tuple(_value(item, v, f"{where}[{i}]", meta) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise DumpFormatError(where, f"expected an object, got {type_name(value)}")
        allowed = meta.get("keys")
        item = get_args(tp)[1]
        out: dict[str, object] = {}
        for k, v in value.items():
            if allowed is not None and k not in allowed:
                raise DumpFormatError(at(where, k), f"unknown {meta.get('label', 'key')} "
                                                    f"(expected one of {', '.join(allowed)})")
            out[k] = _value(item, v, at(where, k), {"minimum": meta.get("minimum")})
        return out
    if isinstance(tp, type) and issubclass(tp, Record):
        return decode(tp, value, where)
    raise TypeError(f"{where}: no decoder for field type {tp!r}")


def check_int(value: object, where: str, minimum: int | None = None) -> int:
    """An int (never a bool) of int64 magnitude, at least ``minimum`` when given."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise DumpFormatError(where, f"expected an int, got {type_name(value)}")
    if minimum is not None and value < minimum:
        raise DumpFormatError(where, f"expected an int >= {minimum}, got {value}")
    if abs(value) > MAX_INT:
        raise DumpFormatError(where, f"{value} is out of range (at most {MAX_INT} in magnitude)")
    return value


def check_depth(value: JSON, where: str, limit: int = MAX_DEPTH) -> None:
    """Refuse free-form JSON nested deeper than ``limit`` (iteratively: no recursion on hostile input)."""
    stack: list[tuple[JSON, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise DumpFormatError(where, f"nested deeper than {limit} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise DumpFormatError(where, f"non-finite number {item!r}")

"""`@linear` and `@consumes`: markers for values that must be consumed exactly once.

`leasecheck` reads them statically; at run time a consumed instance refuses a
second consuming call with `DoubleReleaseError`. An instance counts as consumed
once its consuming method returns normally: a method that raises leaves it
unconsumed, so the caller may fix the cause and call again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from leases.errors import DoubleReleaseError

_T = TypeVar("_T")
_C = TypeVar("_C", bound=type)
_P = ParamSpec("_P")
_R = TypeVar("_R")

CONSUMED_ATTR = "_lease_consumed_by"
"""Instance attribute (or slot) that records which method consumed the instance."""


def _has_instance_dict(cls: type) -> bool:
    return any("__dict__" in vars(k) for k in cls.__mro__ if k is not object)


def _slotted_with_flag(cls: type) -> type:
    """Rebuild a fully slotted class with one more slot for the consumed flag.

    The same move `dataclass(slots=True)` makes; methods using zero-argument
    `super()` keep pointing at the original class, so such classes should
    declare the slot themselves (`__slots__ = (..., "_lease_consumed_by")`).
    """
    own = cls.__dict__.get("__slots__", ())
    own_slots = (own,) if isinstance(own, str) else tuple(own)
    namespace = dict(cls.__dict__)
    for name in own_slots:
        namespace.pop(name, None)
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace["__slots__"] = own_slots + (CONSUMED_ATTR,)
    rebuilt = type(cls)(cls.__name__, cls.__bases__, namespace)
    rebuilt.__qualname__ = cls.__qualname__
    return rebuilt


def _slot_declared(cls: type) -> bool:
    for k in cls.__mro__:
        slots = k.__dict__.get("__slots__", ())
        if CONSUMED_ATTR in ((slots,) if isinstance(slots, str) else slots):
            return True
    return False


def linear(cls: _C) -> _C:
    """Class marker: instances are owned values that must be consumed exactly once."""
    if not _has_instance_dict(cls) and not _slot_declared(cls):
        cls = _slotted_with_flag(cls)  # type: ignore[assignment]
    setattr(cls, "__lease_linear__", True)
    return cls


def is_linear(obj: object) -> bool:
    """Whether `obj` is an instance (or class) marked `@linear`."""
    return bool(getattr(obj, "__lease_linear__", False))


def self_checked(fn: _T) -> _T:
    """Mark a consuming method that enforces its own single use (`Lease.release`)."""
    setattr(fn, "__lease_self_checked__", True)
    return fn


def consumes(fn: Callable[Concatenate[_T, _P], _R]) -> Callable[Concatenate[_T, _P], _R]:
    """Method marker: calling it consumes `self`; a second call raises `DoubleReleaseError`."""
    if getattr(fn, "__lease_self_checked__", False):
        setattr(fn, "__lease_consumes__", True)
        return fn
    name = fn.__name__

    @functools.wraps(fn)
    def consuming(self: _T, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        previous = getattr(self, CONSUMED_ATTR, None)
        if previous is not None:
            raise DoubleReleaseError(
                f"{self!r} was already consumed by {previous}(); "
                f"{type(self).__qualname__}.{name}() may not consume it again"
            )
        result = fn(self, *args, **kwargs)
        object.__setattr__(self, CONSUMED_ATTR, name)
        return result

    setattr(consuming, "__lease_consumes__", True)
    return consuming


def takes_from(
    field: str, /, *fields: str
) -> Callable[[Callable[Concatenate[_T, _P], _R]], Callable[Concatenate[_T, _P], _R]]:
    """Method contract: on some normal return it takes an owned entry out of each named container field.

    `@takes_from("locks")` on `def unlock(self, key)` says the method pops (or
    `del`s) an entry of `self.locks`, or of a container stored in it, on at
    least one path that returns normally; `leasecheck` verifies it. At run time
    the method is returned unchanged.
    """

    def contract(fn: Callable[Concatenate[_T, _P], _R]) -> Callable[Concatenate[_T, _P], _R]:
        return fn

    return contract


def consumed_by(obj: object) -> str | None:
    """The name of the method that consumed `obj`, or None while it is live."""
    value = getattr(obj, CONSUMED_ATTR, None)
    return value if isinstance(value, str) else None

"""`Borrowed[T]`: lend an owned value without giving up ownership.

Annotate a parameter `Borrowed[Lease[C, Held]]` (or `Borrowed[Ticket]` for a
`@linear` class) and callers keep ownership of what they pass; the callee may
read and use it but `leasecheck` rejects consuming, returning, storing or
otherwise transferring it. A return type `Borrowed[...]` (e.g. a lookup) hands
out a borrowed view the caller must not consume either. To mypy the alias is
transparent: `Borrowed[X]` is exactly `X`.
"""

from __future__ import annotations

from typing import TypeVar

from typing_extensions import TypeAliasType

_T = TypeVar("_T")

Borrowed = TypeAliasType("Borrowed", _T, type_params=(_T,))

"""Typed errors of crash-dump loading; each names the file and, for format errors, the JSON path."""

from __future__ import annotations


class DumpError(Exception):
    """Base of every error raised while reading a crash dump."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class DumpReadError(DumpError):
    """The file is missing, unreadable, or not a single JSON document."""


class DumpVersionError(DumpError):
    """The document is not a unicache crash dump, or of a version this code cannot read."""

    def __init__(
        self, message: str, *, found: object, supported: int, path: str | None = None
    ) -> None:
        super().__init__(message, path=path)
        self.found = found
        self.supported = supported


class DumpFormatError(DumpError, ValueError):
    """A field is missing, of the wrong type, or refers to an id the dump does not contain.

    `where` is the JSON path of the offending value, e.g. `tree.nodes[3].parent`.
    """

    def __init__(self, where: str, message: str, *, path: str | None = None) -> None:
        super().__init__(f"{where}: {message}", path=path)
        self.where = where

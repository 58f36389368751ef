"""Crash dumps: one versioned JSON file describing a cache at the moment something went wrong.

Torch-free and cheap to import. Write with `write_crash_dump` (or the
`dump_on_error` context manager); read with `load_dump`, which validates the
whole document and never executes anything.
"""

from unicache.dump.errors import DumpError, DumpFormatError, DumpReadError, DumpVersionError
from unicache.dump.loader import load_dump, parse_dump
from unicache.dump.schema import (
    FORMAT,
    VERSION,
    CaptureError,
    CrashDump,
    DumpCopy,
    DumpedError,
    DumpEvent,
    DumpJob,
    DumpLeak,
    DumpLease,
    DumpLedger,
    DumpNode,
    DumpPool,
    DumpQuarantine,
    DumpResidency,
    DumpSanity,
    DumpTicket,
    DumpTransfer,
    DumpViolation,
)
from unicache.dump.writer import (
    DescribesJobs,
    capture,
    describe_error,
    dump_on_error,
    write_crash_dump,
    write_document,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "CaptureError",
    "CrashDump",
    "DescribesJobs",
    "DumpCopy",
    "DumpError",
    "DumpEvent",
    "DumpFormatError",
    "DumpJob",
    "DumpLeak",
    "DumpLease",
    "DumpLedger",
    "DumpNode",
    "DumpPool",
    "DumpQuarantine",
    "DumpReadError",
    "DumpResidency",
    "DumpSanity",
    "DumpTicket",
    "DumpTransfer",
    "DumpVersionError",
    "DumpViolation",
    "DumpedError",
    "capture",
    "describe_error",
    "dump_on_error",
    "load_dump",
    "parse_dump",
    "write_crash_dump",
    "write_document",
]

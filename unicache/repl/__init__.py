"""The lease debugging REPL (`unicache repl`): crash dumps, trace replays and fresh caches.

Importing this package does no work; `main` loads the REPL on first call.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run `unicache repl` with `argv` (the arguments after `repl`); returns the exit status."""
    from unicache.repl.app import main as app_main

    return app_main(argv)


__all__ = ["main"]

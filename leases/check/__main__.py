"""`leasecheck` / `python -m leases.check`: exit 0 clean, 1 on any finding, 2 on usage errors."""

from __future__ import annotations

import os
import sys


def main() -> None:
    from leases.check.runner import main_run

    code = main_run(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Like mypy: skip tearing down the build's object graph, which is slow.
    os._exit(code)


if __name__ == "__main__":
    main()

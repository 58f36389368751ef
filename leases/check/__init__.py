"""leasecheck: mypy plus a flow-sensitive ownership check of leases and `@linear` values.

Run it as `leasecheck [mypy options] PATHS...` or `python -m leases.check`;
docs/leasecheck.md lists the ownership conventions it enforces. In-process
use: `leases.check.runner.run_check`. Importing this package does no work.
"""

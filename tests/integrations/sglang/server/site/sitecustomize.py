"""Applies the CPU stand-ins in every process of a server the tests launch (see `standins`).

The server test puts this directory and the repository root on the server's
PYTHONPATH; Python imports ``sitecustomize`` at start-up in each process.
"""

from tests.integrations.sglang.server.standins import install

install()

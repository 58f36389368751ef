"""Fixtures shared by the lease runtime tests."""

from __future__ import annotations

import pytest

from leases import LeaseLedger, PinSet
from tests.leases.markers import Full


@pytest.fixture
def ledger() -> LeaseLedger:
    return LeaseLedger("test", debug=True)


@pytest.fixture
def full_pins() -> PinSet[Full]:
    return PinSet(Full, holder="node-1")

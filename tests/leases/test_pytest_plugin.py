"""The pytest plugin fails a leaking test unless it declares the leak."""

from __future__ import annotations

import pytest

LEAKY = """
import gc
import pytest
from leases import LeaseLedger

class Full: ...

def test_leaks():
    led = LeaseLedger("p", debug=True)
    led.acquire(Full, owner="forgotten-owner")
    gc.collect()

@pytest.mark.expect_lease_leaks(1)
def test_expected():
    led = LeaseLedger("p")
    led.acquire(Full, owner="on-purpose")

@pytest.mark.expect_lease_leaks(2)
def test_wrong_count():
    led = LeaseLedger("p")
    led.acquire(Full, owner="only-one")

def test_clean(lease_leaks):
    led = LeaseLedger("p")
    led.acquire(Full, owner="fine").release()
    assert lease_leaks == []
"""


def test_plugin_flags_leaks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sample=LEAKY)
    result = pytester.runpytest_subprocess("-W", "ignore::ResourceWarning")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*1 lease(s) leaked during the test*", "*forgotten-owner*test_sample.py*"])
    result.stdout.fnmatch_lines(["*expected 2 leaked lease(s), got 1*"])

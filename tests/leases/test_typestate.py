"""The static half of the typestate: mypy itself rejects misuse of leases."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mypy import api

SNIPPET = '''
from leases import Held, Lease, LeaseLedger, PinSet, Released

class Full: ...
class Mamba: ...

ledger = LeaseLedger("x")
full_pins: PinSet[Full] = PinSet(Full)
lease = ledger.acquire(Full, owner="o", pins=[full_pins])
done: Lease[Full, Released] = lease.release()
done.release()
m = ledger.acquire(Mamba, owner="m")
ledger.pin(m, full_pins)
bad = ledger.acquire(Mamba, owner="m", pins=[full_pins])
wrong: Lease[Full, Held] = ledger.acquire(Mamba, owner="m")
mixed: PinSet[Full] = PinSet(Mamba)
fine: Lease[Mamba, Held] = m
'''

EXPECTED = [
    'typestate.py:11: error: Invalid self argument "Lease[Full, Released]" to attribute function '
    '"release" with type "Callable[[Lease[C, Held]], Lease[C, Released]]"  [misc]',
    'typestate.py:13: error: Cannot infer value of type parameter "C" of "pin" of "LeaseLedger"  [misc]',
    'typestate.py:14: error: Cannot infer value of type parameter "C" of "acquire" of "LeaseLedger"  [misc]',
    'typestate.py:15: error: Argument 1 to "acquire" of "LeaseLedger" has incompatible type '
    '"type[Mamba]"; expected "type[Full]"  [arg-type]',
    'typestate.py:16: error: Argument 1 to "PinSet" has incompatible type "type[Mamba]"; '
    'expected "type[Full]"  [arg-type]',
]


def test_mypy_rejects_released_and_cross_component_leases(tmp_path: Path) -> None:
    path = tmp_path / "typestate.py"
    path.write_text(textwrap.dedent(SNIPPET))
    stdout, stderr, status = api.run(
        ["--strict", "--no-incremental", "--no-error-summary", "--hide-error-context", str(path)]
    )
    lines = [line.replace(str(tmp_path) + "/", "") for line in stdout.splitlines()]
    assert lines == EXPECTED, stderr
    assert status == 1

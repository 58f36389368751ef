"""The synthetic multi-turn generator: deterministic, harness-equivalent, well-formed."""

from __future__ import annotations

import hashlib
import json

import pytest

from unicache.traces import MultiTurnSpec, generate_multiturn

# sha256 over json([id, session, turn, tokens]) per request of the workload that
# `sglang_harness.py --seed S --dump-workload` writes (computed once from its output).
HARNESS_DIGESTS = {
    0: "27984016bfa962dd8873c5171afb4e54176761006393ee3ce1693d0459d1bbd0",
    1: "4d9cdfc61dd1eb752609e7f7eb2406848a1581fdc0f0ac2dffcbfcfc6704a38c",
}


@pytest.mark.parametrize("seed", sorted(HARNESS_DIGESTS))
def test_default_spec_reproduces_the_harness_workload(seed: int) -> None:
    trace = generate_multiturn(seed)
    digest = hashlib.sha256()
    for req in trace.requests:
        digest.update(json.dumps([req.rid, req.session, req.turn, req.tokens.tolist()]).encode())
    assert len(trace) == 1000
    assert digest.hexdigest() == HARNESS_DIGESTS[seed]


def test_harness_sizes_seed0() -> None:
    trace = generate_multiturn(0)
    assert trace.unique_tokens() == 305_456
    assert trace.max_request_tokens == 4_139
    assert trace.input_tokens == 2_543_109


def test_turns_extend_their_session_history() -> None:
    spec = MultiTurnSpec(sessions=6, turns=3, system_prompts=2, system_len=(8, 12), turn_len=(2, 4), active=2)
    trace = generate_multiturn(5, spec)
    last: dict[int, list[int]] = {}
    for req in trace.requests:
        assert req.session is not None and req.turn is not None
        toks = req.tokens.tolist()
        prev = last.get(req.session)
        if prev is None:
            assert req.turn == 0
        else:
            assert toks[: len(prev)] == prev and len(toks) > len(prev)
        last[req.session] = toks
    assert sorted(last) == list(range(6))
    assert len(trace) == 18


def test_page_size_aligns_every_request() -> None:
    spec = MultiTurnSpec(sessions=4, turns=2, system_len=(10, 30), turn_len=(3, 9), page_size=4, output_tokens=3)
    trace = generate_multiturn(1, spec)
    assert all(len(r.tokens) % 4 == 0 and r.output_tokens == 3 for r in trace.requests)


def test_same_seed_same_trace_other_seed_differs() -> None:
    spec = MultiTurnSpec(sessions=5, turns=2, system_len=(8, 16), turn_len=(2, 6))
    a = [r.tokens for r in generate_multiturn(3, spec).requests]
    b = [r.tokens for r in generate_multiturn(3, spec).requests]
    c = [r.tokens for r in generate_multiturn(4, spec).requests]
    assert a == b and a != c


@pytest.mark.parametrize("bad", [{"sessions": 0}, {"turn_len": (5, 2)}, {"page_size": 0}, {"output_tokens": -1}])
def test_invalid_spec_raises(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        MultiTurnSpec(**bad)  # type: ignore[arg-type]

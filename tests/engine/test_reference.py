"""The reference model: pure, prefix-dependent, integer-exact, identical on both code paths."""

from __future__ import annotations

import pytest
import torch

from unicache.engine.reference import ReferenceDtypeError, ReferenceModel
from unicache.traces.mix import mix32, mix32_int


def toks(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def test_scalar_and_vector_hash_agree() -> None:
    xs = [0, 1, 2**31 - 1, 2**32 - 1, 2**40 + 5, -3, 123456789]
    assert mix32(torch.tensor(xs, dtype=torch.int64)).tolist() == [mix32_int(x) for x in xs]


def test_kv_depends_on_the_whole_prefix_not_just_the_token() -> None:
    m = ReferenceModel()
    a = m.hashes(toks(1, 2, 3, 4))
    b = m.hashes(toks(9, 2, 3, 4))
    c = m.hashes(toks(1, 2, 3, 4, 5))
    assert torch.equal(m.kv(a, 0, 4), m.kv(c, 0, 4))
    assert not torch.equal(m.kv(a, 3, 4), m.kv(b, 3, 4))
    assert not torch.equal(m.kv(a, 0, 2), m.swa_kv(a, 0, 2))
    assert not torch.equal(m.mamba_state(a, 4), m.mamba_state(b, 4))
    assert torch.equal(m.mamba_state(a, 3), m.mamba_state(c, 3))
    assert not torch.equal(m.mamba_state(c, 3), m.mamba_state(c, 4))


def test_same_token_at_another_position_differs() -> None:
    m = ReferenceModel()
    h = m.hashes(toks(7, 7, 7))
    rows = m.kv(h, 0, 3)
    assert len({tuple(r) for r in rows.tolist()}) == 3


def test_extend_equals_hashing_the_concatenation() -> None:
    m = ReferenceModel(seed=3)
    full = toks(*range(1, 40))
    direct = m.hashes(full)
    split = m.extend(m.hashes(full[:17]), full[17:])
    assert torch.equal(direct.values, split.values) and torch.equal(direct.tokens, split.tokens)


def test_decode_is_deterministic_and_continues_the_prefix() -> None:
    m = ReferenceModel()
    h = m.hashes(toks(5, 6, 7))
    d1 = m.decode(h, 6, vocab=100)
    d2 = m.decode(h, 6, vocab=100)
    assert torch.equal(d1.tokens, d2.tokens) and len(d1) == 9
    assert all(1 <= t < 100 for t in d1.tokens[3:].tolist())
    assert torch.equal(d1.values, m.hashes(d1.tokens).values)


@pytest.mark.parametrize(("dtype", "bits"), [(torch.int32, 31), (torch.float32, 24), (torch.bfloat16, 8),
                                             (torch.int16, 15)])
def test_values_fit_the_storage_dtype_exactly(dtype: torch.dtype, bits: int) -> None:
    m = ReferenceModel(dtype=dtype, kv_width=16)
    rows = m.kv(m.hashes(toks(*range(50))), 0, 50)
    assert rows.dtype == dtype
    as_int = rows.to(torch.int64)
    assert int(as_int.min()) >= 0 and int(as_int.max()) < 2**bits
    assert torch.equal(as_int.to(dtype), rows)


def test_rejects_bad_widths_ranges_and_dtypes() -> None:
    with pytest.raises(ReferenceDtypeError):
        ReferenceModel(dtype=torch.bool)
    with pytest.raises(ValueError, match="kv_width"):
        ReferenceModel(kv_width=0)
    m = ReferenceModel()
    h = m.hashes(toks(1, 2))
    with pytest.raises(IndexError):
        m.kv(h, 1, 3)
    with pytest.raises(IndexError):
        h.last(3)
    with pytest.raises(ValueError):
        m.decode(h, -1, vocab=10)


def test_vector_paths_match_the_scalar_definition() -> None:
    """KV rows, Mamba states (single and batched) and decoded hashes equal the plain-int formulas."""
    m = ReferenceModel(kv_width=3, mamba_width=4, seed=11)
    tokens = [5, 2**31 + 7, 0, 40, 123456789]
    h = m.hashes(toks(*tokens), start=3, carry=2**35 + 1)
    carry = 2**35 + 1
    for i, t in enumerate(tokens):
        carry += mix32_int(mix32_int(t) ^ ((3 + i) * 0x2C1B3C6D & 0xFFFFFFFF) ^ 11)
        assert int(h.values[i]) == carry
    salts = [mix32_int(i + (0x1B873593 ^ mix32_int(11))) for i in range(3)]
    for i, v in enumerate(h.values.tolist()):
        folded = v ^ (v >> 32)
        assert m.kv(h, i, i + 1)[0].tolist() == [mix32_int(folded ^ s) & (2**31 - 1) for s in salts]
    lengths = torch.arange(1, 6) * 1000
    batched = m.mamba_rows(h.values, lengths)
    for i in range(5):
        assert torch.equal(m.mamba_at(int(h.values[i]), int(lengths[i])), batched[i])


def test_extend_and_decode_carry_cached_rows() -> None:
    m = ReferenceModel(seed=2)
    prefix = m.hashes(toks(*range(1, 30)))
    m.kv(prefix, 0, 1)
    m.swa_kv(prefix, 0, 1)
    for h in (m.extend(prefix, toks(8, 9, 10)), m.decode(prefix, 7, vocab=40)):
        fresh = m.hashes(h.tokens)
        assert list(h.rows) == [m.uid] and not fresh.rows
        assert torch.equal(m.kv(h, 0, len(h)), m.kv(fresh, 0, len(fresh)))
        assert torch.equal(m.swa_kv(h, 0, len(h)), m.swa_kv(fresh, 0, len(fresh)))

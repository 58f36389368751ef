"""The boundary conversions of tree core "unicache": host index tensors to `array("q")` and back, value for value."""

from __future__ import annotations

from array import array

import pytest
import torch

from unicache.integrations.sglang.treecore.values import host_array, host_tensor


def test_host_values_round_trip_exactly() -> None:
    t = torch.tensor([0, 7, 2**31 + 5, 25_453, 3], dtype=torch.int64)
    a = host_array(t)
    assert a.typecode == "q" and a.tolist() == t.tolist()
    back = host_tensor(a)
    assert back.dtype == torch.int64 and back.tolist() == t.tolist()


def test_host_array_copies_and_takes_other_int_dtypes_and_views() -> None:
    t = torch.arange(10, dtype=torch.int64)
    a = host_array(t[2:8:2])
    t.zero_()
    assert a.tolist() == [2, 4, 6]
    assert host_array(torch.tensor([5, 6], dtype=torch.int32)).tolist() == [5, 6]
    assert host_array(torch.empty((0,), dtype=torch.int64)).tolist() == []


def test_host_tensor_shares_the_array_and_refuses_other_typecodes() -> None:
    a = array("q", [1, 2, 3])
    t = host_tensor(a)
    a[0] = 9
    assert t.tolist() == [9, 2, 3]
    assert host_tensor(array("q")).numel() == 0
    with pytest.raises(TypeError, match=r"array\('i'\)"):
        host_tensor(array("i", [1, 2]))

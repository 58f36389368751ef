"""A lease error or a failed sanity check inside tree core "unicache" writes a dump, and the error names it.

Forged and spent receipts, a misdirected state change and a corrupted node
(its device values no longer those SGLang handed in) each raise their typed
error with ``[crash dump: PATH]`` in the message; the dump at PATH loads,
records the error and the state the call met, and the REPL opens it. The
directory comes from ``UNICACHE_SGLANG_DUMP_DIR`` (``./unicache-crash`` when
unset, none when empty); earlier dumps are never replaced; configuration
refusals write none.
"""

from __future__ import annotations

import json
import os
import re
from array import array
from pathlib import Path

import pytest
import torch
from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType

from tests.integrations.sglang.chains import insert_tokens, node_of
from tests.integrations.sglang.treecore.inspector import InspectedUnicacheTreeCore
from unicache.dump import load_dump
from unicache.integrations.sglang.treecore.dump import DUMP_DIR_ENV
from unicache.integrations.sglang.treecore.errors import (
    ForeignReceiptError,
    NamespacedKeyError,
    NodeStateError,
    SpentReceiptError,
    TreeCoreSanityError,
)
from unicache.integrations.sglang.treecore.failures import MAX_DUMPS
from unicache.integrations.sglang.workload import CacheSetup, build_cache
from unicache.repl import main

A = list(range(1, 17))


def _setup() -> tuple[CacheSetup, InspectedUnicacheTreeCore, int]:
    setup = build_cache(backend="unicache", mamba=False, device_tokens=64, max_context_len=64)
    core = setup.cache.tree_core
    assert isinstance(core, InspectedUnicacheTreeCore)
    insert_tokens(setup, A)
    return setup, core, node_of(setup, A)


def _dumped(error: BaseException) -> Path:
    """The dump the error's message names (it must name one)."""
    m = re.search(r"\[crash dump: (\S+)\]", str(error))
    assert m, str(error)
    path = Path(m.group(1))
    assert path.is_file() and f"crash dump: {path}" in getattr(error, "__notes__", [])
    return path


def test_a_spent_receipt_writes_a_dump_that_names_the_error_and_the_state(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    setup, core, a = _setup()
    receipt = setup.cache.inc_lock_ref(a).to_dec_params()
    other = setup.cache.inc_lock_ref(a).to_dec_params()
    setup.cache.dec_lock_ref(a, receipt)
    with pytest.raises(SpentReceiptError, match=rf"FULL device lock #\d+ on node {a}: .*already released") as info:
        setup.cache.dec_lock_ref(a, receipt)
    path = _dumped(info.value)
    assert path.parent == Path(os.environ[DUMP_DIR_ENV]).resolve()
    dump = load_dump(path)
    assert dump.error is not None and dump.error.type == "SpentReceiptError"
    assert dump.error.ids["node_id"] == a
    (live,) = dump.leases.values()  # the other receipt's lease, nothing changed by the refused release
    assert live.owner == str(other) and a in live.nodes
    assert dump.revalidate() == [] and dump.sanity is not None and dump.sanity.ok
    capsys.readouterr()
    script = tmp_path / "s.repl"
    script.write_text(f"pins #{a}\n", encoding="utf-8")
    assert main(["--dump", str(path), "--script", str(script)]) == 0
    text = capsys.readouterr().out
    assert "error: SpentReceiptError: FULL device lock" in text and str(other) in text
    setup.cache.dec_lock_ref(a, other)
    setup.cache.release_host_resources()


def test_a_forged_receipt_and_a_misdirected_demote_each_write_their_own_dump() -> None:
    setup, core, a = _setup()
    with pytest.raises(ForeignReceiptError) as forged:
        setup.cache.dec_lock_ref(a, DecLockRefParams())
    with pytest.raises(NodeStateError, match=f"FULL demote on node {a}: not on both tiers") as demoted:
        core.demote(a)
    first, second = _dumped(forged.value), _dumped(demoted.value)
    assert first != second and first.parent == second.parent
    errors = [load_dump(p).error for p in (first, second)]
    assert [None if e is None else e.type for e in errors] == ["ForeignReceiptError", "NodeStateError"]
    assert core.failure_dumps.written == [first, second]
    setup.cache.release_host_resources()


def test_a_corrupted_node_fails_sanity_check_and_the_dump_records_the_problem(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup, core, a = _setup()
    values = core.device_values(core.node(a))
    assert values is not None
    core.set_component_device_value_raw(a, ComponentType.FULL, _shifted(values))
    with pytest.raises(TreeCoreSanityError, match=rf"node {a}: the device tensor kept for it differs") as info:
        setup.cache.sanity_check()
    dump = load_dump(_dumped(info.value))
    assert dump.sanity is not None and not dump.sanity.ok
    assert [(v.kind, v.node) for v in dump.sanity.violations] == [("tree-core", a)]
    assert dump.nodes[a].components["full"].device == tuple(_shifted(values).tolist())
    capsys.readouterr()
    script = tmp_path / "s.repl"
    script.write_text("check\n", encoding="utf-8")
    assert main(["--dump", str(_dumped(info.value)), "--script", str(script), "--json"]) == 0
    check = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert check["clean"] is False and f"node {a}: the device tensor" in check["violations"][0]["detail"]
    core.set_component_device_value_raw(a, ComponentType.FULL, _shifted(values, 0))
    setup.cache.sanity_check()
    setup.cache.release_host_resources()


def _shifted(values: list[int], by: int = 1000) -> torch.Tensor:
    return torch.tensor([v + by for v in values], dtype=torch.int64)


def test_without_the_variable_dumps_go_to_unicache_crash_and_an_empty_one_turns_them_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DUMP_DIR_ENV)
    setup, core, a = _setup()
    with pytest.raises(ForeignReceiptError) as info:
        setup.cache.dec_lock_ref(a, DecLockRefParams())
    assert _dumped(info.value).parent == (tmp_path / "unicache-crash").resolve()
    setup.cache.release_host_resources()
    monkeypatch.setenv(DUMP_DIR_ENV, "")
    setup, core, a = _setup()
    with pytest.raises(ForeignReceiptError) as off:
        setup.cache.dec_lock_ref(a, DecLockRefParams())
    assert "crash dump" not in str(off.value) and core.failure_dumps.written == []
    assert core.live_dump.dumper is None
    setup.cache.release_host_resources()


def test_dumps_never_replace_a_file_and_stop_at_the_limit() -> None:
    setup, core, a = _setup()
    paths = []
    for _ in range(MAX_DUMPS):
        with pytest.raises(ForeignReceiptError) as info:
            setup.cache.dec_lock_ref(a, DecLockRefParams())
        paths.append(_dumped(info.value))
    assert len(set(paths)) == MAX_DUMPS and all(p.is_file() for p in paths)
    with pytest.raises(ForeignReceiptError, match=rf"crash dump not written: this core already wrote {MAX_DUMPS}"):
        setup.cache.dec_lock_ref(a, DecLockRefParams())
    setup.cache.release_host_resources()


def test_a_refused_configuration_is_no_failure() -> None:
    setup, core, a = _setup()
    key = RadixKey(array("q", A), extra_key="lora-7")
    with pytest.raises(NamespacedKeyError) as info:
        setup.cache.match_prefix(MatchPrefixParams(key=key))
    assert "crash dump" not in str(info.value) and core.failure_dumps.written == []
    setup.cache.release_host_resources()

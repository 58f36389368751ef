"""`unicache explore`: option validation, the printed counts, and a violation's script and exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

from unicache.cli import main
from leases.pinset import PinSet
from unicache.explore.command import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION


@pytest.mark.parametrize("argv", [
    ["--depth", "0"], ["--depth", "x"], ["--depth", "65"], ["--components", "full,swa"],
    ["--components", "mamba"], ["--minutes", "0"], ["--minutes", "nan"], ["--max-states", "0"],
    ["--write-policy", "write_around"],
])
def test_bad_options_exit_2_with_one_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["explore", *argv])
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("unicache explore: error: argument")


def test_script_out_that_cannot_be_written_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    status = main(["explore", "--depth", "1", "--script-out", str(tmp_path / "file" / "x.repl")])
    assert status == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("unicache explore: --script-out")


def test_a_clean_run_prints_its_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["explore", "--depth", "2", "--components", "full", "--crash-dir", str(tmp_path)])
    assert status == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["write_back", "write_through"]
    assert all("states explored" in line and "distinct" in line and "depth 2 (complete" in line
               and "states/s" in line for line in lines)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.allow_lease_leaks  # the planted bug leaves caches too broken to close
def test_a_violation_writes_the_script_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(PinSet, "__bool__", lambda self: False)
    out = tmp_path / "repro" / "found.repl"
    status = main(["explore", "--depth", "5", "--write-policy", "write_back", "--script-out", str(out)])
    assert status == EXIT_VIOLATION
    text = capsys.readouterr().out
    assert "sanity violation at depth" in text
    assert f"reproduce: unicache repl --script {out}" in text
    script = out.read_text().splitlines()
    assert "\n".join(script) in text, "the script is printed too"
    assert script[0].startswith("# unicache explore found a sanity violation")
    assert any(line.startswith("new --components full,mamba") for line in script)
    assert script[-1] == "assert clean"

"""Cache options are used as given or refused: no 0 or empty value silently means the default."""

from __future__ import annotations

import pytest

from tests.repl.conftest import RunRepl
from unicache.repl import main

REFUSED = [
    ("--device-tokens 0", "--device-tokens", "an integer >= 1"),
    ("--components full,mamba --mamba-slots 0", "--mamba-slots", "an integer >= 1"),
    ("--components full,mamba --mamba-host-slots 0", "--mamba-host-slots", "an integer >= 1"),
    ("--kv-width 0", "--kv-width", "an integer >= 1"),
    ("--mamba-width 0", "--mamba-width", "an integer >= 1"),
    ("--page-size 0", "--page-size", "an integer >= 1"),
    ("--host-tokens 0", "--host-tokens", "an integer >= 1"),
    ("--host-ratio 0", "--host-ratio", "a finite number > 0"),
    ("--host-ratio nan", "--host-ratio", "a finite number > 0"),
    ("--components full,swa --swa-window 0", "--swa-window", "an integer >= 1"),
    ("--components full,swa --swa-device-tokens 0", "--swa-device-tokens", "an integer >= 1"),
    ("--components full,swa --swa-host-tokens 0", "--swa-host-tokens", "an integer >= 1"),
    ("--write-through-threshold 0", "--write-through-threshold", "an integer >= 1"),
    ("--load-back-threshold -1", "--load-back-threshold", "an integer >= 0"),
    ("--history -1", "--history", "an integer >= 0"),
    ("--components ''", "--components", "a comma list of full, swa, mamba"),
]


@pytest.mark.parametrize(("options", "option", "accepted"), REFUSED)
def test_new_refuses_an_out_of_range_option(repl: RunRepl, options: str, option: str, accepted: str) -> None:
    run = repl(f"! new {options}\nassert counter nodes == 0\n")
    assert run.status == 1  # no cache was started, so the assert (which needs one) fails
    error = run.out[0]["error"]
    assert error["type"] == "OptionRangeError"
    assert error["message"].startswith(f"new: {option} ")
    assert f"(accepted: {accepted})" in error["message"]
    assert "\n" not in error["message"]


def test_the_command_line_refuses_them_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--script", "/dev/null", "--device-tokens", "0"]) == 2
    assert "[OptionRangeError] repl: --device-tokens 0: out of range (accepted: an integer >= 1)" in \
        " ".join(capsys.readouterr().out.split())
    assert main(["--script", "/dev/null", "--history-file", ""]) == 2
    assert "--history-file ''" in capsys.readouterr().out


def test_a_sizing_option_for_a_component_that_is_off_is_refused(repl: RunRepl) -> None:
    run = repl("""\
        ! new --mamba-slots 4
        ! new --mamba-host-slots 4
        ! new --swa-device-tokens 8
        ! new --swa-host-tokens 8
        """)
    assert run.status == 0 and run.failures() == []
    messages = [e["error"]["message"] for e in run.out]
    assert messages == [
        "new: --mamba-slots given but mamba is not in --components",
        "new: --mamba-host-slots given but mamba is not in --components",
        "new: --swa-device-tokens given but swa is not in --components",
        "new: --swa-host-tokens given but swa is not in --components",
    ]


def test_given_values_are_used_and_omitted_ones_take_the_defaults(repl: RunRepl) -> None:
    run = repl("""\
        new --components full,mamba --device-tokens 8 --mamba-slots 1 --kv-width 1 --mamba-width 1
        new --components full,mamba
        """)
    assert run.status == 0
    given, default = (e["config"] for e in run.of("new"))
    assert (given["device_tokens"], given["mamba_device_slots"], given["kv_width"], given["mamba_width"]) == \
        (8, 1, 1, 1)
    assert (default["device_tokens"], default["mamba_device_slots"], default["kv_width"],
            default["mamba_width"]) == (64, 16, 4, 4)


def test_inspection_and_run_options_refuse_what_would_mean_something_else(repl: RunRepl) -> None:
    run = repl("""\
        new
        insert 1..4
        ! run until idle --max -1
        ! events --last -1
        ! history t:1..4 --last -1
        ! tree --depth -1
        ! leases --owner ''
        ! events --kind no-such-kind
        """)
    assert run.status == 0 and run.failures() == []
    errors = [e["error"] for e in run.out if not e["ok"]]
    assert [(e["type"], e["message"].split(":")[0]) for e in errors] == [
        ("OptionRangeError", "run"), ("OptionRangeError", "events"), ("OptionRangeError", "history"),
        ("OptionRangeError", "tree"), ("OptionRangeError", "leases"), ("CommandSyntaxError", "events"),
    ]
    assert "--max -1: out of range (accepted: an integer >= 0)" in errors[0]["message"]
    assert "unknown event kind 'no-such-kind'" in errors[5]["message"]

"""The `unicache` command line: replay and simulate end to end, usage errors, the repl hand-off."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unicache.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from unicache.engine.report import REQUIRED_KEYS


def test_replay_writes_report_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report_path = tmp_path / "out" / "report.json"
    plot_path = tmp_path / "out" / "run.png"
    status = main(["replay", "--requests", "60", "--tokens-per-block", "8", "--no-progress",
                   "--components", "full,swa,mamba", "--transfer", "simulated",
                   "--faults", "delay,reorder,duplicate,fail",
                   "--report", str(report_path), "--plot", str(plot_path), "--crash-dir", str(tmp_path / "crash")])
    assert status == EXIT_OK
    report = json.loads(report_path.read_text())
    assert set(REQUIRED_KEYS) <= set(report)
    assert report["requests"] == 60 and report["corruptions"] == 0 and report["errors"] == 0
    assert report["configuration"] == "Full+SWA+Mamba ps=1 write_back"
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "unicache replay" in out and "leaked leases" in out and "corruptions" in out


def test_replay_json_output_and_explicit_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "wl.jsonl"
    trace.write_text("".join(json.dumps({"id": i, "session": 0, "turn": i, "tokens": list(range(1, 20 + 4 * i))})
                             + "\n" for i in range(6)))
    status = main(["replay", "--trace", str(trace), "--no-progress", "--json", "--transfer", "immediate",
                   "--faults", "none", "--components", "full", "--device-tokens", "64", "--page-size", "2"])
    assert status == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["requests"] == 6 and report["device_hit_tokens"] > 0
    assert report["cache_config"]["device_tokens"] == 64 and report["transfer"] == "ImmediateEngine"


def test_replay_command_line_defaults_are_the_replay_defaults() -> None:
    from unicache.cli import _build_parser
    from unicache.engine.commands import replay_options
    from unicache.engine.replay import DEFAULT_FAULTS, ReplayOptions
    from unicache.engine.transfers import resolve_transfer

    on_auto = DEFAULT_FAULTS if resolve_transfer("auto") == "simulated" else ()
    assert replay_options(_build_parser().parse_args(["replay"])) == ReplayOptions(faults=on_auto)
    assert replay_options(_build_parser().parse_args(["replay", "--transfer", "simulated"])) == \
        ReplayOptions(transfer="simulated")
    for engine in ("immediate", "threaded", "cuda"):
        assert replay_options(_build_parser().parse_args(["replay", "--transfer", engine])).faults == ()
    opts = replay_options(_build_parser().parse_args(["replay", "--transfer", "simulated", "--mean-delay", "2.5",
                                                      "--max-delay", "9", "--decode-per-step", "3"]))
    assert (opts.mean_delay, opts.max_delay, opts.decode_tokens_per_step()) == (2.5, 9, 3)
    assert opts.fault_spec().mean_delay == 2.5 and opts.fault_spec().max_delay == 9


@pytest.mark.parametrize("argv", [
    ["replay", "--components", "mamba"],
    ["replay", "--faults", "meteor"],
    ["replay", "--trace", "/nonexistent/trace.jsonl", "--no-progress"],
    ["replay", "--requests", "5", "--device-tokens", "7", "--page-size", "2", "--no-progress"],
    ["replay", "--mean-delay", "0.5", "--no-progress"],
    ["simulate", "--components", "swa"],
    ["simulate", "--chaos", "volcano"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_USAGE
    assert capsys.readouterr().err


@pytest.mark.parametrize("argv", [["replay", "--requests", "0"], ["replay", "--transfer", "rdma"],
                                  ["simulate", "--steps", "x"]])
def test_argparse_rejects_bad_values(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_USAGE
    out = capsys.readouterr().out
    assert "replay" in out and "simulate" in out and "repl" in out


def test_simulate_a_few_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["simulate", "--seeds", "2", "--first-seed", "4", "--steps", "25", "--no-progress",
                   "--crash-dir", str(tmp_path)])
    assert status == EXIT_OK
    assert "all 2 seed(s) passed" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_simulate_failure_reports_reproduction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["simulate", "--seed", "3", "--steps", "30", "--no-progress", "--inject", "corrupt",
                   "--no-shrink", "--crash-dir", str(tmp_path)])
    assert status == EXIT_FAILED
    out = capsys.readouterr().out
    assert "reproduce: unicache simulate --seed 3" in out and "crash dump:" in out
    assert len(list(tmp_path.glob("unicache-crash-*.json"))) == 1


def test_repl_arguments_are_handed_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.repl"
    script.write_text("new --components full --device-tokens 16\ninsert 1..8\nmatch 1..8\n")
    status = main(["repl", "--script", str(script), "--json"])
    assert status == EXIT_OK
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [d["cmd"] for d in lines] == ["new", "insert", "match"]
    assert lines[-1]["device_len"] == 8


def _one_clean_line(err: str) -> None:
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err


@pytest.mark.parametrize(("argv", "message"), [
    (["replay", "--hicache-ratio", "1e-9", "--requests", "20", "--tokens-per-block", "4"], "would allocate"),
    (["replay", "--device-tokens", "1000000000000", "--requests", "5", "--tokens-per-block", "4"],
     "would allocate"),
    (["replay", "--mamba-slots", "100000000000", "--requests", "5", "--tokens-per-block", "4"], "would allocate"),
    (["replay", "--start", "99999", "--requests", "5", "--tokens-per-block", "4"], "holds none"),
    (["replay", "--trace", "[/]nope[bold].jsonl"], "[/]nope[bold].jsonl does not exist"),
])
def test_bad_values_refused_before_the_run(argv: list[str], message: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--no-progress", "--crash-dir", str(tmp_path / "crash")]) == EXIT_USAGE
    err = capsys.readouterr().err
    _one_clean_line(err)
    assert message in err


@pytest.mark.parametrize("argv", [
    ["replay", "--tokens-per-block", "1000"], ["replay", "--hicache-ratio", "nan"],
    ["replay", "--memory-limit", "1e300"], ["replay", "--history", "100000000000000000000"],
    ["replay", "--hicache-ratio", "inf"], ["replay", "--seed", "-1"], ["replay", "--memory-limit", "0"],
    ["simulate", "--page-size", "65"], ["simulate", "--seeds", "100000000000"], ["simulate", "--jobs", "0"],
    ["simulate", "--minutes", "-1"], ["simulate", "--workload", "lottery"],
])
def test_argparse_refuses_out_of_range_values(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" in err


def test_simulate_refuses_more_worker_processes_than_the_machine_can_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each worker holds its own torch: `--jobs 512 --seeds 512` would start 512 of them and thrash."""
    from unicache.cli import max_jobs

    bound = max_jobs()
    assert bound >= 4
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--seeds", str(bound + 1), "--jobs", str(bound + 1)])
    assert info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{bound + 1} worker processes" in err and f"bound of {bound}" in err and "Traceback" not in err


def _unwritable_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    a_dir = tmp_path / "dir"
    a_dir.mkdir()
    return [
        (["--report", str(a_dir)], "is a directory"),
        (["--report", str(a_file / "r.json")], "is not a directory"),
        (["--plot", str(a_dir)], "is a directory"),
        (["--plot", str(tmp_path / "run.xyz")], "unknown image format"),
        (["--crash-dir", str(a_file)], "is not a directory"),
        (["--crash-dir", str(a_file / "sub")], "is not a directory"),
    ]


def test_unwritable_outputs_are_refused_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for extra, message in _unwritable_cases(tmp_path):
        argv = ["replay", "--requests", "5", "--tokens-per-block", "4", "--no-progress",
                "--crash-dir", str(tmp_path / "crash"), *extra]
        assert main(argv) == EXIT_USAGE, extra
        captured = capsys.readouterr()
        _one_clean_line(captured.err)
        assert message in captured.err and captured.out == "", extra
    simulate = ["simulate", "--seeds", "1", "--steps", "2", "--no-progress"]
    assert main([*simulate, "--crash-dir", str(tmp_path / "file.txt")]) == EXIT_USAGE
    assert main([*simulate, "--report", str(tmp_path / "dir"), "--crash-dir", str(tmp_path)]) == EXIT_USAGE
    assert not (tmp_path / "crash").exists()


def test_report_is_written_atomically(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text("old")
    assert main(["replay", "--requests", "10", "--tokens-per-block", "4", "--no-progress", "--report", str(report),
                 "--crash-dir", str(tmp_path / "crash")]) == EXIT_OK
    assert json.loads(report.read_text())["requests"] == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_mooncake_file_gets_the_bundled_defaults(tmp_path: Path) -> None:
    from unicache.cli import _build_parser
    from unicache.engine.commands import replay_options
    from unicache.traces.mooncake import open_bundled_mooncake

    path = tmp_path / "mc.jsonl"
    with open_bundled_mooncake() as stream:
        path.write_bytes(b"".join(stream.readline() for _ in range(40)))
    bundled = replay_options(_build_parser().parse_args(["replay", "--tokens-per-block", "16"]))
    as_file = replay_options(_build_parser().parse_args(["replay", "--tokens-per-block", "16", "--trace", str(path)]))
    assert as_file.trace_format() == bundled.trace_format() == "mooncake"
    assert as_file.decode_tokens_per_step() == bundled.decode_tokens_per_step() == 4
    assert as_file.cache_chunk_tokens() == bundled.cache_chunk_tokens() == 16
    from unicache.engine.replay import build_replay, load_replay_trace

    a = build_replay(as_file, load_replay_trace(as_file), timeline=False)
    b = build_replay(bundled, load_replay_trace(replace(bundled, requests=40)), timeline=False)
    assert a.config == b.config
    tokens = tmp_path / "tok.jsonl"
    tokens.write_text('{"tokens": [1, 2, 3]}\n')
    opts = replay_options(_build_parser().parse_args(["replay", "--trace", str(tokens)]))
    assert opts.cache_chunk_tokens() is None and opts.decode_tokens_per_step() == 4


_REPLAY_OPTIONS = ["--requests", "--start", "--tokens-per-block", "--page-size", "--device-tokens",
                   "--hicache-ratio", "--mamba-slots", "--swa-window", "--load-back-threshold", "--memory-limit",
                   "--seed", "--mean-delay", "--max-delay", "--max-running", "--decode-per-step", "--cache-chunk",
                   "--check-every", "--history", "--components", "--faults", "--trace", "--transfer"]
_SIMULATE_OPTIONS = ["--seeds", "--first-seed", "--seed", "--steps", "--page-size", "--components", "--faults",
                     "--chaos", "--keep", "--jobs", "--minutes", "--workload", "--write-policy"]
_values = st.one_of(
    st.integers(-2**70, 2**70).map(str),
    st.sampled_from(["0", "1", "2", "3", "-1", "1e-9", "1e300", "nan", "inf", "-inf", "0.5", "true", "",
                     "full", "full,swa", "swa", "none", "delay,fail", "mooncake", "multiturn:1", "multiturn:x",
                     "immediate", "simulated", "1,2,x", "/dev/null", "/nonexistent", "\x00", "512", "513"]),
    st.text(max_size=6),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["replay", "simulate"]), data=st.data())
def test_fuzzed_cli_values_never_give_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  command: str, data: st.DataObject) -> None:
    if command == "replay":
        base = ["replay", "--requests", "3", "--tokens-per-block", "2", "--transfer", "immediate", "--no-progress"]
        names = _REPLAY_OPTIONS
    else:
        base = ["simulate", "--seeds", "1", "--steps", "3", "--jobs", "1", "--no-progress", "--no-shrink"]
        names = _SIMULATE_OPTIONS
    fuzzed = data.draw(st.lists(st.tuples(st.sampled_from(names), _values), min_size=1, max_size=2))
    argv = [*base, "--crash-dir", str(tmp_path / "crash")]
    for name, value in fuzzed:
        argv += [name, value]
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else -1
        assert status == EXIT_USAGE, argv
    assert status in (EXIT_OK, EXIT_FAILED, EXIT_USAGE), argv
    err = capsys.readouterr().err
    assert "Traceback" not in err, (argv, err)


def test_parser_bounds_are_the_engine_bounds() -> None:
    import unicache.cli as cli
    from unicache.engine import budget
    from unicache.traces.mooncake import MOONCAKE_BLOCK_TOKENS

    assert cli.MAX_HISTORY == budget.MAX_HISTORY and cli.MAX_MEMORY_LIMIT_GIB == budget.MAX_MEMORY_LIMIT_GIB
    assert cli.MOONCAKE_BLOCK_TOKENS == MOONCAKE_BLOCK_TOKENS


def _no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make building a cache or starting a sweep fail the test: a refusal must come before any work."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("work started although the input was refused")

    monkeypatch.setattr("unicache.engine.replay.UniCache", refuse)
    monkeypatch.setattr("unicache.engine.sweep.run_sweep", refuse)


def _refused(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv``: exit 2, one line on stderr (returned), nothing on stdout, no traceback, no crash dir."""
    crash = tmp_path / "crash"
    assert main([*argv, "--no-progress", "--crash-dir", str(crash)]) == EXIT_USAGE
    captured = capsys.readouterr()
    _one_clean_line(captured.err)
    assert captured.out == "" and "crash dump" not in captured.err
    assert not crash.exists()
    return captured.err


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_duplicate_request_ids_in_a_trace_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    import gzip

    trace = tmp_path / f"dup{suffix}"
    text = "".join(json.dumps(r) + "\n" for r in [{"id": 1, "tokens": [1, 2, 3]}, {"id": 2, "tokens": [4, 5]},
                                                   {"id": 1, "tokens": [1, 2, 3, 4]}])
    trace.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    _no_work(monkeypatch)
    err = _refused(["replay", "--trace", str(trace)], tmp_path, capsys)
    assert f"{trace}:3: request id 1 is already the id of line 1; give every record" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--device-tokens", "1", "--requests", "5", "--tokens-per-block", "4"],
     r"request \d+ of mooncake_conversation .* needs [\d,]+ device tokens \(.*\) but the cache has 1; "
     r"it could never start: raise --device-tokens to at least [\d,]+"),
    (["--device-tokens", "8", "--page-size", "4", "--requests", "5", "--tokens-per-block", "4"],
     r", rounded up to pages of 4\) but the cache has 8; it could never start: raise --device-tokens to at least"),
])
def test_a_device_the_largest_request_can_never_fit_is_refused(
        argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    _no_work(monkeypatch)
    err = _refused(["replay", *argv], tmp_path, capsys)
    assert re.search(message, err), err


def test_one_mamba_slot_for_a_request_that_can_resume_from_a_state_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"id": 5, "tokens": list(range(1, 11))}) + "\n"
                     + json.dumps({"id": 6, "tokens": list(range(1, 13))}) + "\n")
    _no_work(monkeypatch)
    err = _refused(["replay", "--trace", str(trace), "--mamba-slots", "1", "--cache-chunk", "4"], tmp_path, capsys)
    assert "request 6 of t.jsonl needs 2 Mamba slots" in err and "raise --mamba-slots to at least 2" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["replay", "--transfer", "threaded", "--faults", "delay,fail"],
     "--faults delay,fail: the threaded transfer engine injects no faults; pass --transfer simulated"),
    (["replay", "--transfer", "immediate", "--faults", "reorder"],
     "--faults reorder: the immediate transfer engine injects no faults"),
    (["replay", "--transfer", "cuda", "--faults", "duplicate"],
     "--faults duplicate: the cuda transfer engine injects no faults"),
    (["replay", "--transfer", "threaded", "--mean-delay", "3"],
     "--mean-delay 3.0: only the delay fault delays copies and the threaded transfer engine injects none"),
    (["replay", "--transfer", "simulated", "--faults", "reorder,duplicate", "--max-delay", "9"],
     "--max-delay 9: only the delay or lose fault delays copies and the faults are reorder,duplicate"),
    (["replay", "--transfer", "simulated", "--faults", "none", "--mean-delay", "2"],
     "the faults are none; drop --mean-delay"),
    (["replay", "--components", "full", "--mamba-slots", "8"],
     "--mamba-slots: --components full has no mamba; drop --mamba-slots or add mamba"),
    (["replay", "--components", "full,swa", "--no-branch-states"], "--no-branch-states: --components full,swa has no mamba"),
    (["replay", "--swa-window", "8"], "--swa-window: --components full,mamba has no swa"),
    (["replay", "--trace", "multiturn:1", "--tokens-per-block", "8"],
     "--tokens-per-block 8: trace multiturn:1 is a multiturn trace, not Mooncake block ids"),
    (["simulate", "--seed", "3", "--seeds", "4"], "--seed 3 runs that one seed and would ignore --seeds"),
    (["simulate", "--seed", "3", "--first-seed", "0"], "--seed 3 runs that one seed and would ignore --first-seed"),
    (["simulate", "--write-policy", "write_through", "--write-back", "async"],
     "--write-back async chooses how write-back eviction waits for its backups and --write-policy write_through "
     "has none; drop --write-back"),
])
def test_options_the_run_would_ignore_are_refused(argv: list[str], message: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _no_work(monkeypatch)
    assert message in _refused(argv, tmp_path, capsys)


def test_an_explicit_token_trace_file_refuses_the_block_scale(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "tok.jsonl"
    trace.write_text('{"tokens": [1, 2, 3]}\n')
    _no_work(monkeypatch)
    err = _refused(["replay", "--trace", str(trace), "--tokens-per-block", "16"], tmp_path, capsys)
    assert f"trace {trace} is a tokens trace" in err and "drop --tokens-per-block" in err


def test_a_seed_range_past_the_largest_seed_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from unicache.cli import MAX_SEED, _build_parser
    from unicache.engine.commands import MAX_SEED as ENGINE_MAX_SEED, simulate_seeds

    assert MAX_SEED == ENGINE_MAX_SEED
    _no_work(monkeypatch)
    err = _refused(["simulate", "--first-seed", str(MAX_SEED), "--seeds", "3"], tmp_path, capsys)
    assert (f"--first-seed {MAX_SEED} --seeds 3 would run seeds up to {MAX_SEED + 2}, past the largest seed "
            f"{MAX_SEED} (what --seed accepts); use --seeds 1 or a lower --first-seed") in err
    parse = _build_parser().parse_args
    assert simulate_seeds(parse(["simulate", "--first-seed", str(MAX_SEED - 2), "--seeds", "3"])) == \
        [MAX_SEED - 2, MAX_SEED - 1, MAX_SEED]
    assert simulate_seeds(parse(["simulate"])) == list(range(10))
    assert simulate_seeds(parse(["simulate", "--seed", str(MAX_SEED)])) == [MAX_SEED]


def test_a_repeated_keep_index_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--seed", "1", "--keep", "0,2,2"])
    assert info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "'0,2,2': index 2 is given twice" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ["--transfer", "threaded"],
    ["--transfer", "immediate", "--components", "full"],
    ["--trace", "multiturn:2", "--components", "full,swa,mamba", "--swa-window", "16", "--no-branch-states"],
    ["--transfer", "simulated", "--faults", "lose,reorder", "--max-delay", "20", "--ack-timeout", "40"],
])
def test_defaults_are_not_refused_and_the_reproduce_command_is_accepted(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    from unicache.cli import _build_parser
    from unicache.engine.commands import replay_options

    status = main(["replay", "--requests", "8", "--no-progress", "--json", "--crash-dir", str(tmp_path / "crash"),
                   *(argv if "--trace" in argv else [*argv, "--tokens-per-block", "4"])])
    assert status == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["requests"] == 8
    command = shlex.split(str(report["reproduce"]))
    assert command[:2] == ["unicache", "replay"]
    again = replay_options(_build_parser().parse_args(command[1:]))
    options = report["options"]
    assert isinstance(options, dict)
    assert list(again.faults) == options["faults"] and again.transfer == options["transfer"]
    assert again.components == tuple(options["components"]) and again.branch_states == options["branch_states"]


def test_auto_on_a_gpu_machine_refuses_explicit_faults_and_defaults_to_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`--transfer auto` picks cuda when a GPU is present, whose copies inject no faults."""
    from unicache.cli import _build_parser
    from unicache.engine.commands import replay_options

    monkeypatch.setattr("unicache.engine.transfers.cuda_available", lambda: True)
    _no_work(monkeypatch)
    err = _refused(["replay", "--faults", "delay"], tmp_path, capsys)
    assert "--faults delay: the cuda transfer engine injects no faults (--transfer auto picked cuda: a GPU is " \
           "present); pass --transfer simulated" in err
    assert replay_options(_build_parser().parse_args(["replay"])).faults == ()
    assert replay_options(_build_parser().parse_args(["replay", "--transfer", "simulated"])).faults == \
        ("delay", "reorder")

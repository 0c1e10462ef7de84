"""Command-line arguments that used to crash, hang, or be dropped or misread in
silence: each is now one message (exit 2, no traceback), refused before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from waferflow.cli import EXIT_USER_ERROR, main


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``waferflow argv``, which must refuse it; its one error line."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse refuses a bad value itself, also with 2
        code = exc.code
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR, err
    assert "Traceback" not in err
    return err


def test_a_batch_too_large_for_torch_is_refused_by_name(capsys) -> None:
    # 2**70 reached torch and ended in a C++ ValueError traceback
    err = refused(capsys, "trace", "hf:gpt2-tiny", "--batch", str(2**70))
    assert "batch=" in err and "at most 16,777,216" in err


@pytest.mark.parametrize("skew", ["inf", "1e308", "100"])
def test_an_expert_skew_beyond_every_token_is_refused(capsys, skew: str) -> None:
    # inf and 1e308 failed inside the trace ("could not trace ... check torch.export"),
    # and 100 was accepted: experts sized for 50 times the tokens that exist
    err = refused(capsys, "trace", "hf:mixtral-tiny", "--moe-skew", skew)
    assert "moe" in err.lower() and "skew" in err


def test_a_skew_up_to_every_token_is_accepted() -> None:
    from waferflow.frontend.options import check_trace_options

    check_trace_options("hf:mixtral-tiny", mode="infer", optimizer="sgd", moe_skew=2.0)


@pytest.mark.parametrize("option", ["-o", "--trace", "--png", "--report", "--html"])
def test_an_empty_output_name_is_refused_not_skipped(capsys, option: str) -> None:
    # an empty name counted as "not given": the run succeeded and wrote nothing
    err = refused(capsys, "compile", "hf:gpt2-tiny", "--wafer", "mesh4x4", option, "")
    assert f"{option}: give a file name" in err


def test_trace_dash_output_is_stdout(capsys, tmp_path: Path, monkeypatch) -> None:
    # `trace -o -` wrote a file named '-' in the current folder
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "cnn:amcoda", "--batch", "2", "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("graph @")
    assert not (tmp_path / "-").exists()


def test_two_outputs_on_one_path_are_refused(capsys, tmp_path: Path) -> None:
    # the trace silently replaced the plan
    same = str(tmp_path / "same.json")
    err = refused(capsys, "compile", "hf:gpt2-tiny", "--wafer", "mesh4x4",
                  "-o", same, "--trace", same)  # fmt: skip
    assert "-o and --trace both write" in err
    assert not Path(same).exists()


def test_an_output_folder_where_no_file_can_be_made_is_refused_first(capsys) -> None:
    # root passes the access check on /proc; the write failed after the work, naming
    # a temporary file ('/proc/.x.abc.tmp does not exist')
    for out in ("/proc/x", "/proc/waferflow-none/x.wf"):
        err = refused(capsys, "opt", "-", "-p", "dce", "-o", out)
        assert f"-o '{out}': " in err and "/proc" in err and ".tmp" not in err


def test_emit_does_not_replace_a_file_with_its_folder(capsys, tmp_path: Path) -> None:
    # `emit pipe -o notes.txt` deleted the file and wrote the experiment folder there
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me")
    err = refused(capsys, "emit", "pipe", "-o", str(notes), "--no-check")
    assert "a file is there, where the directory goes" in err
    assert notes.read_text() == "keep me"
    assert "give a folder name" in refused(capsys, "emit", "pipe", "-o", "")


@pytest.mark.parametrize("command", [["emit", "pipe", "-o", "x"], ["opt", "-p", "dce"]])
def test_a_negative_seed_is_refused(capsys, command: list[str]) -> None:
    # emit's data files crashed in numpy ("expected non-negative integer")
    err = refused(capsys, *command, "--seed", "-1")
    assert "--seed: expected an integer >= 0" in err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_place_time_is_checked_even_when_nothing_is_placed(capsys, value: str) -> None:
    err = refused(capsys, "compile", "hf:gpt2-tiny", "--wafer", "mesh4x4", "--place", "none",
                  "--place-time", value)  # fmt: skip
    assert "--place-time: expected a finite number of seconds > 0" in err


@pytest.mark.parametrize(
    ("extra", "needed"),
    [
        (["--link-tracks"], "--trace"),
        (["--hazard-guard"], "--emit amcoda"),
        (["--emit-dir", "exp"], "--emit amcoda"),
    ],
)
def test_options_that_would_be_ignored_are_refused(capsys, extra: list[str], needed: str) -> None:
    err = refused(capsys, "compile", "hf:gpt2-tiny", "--wafer", "mesh4x4", *extra)
    assert f"{extra[0]} applies only with {needed}" in err


def test_simulate_link_tracks_without_trace_is_refused(capsys) -> None:
    err = refused(capsys, "simulate", "plan.json", "--link-tracks")
    assert "--link-tracks applies only with --trace" in err


def test_wafers_list_with_a_name_is_refused(capsys) -> None:
    # the name was ignored and the whole table printed
    err = refused(capsys, "wafers", "list", "mesh4x4")
    assert "`waferflow wafers show mesh4x4`" in err


def test_an_endless_input_file_is_refused(capsys, monkeypatch) -> None:
    # /dev/zero as a wafer file was read until the memory ran out
    import waferflow.fileio as fileio

    monkeypatch.setattr(fileio, "MAX_INPUT_BYTES", 1 << 16)
    err = refused(capsys, "wafers", "show", "/dev/zero")
    assert "streams more than 65,536 bytes" in err
    err = refused(capsys, "simulate", "/dev/zero")
    assert "streams more than 65,536 bytes" in err


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["opt", "", "-p", "dce"], "IR file"),
        (["simulate", ""], "plan file"),
        (["viz", "", "-o", "x.png"], "plan file"),
        (["sweep", "", "--dry-run"], "sweep file"),
    ],
)
def test_an_empty_input_path_is_named(capsys, argv: list[str], what: str) -> None:
    # Path('') is the current folder: 'this looks like a folder' / '.: is a folder'
    assert f"the {what}'s path is empty" in refused(capsys, *argv)


def test_opt_empty_wafer_is_refused_not_dropped(capsys) -> None:
    assert "unknown wafer preset ''" in refused(capsys, "opt", "-", "-p", "dce", "--wafer", "")


def test_parallelize_plan_string_with_other_options_is_refused(capsys) -> None:
    # dp=4 was dropped in silence: the plan string replaces every option
    err = refused(capsys, "opt", "-", "-p", 'parallelize{plan="dp=2",dp=4}', "--wafer", "mesh4x4")
    assert "dp would be ignored" in err


def test_more_cpsat_workers_than_it_accepts_are_refused() -> None:
    # CP-SAT answered MODEL_INVALID: "internal error: CP-SAT rejected the model: "
    from waferflow.errors import PlanError
    from waferflow.mapper.cpsat import MAX_WORKERS, SolveOptions

    SolveOptions(num_workers=MAX_WORKERS)
    with pytest.raises(PlanError, match="num_workers must be from 1 to 10,000"):
        SolveOptions(num_workers=MAX_WORKERS + 1)


def test_sweep_output_is_checked_before_any_job(capsys, tmp_path: Path) -> None:
    # a file (or /proc) as the results folder failed after every job had run
    sweep = tmp_path / "s.toml"
    sweep.write_text('[job]\nmodel = "hf:gpt2-tiny"\nwafer = "mesh4x4"\n')
    taken = tmp_path / "taken"
    taken.write_text("")
    err = refused(capsys, "sweep", str(sweep), "-o", str(taken), "-q")
    assert "a file is there, where the directory goes" in err


def test_endless_stdin_is_refused(capsys, monkeypatch) -> None:
    import io
    import sys

    import waferflow.fileio as fileio

    monkeypatch.setattr(fileio, "MAX_INPUT_BYTES", 1 << 16)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * (1 << 17))))
    assert "streams more than 65,536 bytes" in refused(capsys, "opt", "-", "-p", "dce")


def test_the_place_pass_checks_its_options_before_any_work(capsys, tmp_path: Path) -> None:
    # place{export=/proc/x} failed only once placement wrote the model (a raw errno
    # naming a temporary file), and workers above CP-SAT's bound only at the first
    # solver call; both are refused when the pipeline is read, before the input is
    ir = tmp_path / "missing.wf"  # never read: the pipeline is refused first
    err = refused(capsys, "opt", str(ir), "-p", "place{export=/proc/x}")
    assert "place{export=...} '/proc/x'" in err and "missing.wf" not in err
    err = refused(capsys, "opt", str(ir), "-p", "place{workers=100000}")
    assert "num_workers must be from 1 to 10,000" in err and "missing.wf" not in err

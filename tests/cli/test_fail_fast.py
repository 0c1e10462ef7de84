"""Mistakes caught before any work: each bad argument is refused before torch is
imported (so before anything is traced), with a "did you mean" where one helps; the
small command-line behaviours (bare `waferflow`, --version, a subcommand's own usage,
a closed pipe, OS errors in words). How fast: benchmarks/bench_cli.py."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from waferflow.cli import EXIT_USER_ERROR, main

# runs the command in a fresh interpreter and reports whether torch was imported
_PROBE = """
import sys
from waferflow.cli import main
code = main(sys.argv[1:])
print("TORCH" if "torch" in sys.modules else "NO-TORCH", code, file=sys.stderr)
"""


def run_fresh(*argv: str, cwd: Path | None = None) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=cwd,
        check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["trace", "hf:gtp2"], "did you mean hf:gpt2?"),
        (
            ["compile", "hf:gpt2", "--wafer", "mesh16x16", "--plan", "dp=2,tp=4,microbatch=4"],
            "did you mean microbatches?",
        ),
        (["compile", "hf:gpt2", "--wafer", "mesh16x6"], "mesh16x16"),
        (
            ["compile", "hf:gpt2", "--wafer", "mesh16x16", "--passes", "canonicalise"],
            "canonicalize",
        ),
        (["compile", "hf:gpt2", "--wafer", "mesh16x16", "--png", "p.jpg"], ".png or .svg"),
        (["compile", "hf:gpt2", "--wafer", "mesh16x16", "--html", "r.pdf"], ".html"),
        (["viz", "plan.json", "-o", "p.gif"], ".png or .svg"),
        (
            [
                "compile",
                "hf:gpt2",
                "--mode",
                "train",
                "--wafer",
                "mesh16x16",
                "--plan",
                "dp=2,tp=4,pp=2,microbatches=4",
            ],
            "does not fit on mesh16x16",
        ),
    ],
)
def test_refused_before_torch_is_imported(argv: list[str], message: str) -> None:
    code, _, err = run_fresh(*argv)
    assert code == 0, err  # the probe itself ran
    assert message in err and "Traceback" not in err
    assert err.rstrip().endswith(f"NO-TORCH {EXIT_USER_ERROR}")


def test_a_bad_place_jobs_variable_is_refused_before_torch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WAFERFLOW_PLACE_JOBS", "0")
    _, _, err = run_fresh("compile", "hf:gpt2", "--wafer", "mesh16x16", "--plan", "dp=2")
    assert "WAFERFLOW_PLACE_JOBS='0': give a whole number of processes >= 1" in err
    assert err.rstrip().endswith(f"NO-TORCH {EXIT_USER_ERROR}")


def test_output_under_a_file_is_refused_in_words(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    _, _, err = run_fresh("compile", "hf:gpt2", "--wafer", "mesh16x16", "-o",
                             "afile/plan.json", cwd=tmp_path)  # fmt: skip
    assert "afile exists and is not a directory" in err
    assert err.rstrip().endswith(f"NO-TORCH {EXIT_USER_ERROR}")


def test_models_and_wafers_do_not_import_torch() -> None:
    for argv in (["models"], ["wafers"]):
        code, out, err = run_fresh(*argv)
        assert code == 0 and err.rstrip().endswith("NO-TORCH 0"), err
        assert out


def test_readme_refusal_gives_advice_that_makes_it_fit(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compile", "hf:gpt2", "--mode", "train", "--wafer", "mesh16x16",
                 "--plan", "dp=2,tp=4,pp=2,microbatches=4"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR
    # 124,439,808 parameters x 4 B x (weights + gradients) x 2 copies = 1.85 GiB > 256 MiB
    assert "1.85 GiB" in err and "256 MiB" in err
    # together they fit; the plan grammar has zero=, so ZeRO-3 shards the dp copies
    assert "--dtype bf16, --mode infer" in err and "zero=3 in the plan" in err
    assert "mesh64x64" in err  # 4 GiB holds it as it is
    assert "raise tp" not in err and "pp" not in err.split("What would pass")[1]


def test_bare_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "usage: waferflow" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from waferflow import __version__

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"waferflow {__version__}"


def test_unknown_flag_prints_the_subcommand_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["wafers", "--bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage: waferflow wafers" in err and "--bogus" in err


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no file descriptor")


def test_closed_pipe_is_not_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["wafers"]) == 0
    assert "error" not in capsys.readouterr().err


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    from waferflow.fileio import check_output, write_text

    out = tmp_path / "a" / "b" / "report.md"
    check_output(out, "--report")  # missing folders are fine: the writer makes them
    write_text(out, "x")
    assert out.read_text() == "x"


def test_quiet_prints_the_report_only(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compile", "hf:gpt2-tiny", "--wafer", "mesh4x4", "--batch", "1", "--seq", "8",
                 "-q"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert out.startswith("plan 'hf:gpt2-tiny'") and "step time" in out
    assert "graph @" not in out and "wrote" not in out  # no IR summary, no file list

"""`waferflow opt` conventions (as mlir-opt / xdsl-opt): stdin and stdout by default,
the output format named by the extension, dumps and timing on stderr, verification
of input and output, dump names checked, every pass runnable with --wafer, and a
pipeline split over two runs giving the same bytes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from waferflow.cli import EXIT_USER_ERROR, main
from waferflow.ir.parser import parse_graph
from waferflow.ir.printer import print_graph
from waferflow.ir.serialize import loads_graph

INPUT = Path(__file__).resolve().parents[1] / "passes" / "inputs" / "mlp_step.wf"
PARALLEL = "parallelize{dp=2,tp=2,pp=2,microbatches=2,span=1}"
REST = "insert-collectives,schedule,lower-collectives,plan-memory"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def test_reads_stdin_and_writes_stdout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stdin(monkeypatch, INPUT.read_text())
    code, out, err = run(capsys, "opt", "-p", "dce")
    assert code == 0 and err == ""
    assert out == print_graph(parse_graph(INPUT.read_text()))
    _stdin(monkeypatch, INPUT.read_text())
    code, out2, _ = run(capsys, "opt", "-", "-p", "dce", "-o", "-")
    assert code == 0 and out2 == out


def test_json_in_and_out_by_extension(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    js = tmp_path / "g.json"
    code, out, err = run(capsys, "opt", str(INPUT), "-p", "dce", "-o", str(js))
    assert code == 0 and out == "" and f"wrote {js}" in err
    doc = json.loads(js.read_text())
    assert doc["format"] == "waferflow.graph"
    _stdin(monkeypatch, js.read_text())  # JSON on stdin is recognised by its '{'
    code, out, _ = run(capsys, "opt", "-p", "canonicalize")
    assert code == 0 and out == print_graph(loads_graph(js.read_text()))
    wf = tmp_path / "sub" / "g.wf"  # folders are made; text for any other extension
    code, _, _ = run(capsys, "opt", str(js), "-p", "canonicalize", "-o", str(wf))
    assert code == 0 and wf.read_text() == out
    assert not list(wf.parent.glob(".*tmp"))  # written through a temporary file


def test_dumps_and_timing_go_to_stderr_and_the_final_ir_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(
        capsys, "opt", str(INPUT), "-p", "canonicalize,dce", "--print-ir-after", "dce",
        "--print-ir-before", "canonicalize", "--time-passes",
    )  # fmt: skip
    assert code == 0
    assert err.startswith("// -----// IR Dump Before canonicalize //----- //\ngraph @mlp")
    assert "// -----// IR Dump After dce //----- //" in err
    assert "Pass execution timing report" in err
    assert out.startswith("graph @mlp") and "IR Dump" not in out and "timing" not in out
    parse_graph(out)


def test_print_ir_after_change(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "opt", str(INPUT), "-p", "dce,canonicalize", "--print-ir-after-all",
        "--print-ir-after-change",
    )  # fmt: skip
    assert code == 0 and "IR Dump" not in err  # the input is already clean: nothing changes
    code, _, err = run(
        capsys, "opt", str(INPUT), "-p", "dce,parallelize{tp=2,span=1}", "--wafer", "mesh4x4",
        "--print-ir-after-all", "--print-ir-after-change",
    )  # fmt: skip
    assert code == 0
    assert [line for line in err.splitlines() if "IR Dump" in line] == [
        "// -----// IR Dump After parallelize //----- //"
    ]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--print-ir-after", "parallelise"], "unknown pass 'parallelise' in --print-ir-after; did you mean 'parallelize'"),
        (["--print-ir-after", "fuse-elementwise"], "--print-ir-after fuse-elementwise: the pipeline does not run 'fuse-elementwise'; it runs: canonicalize, dce"),
        (["--print-ir-before", "dcee"], "unknown pass 'dcee' in --print-ir-before; did you mean 'dce'"),
    ],
)  # fmt: skip
def test_dump_names_are_checked(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "opt", str(INPUT), "-p", "canonicalize,dce", *argv)
    assert code == EXIT_USER_ERROR and out == ""
    assert needle in err and "Traceback" not in err


def test_compile_checks_print_ir_after_too(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "compile", "hf:gpt2-tiny", "--wafer", "mesh4x4", "--print-ir-after", "dec", "-q"
    )
    assert code == EXIT_USER_ERROR
    assert "unknown pass 'dec' in --print-ir-after; did you mean 'dce'" in err
    import waferflow as wf
    from waferflow.errors import PassError

    with pytest.raises(PassError, match="print_ir_after place: the pipeline does not run"):
        wf.compile("hf:gpt2-tiny", wafer="mesh4x4", print_ir_after=["place"])


def test_input_and_output_are_verified(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.wf"
    bad.write_text('graph @g {\n  %x = input "x" : f32[2] fwd\n  %y = add %x, %x : f32[3] fwd\n  return %y\n}\n')  # fmt: skip
    code, out, err = run(capsys, "opt", str(bad), "-p", "")
    assert code == EXIT_USER_ERROR and out == ""
    assert "failed verification before any pass ran" in err and "should have shape [2]" in err
    code, out, _ = run(capsys, "opt", str(bad), "-p", "", "--no-verify")
    assert code == 0 and out == bad.read_text()


def test_a_failing_pass_dumps_its_ir_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "opt", str(INPUT), "-p", "parallelize{dp=3}", "--wafer", "mesh4x4",
        "--print-ir-after-failure",
    )  # fmt: skip
    assert code == EXIT_USER_ERROR and out == ""
    assert "// -----// IR Dump After parallelize Failed //----- //\ngraph @mlp" in err
    assert "dp=3 does not divide the batch 8" in err


def test_passes_that_need_a_wafer_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "opt", str(INPUT), "-p", f"dce,{PARALLEL}")
    assert code == EXIT_USER_ERROR
    assert "pass(es) parallelize need a target wafer: give --wafer" in err
    code, _, err = run(capsys, "opt", str(INPUT), "-p", "dce", "--coarsen", "2")
    assert code == EXIT_USER_ERROR and "--coarsen needs --wafer" in err


def test_every_registered_pass_runs_from_opt(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The whole parallel path, place and route included, on the command line; the
    notes of the passes go to stderr."""
    pipeline = (
        f"canonicalize,dce,fuse-elementwise,annotate-cost,{PARALLEL},insert-collectives,"
        "place{time=0.5},schedule,lower-collectives,plan-memory,route"
    )
    code, out, err = run(capsys, "opt", str(INPUT), "--wafer", "mesh4x4", "--seed", "3",
                         "-p", pipeline)  # fmt: skip
    assert code == 0, err
    assert "note: place: kept " in err and "note: route: " in err
    graph = parse_graph(out)
    assert graph.parallel is not None and all(
        op.par is not None and op.par.region for op in graph.ops if not op.is_source
    )
    code, _, err = run(capsys, "opt", str(INPUT), "--wafer", "mesh4x4", "-p",
                       'parallel-lowering{plan="tp=2,span=1"}')  # fmt: skip
    assert code == 0, err


def test_a_pipeline_split_over_two_runs_gives_the_same_bytes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    whole, mid, rest = tmp_path / "one.wf", tmp_path / "mid.wf", tmp_path / "two.wf"
    args = ["--wafer", "mesh16x16"]
    assert main(["opt", str(INPUT), *args, "-p", f"canonicalize,dce,{PARALLEL},{REST}",
                 "-o", str(whole)]) == 0  # fmt: skip
    assert main(["opt", str(INPUT), *args, "-p", f"canonicalize,dce,{PARALLEL}", "-o", str(mid)]) == 0  # fmt: skip
    assert main(["opt", str(mid), *args, "-p", REST, "-o", str(rest)]) == 0
    capsys.readouterr()
    assert rest.read_bytes() == whole.read_bytes()
    assert "level=collectives" in whole.read_text().splitlines()[0]

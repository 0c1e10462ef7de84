"""The `waferflow` command: help texts, the trace -> opt -> compile -> simulate path,
and one clear message (exit 2, no traceback) for each kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waferflow.cli import EXIT_USER_ERROR, build_parser, main
from waferflow.ir.parser import parse_graph

SUBCOMMANDS = ["trace", "opt", "passes", "models", "wafers", "simulate", "compile", "viz", "sweep"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_complete_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: waferflow {name}" in out
    # every option documented: no argparse entry without a help string
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[name]
    for action in sub._actions:
        if action.dest != "help" and action.option_strings:
            assert action.help, f"{name} {action.option_strings} has no help text"


@pytest.fixture(scope="module")
def cnn_ir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ir") / "cnn.wf"
    assert main(["trace", "cnn:amcoda", "--mode", "train", "--batch", "4", "-o", str(path)]) == 0
    return path


def test_trace_train_has_fwd_bwd_opt_with_flops(cnn_ir: Path) -> None:
    graph = parse_graph(cnn_ir.read_text(), source=str(cnn_ir))
    phases = {op.phase.value for op in graph.ops}
    assert phases == {"fwd", "bwd", "opt"}
    convs = [op for op in graph.ops if op.kind.value in ("conv", "conv_backward")]
    assert convs and all(op.cost.flops > 0 for op in convs)


def test_opt_prints_ir_after_each_pass_and_it_parses(
    cnn_ir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "opt", str(cnn_ir), "-p", "canonicalize,dce,fuse-elementwise",
        "--print-ir-after-all", "--verify-each",
    )  # fmt: skip
    assert code == 0
    chunks = err.split("// -----// IR Dump After ")[1:]  # dumps go to stderr
    assert [c.split(" ", 1)[0] for c in chunks] == ["canonicalize", "dce", "fuse-elementwise"]
    for chunk in chunks:
        body = chunk.split("\n", 1)[1]
        parse_graph(body)
    assert out == chunks[-1].split("\n", 1)[1][:-1]  # the final IR, alone, on stdout


def test_opt_time_passes_prints_one_table(cnn_ir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "opt", str(cnn_ir), "-p", "dce", "--time-passes", "-o", "-")
    assert code == 0
    assert err.count("Pass execution timing report") == 1 and "dce" in err
    assert "timing" not in out and out.startswith("graph @")


def test_wafers_list_and_show(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "wafers")
    assert code == 0
    for name in ("amcoda", "wse2", "wse3", "dojo-d1", "dojo-tile", "mesh4x4", "mesh16x16"):
        assert name in out
    code, out, _ = run(capsys, "wafers", "show", "wse2")
    assert code == 0 and "wse2" in out
    bad = tmp_path / "bad.toml"
    bad.write_text('preset = "mesh4x4"\n[link]\nbandwidth = -1\n')
    code, _, err = run(capsys, "wafers", "show", str(bad))
    assert code == EXIT_USER_ERROR
    assert "bandwidth" in err and "Traceback" not in err


def test_compile_save_simulate_trace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    trace = tmp_path / "trace.json"
    code, out, _ = run(
        capsys, "compile", "hf:gpt2-tiny", "--wafer", "mesh16x16", "--mode", "infer",
        "--batch", "1", "--seq", "16", "-o", str(plan), "-q",
    )  # fmt: skip
    assert code == 0, out
    assert "step time" in out
    code, out, _ = run(capsys, "simulate", str(plan), "--trace", str(trace))
    assert code == 0
    assert "step time" in out and "busiest links" in out and "peak memory" in out
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)
    for e in events:
        if e.get("ph") == "X":
            assert {"name", "ts", "dur", "pid", "tid"} <= e.keys()


BAD_INPUTS = [
    (["trace", "no/such/file.py:make"], "no/such/file.py"),
    (["opt", "missing.wf", "-p", "dce"], "missing.wf"),
    (["compile", "hf:gpt2-tiny", "--wafer", "no-such-wafer"], "no-such-wafer"),
    (["simulate", "missing.json"], "missing.json"),
]


@pytest.mark.parametrize(("argv", "needle"), BAD_INPUTS)
def test_bad_inputs_one_clear_message(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == EXIT_USER_ERROR
    assert needle in err
    assert "Traceback" not in err
    assert err.startswith("waferflow: error: ")


def test_factory_missing_lists_callables(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = tmp_path / "m.py"
    model.write_text("import torch\ndef build():\n    return torch.nn.Linear(2, 2)\n")
    code, _, err = run(capsys, "trace", f"{model}:nope")
    assert code == EXIT_USER_ERROR
    assert "nope" in err and "build" in err


def test_model_that_fails_to_trace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = tmp_path / "broken.py"
    model.write_text(
        "import torch\n"
        "class Broken(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        raise RuntimeError('shape mismatch in my layer')\n"
        "def make():\n"
        "    return Broken(), (torch.zeros(2, 2),)\n"
    )
    code, _, err = run(capsys, "trace", f"{model}:make")
    assert code == EXIT_USER_ERROR
    assert "shape mismatch" in err and "Traceback" not in err


def test_malformed_ir_reports_line_and_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.wf"
    bad.write_text(
        'graph @g {\n  %x = input "x" : f32[2] fwd\n  %y = frobnicate %x : f32[2] fwd\n}\n'
    )
    code, _, err = run(capsys, "opt", str(bad), "-p", "dce")
    assert code == EXIT_USER_ERROR
    assert f"{bad}:3:" in err and "frobnicate" in err


@pytest.mark.parametrize(
    ("pipeline", "needle"),
    [("dce,no-such-pass", "no-such-pass"), ("fuse-elementwise{maxx=3}", "maxx"),
     ("fuse-elementwise{max=abc}", "max")],
)  # fmt: skip
def test_bad_pipeline(
    pipeline: str, needle: str, cnn_ir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "opt", str(cnn_ir), "-p", pipeline)
    assert code == EXIT_USER_ERROR
    assert needle in err and "Traceback" not in err


def _step_ms(out: str) -> str:
    return next(line for line in out.splitlines() if "step time" in line).split()[-2]


def test_compile_seed_plan_on_amcoda(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A seed plan goes through the general path on amcoda; its plan simulates again to
    the same step time, and --emit amcoda writes the seed's programs for it, whose
    cycle model gives the batch time of docs/amcoda.md (6,521,360 ns)."""
    exp, plan = tmp_path / "exp", tmp_path / "p.json"
    code, out, _ = run(
        capsys, "compile", "cnn:amcoda", "--wafer", "amcoda", "--mode", "train",
        "--plan", "layers=ddt,ways=4", "-o", str(plan), "--emit", "amcoda",
        "--emit-dir", str(exp),
    )  # fmt: skip
    assert code == 0, out
    assert "layers=ddts,ways=4" in out and "cut=layer" in out  # the resolved general plan
    assert "batch time 6.521360 ms" in out
    compiled_ms = _step_ms(out)
    assert (exp / "script" / "host_1.txt").is_file()
    assert (exp / "settings.json").is_file() and (exp / "predicted.json").is_file()
    code, out, _ = run(capsys, "simulate", str(plan))
    assert code == 0 and _step_ms(out) == compiled_ms
    code, out, _ = run(capsys, "check-amcoda", str(exp))
    assert code == 0, out


def test_seed_plan_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(
        capsys, "compile", "cnn:amcoda", "--wafer", "amcoda", "--mode", "train",
        "--plan", "layers=ddx,ways=4",
    )  # fmt: skip
    assert code == EXIT_USER_ERROR and "Traceback" not in err and "'x'" in err
    # a general plan with no seed template: conv3 on one actor
    code, _, err = run(
        capsys, "compile", "cnn:amcoda", "--wafer", "amcoda", "--mode", "train",
        "--plan", "layers=dd,ways=4", "--emit", "amcoda", "--emit-dir", str(tmp_path / "x"),
    )  # fmt: skip
    assert code == EXIT_USER_ERROR and "no seed-machine program" in err
    code, _, err = run(
        capsys, "compile", "cnn:amcoda", "--wafer", "mesh4x4", "--mode", "train", "--plan",
        "pipe", "--emit", "amcoda", "--emit-dir", str(tmp_path / "y"),
    )  # fmt: skip
    assert code == EXIT_USER_ERROR and "seed machine" in err
    code, _, err = run(capsys, "compile", "cnn:amcoda", "--wafer", "amcoda", "--emit", "amcoda")
    assert code == EXIT_USER_ERROR and "--emit-dir" in err


def test_compile_parallel_plan_places_with_cpsat(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan, html = tmp_path / "plan.json", tmp_path / "report.html"
    traces = [tmp_path / "compile.json", tmp_path / "simulate.json"]
    code, out, _ = run(
        capsys, "compile", "hf:gpt2-tiny", "--wafer", "mesh16x16", "--mode", "train",
        "--batch", "8", "--plan", "dp=2,tp=4,pp=2,microbatches=4", "--place-time", "2",
        "-o", str(plan), "--trace", str(traces[0]), "--link-tracks", "--html", str(html),
    )  # fmt: skip
    assert code == 0, out
    for needle in ("strips (default)", "snake", "cp-sat", "solver (floorplan)", "gap", "bound"):
        assert needle in out
    assert "memory as planned" in out and "step time" in out
    page = html.read_text()
    assert page.count("<table>") == 2 and page.count("<img ") == 4 and 'class="kept"' in page
    # the saved plan keeps its ranks: simulate's trace names them as compile's does
    code, out, _ = run(capsys, "simulate", str(plan), "--trace", str(traces[1]), "--link-tracks")
    assert code == 0, out
    names = []
    for trace in traces:
        events = json.loads(trace.read_text())["traceEvents"]
        assert {"s", "f", "C", "X", "M"} <= {e["ph"] for e in events}
        assert any(e["ph"] == "X" and e["pid"] == 2 for e in events)  # the link tracks
        names.append(sorted(e["args"]["name"] for e in events
                            if e["name"] == "thread_name" and e["pid"] == 1))  # fmt: skip
    assert names[0] == names[1] and len(names[0]) == 16
    assert "stage 1 dp1 tp3 · node" in " ".join(names[0])


def test_parallel_plan_that_does_not_fit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "compile", "hf:gpt2", "--wafer", "mesh4x4", "--mode", "infer", "--batch", "1",
        "--seq", "64", "--plan", "tp=4,pp=2", "--place", "none",
    )  # fmt: skip
    assert code == EXIT_USER_ERROR and "Traceback" not in err
    assert "does not fit" in err and "needs" in err


def test_place_takes_plan_auto(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "place", "hf:gpt2-tiny", "--wafer", "mesh16x16", "--mode", "train",
        "--batch", "8", "--plan", "auto", "--place-time", "1",
    )  # fmt: skip
    assert code == 0, out
    assert "plan auto: kept " in out and "placement of plan " in out and "span=" in out

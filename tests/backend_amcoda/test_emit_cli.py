"""`waferflow emit` and `waferflow check-amcoda` through ``cli_amcoda``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.backend_amcoda.test_emit import tiny_cnn
from waferflow.backend_amcoda import read_experiment
from waferflow.backend_amcoda.report import cnn_from_json, cnn_to_json, compile_seed_plan
from waferflow.cli_amcoda import add_amcoda_commands, load_cnn, main
from waferflow.errors import ConfigError


@pytest.fixture
def tiny_json(tmp_path: Path) -> Path:
    f = tmp_path / "tiny.json"
    f.write_text(json.dumps(cnn_to_json(tiny_cnn())))
    return f


def test_commands_join_a_parser() -> None:
    parser = argparse.ArgumentParser(prog="waferflow")
    add_amcoda_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["emit", "pipe", "--target", "amcoda", "-o", "x", "--seed", "3"])
    assert (args.plan, args.output, args.seed, args.mem_ports, args.model) == (
        "pipe", "x", 3, None, "cnn:amcoda",
    )  # fmt: skip
    args = parser.parse_args(["check-amcoda", "x", "--static"])
    assert args.exp_dir == "x" and args.static


def test_emit_then_check(
    tmp_path: Path, tiny_json: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "exp"
    argv = ["emit", "layers=dt,ways=2", "--target", "amcoda", "-o", str(out),
            "--model", str(tiny_json), "--mem-ports", "2", "--seed", "7"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "batch time" in text and "check-amcoda: 0 error(s), 0 warning(s)" in text
    settings = json.loads((out / "settings.json").read_text())
    assert settings["SU_write_num"] == 2 and settings["test_actor_num"] == 7
    expected = compile_seed_plan(tiny_cnn(), "layers=dt,ways=2", mem_ports=2)
    assert read_experiment(out) == expected.experiment
    assert json.loads((out / "predicted.json").read_text())["seed"] == 7
    assert main(["check-amcoda", str(out)]) == 0
    assert "clean" in capsys.readouterr().out
    # the folder's predicted.json is a plan file: emit it again
    again = tmp_path / "again"
    assert main(["emit", str(out / "predicted.json"), "-o", str(again), "--no-check"]) == 0
    assert read_experiment(again).programs == expected.experiment.programs


def test_check_fails_with_the_issues_listed(
    tmp_path: Path, tiny_json: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "exp"
    assert main(["emit", "pipe", "-o", str(out), "--model", str(tiny_json), "--no-check"]) == 0
    capsys.readouterr()
    host = out / "script" / "host_3.txt"
    host.write_text(host.read_text().replace("-1\n", ""))
    assert main(["check-amcoda", str(out)]) == 2
    text = capsys.readouterr().out
    assert "host_3.txt:" in text and "[idle-record]" in text and "1 error(s)" in text


def test_user_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emit", "layers=ddd,ways=5", "-o", str(tmp_path / "x")]) == 2
    assert "does not divide the batch" in capsys.readouterr().err
    assert main(["check-amcoda", str(tmp_path / "nothing")]) == 2
    assert "no such experiment folder" in capsys.readouterr().err
    bundle = tmp_path / "plan.json"
    bundle.write_text(json.dumps({"format": "waferflow.compiled", "version": 1}))
    assert main(["emit", str(bundle), "-o", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err
    assert "compiled actor plan, not a seed plan" in err and "--emit amcoda --emit-dir" in err
    with pytest.raises(SystemExit):
        main(["emit", "pipe", "-o", "x", "--mem-ports", "17"])


def test_models_and_plan_files() -> None:
    assert load_cnn("cnn:amcoda", 8).batch == 8
    assert cnn_from_json(cnn_to_json(tiny_cnn())) == tiny_cnn()
    with pytest.raises(ConfigError, match=r"model.layers\[0\].kind"):
        cnn_from_json({"batch": 4, "layers": [{"kind": "lstm"}]})
    with pytest.raises(ConfigError, match=r"model\.batch"):
        cnn_from_json({"batch": "4", "layers": []})
    with pytest.raises(ConfigError, match=r"layers\[0\].k must be an integer"):
        cnn_from_json({"batch": 4, "layers": [dict(cnn_to_json(tiny_cnn())["layers"][0], k=1.5)]})


def test_saved_plan_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = compile_seed_plan(tiny_cnn(), "gpipe=2", mem_ports=1)
    plan = r.save_plan(tmp_path / "p.json")
    assert main(["emit", str(plan), "-o", str(tmp_path / "e")]) == 0
    assert read_experiment(tmp_path / "e") == r.experiment
    assert "MemWidth 1" in capsys.readouterr().out


def test_compile_from_a_traced_graph() -> None:
    frontend = pytest.importorskip("waferflow.frontend")
    from waferflow.backend_amcoda import seed_cnn_layers
    from waferflow.errors import PlanError

    b = frontend.load_model("cnn:amcoda", batch=8)
    graph = frontend.trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn)
    traced = compile_seed_plan(graph, "layers=ddd,ways=2")
    assert (
        traced.experiment == compile_seed_plan(seed_cnn_layers(8), "layers=ddd,ways=2").experiment
    )
    with pytest.raises(PlanError, match="stem"):
        load_cnn("cnn:resnet-tiny")

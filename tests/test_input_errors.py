"""Inputs that used to be ignored or misreported, each now one clear message (exit 2):
an optimizer in inference, an expert load skew on a model without experts, a file
that is not a plan (or not IR) given to the command reading one, and a saved plan's
coarse view given as a TOML wafer file, whose hint must work when followed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from torch import nn

import waferflow as wf
from tests.fuzz.formats import GOLDEN, seed_plan
from waferflow.api import CompiledPlan, load_plan
from waferflow.cli import EXIT_USER_ERROR, main
from waferflow.errors import ConfigError, PlanError
from waferflow.frontend import trace, trace_model
from waferflow.ir.plan import plan_to_json
from waferflow.ir.target import get_wafer

OPTIMIZER_MESSAGE = (
    "waferflow: error: --optimizer adamw applies to training only, and this is --mode infer "
    "(no optimizer update is traced), so it would be ignored: add --mode train, or drop "
    "--optimizer (in Python: mode='train', or leave optimizer out)\n"
)
SKEW_MESSAGE = (
    "waferflow: error: --moe-skew 1.5 sizes mixture-of-experts layers, and hf:gpt2 has no "
    "experts, so it would be ignored: drop --moe-skew, or use a model with experts "
    "(e.g. hf:mixtral-tiny; in Python: leave moe_skew out)\n"
)
MODEL_COMMANDS = [["trace"], ["compile", "--wafer", "mesh4x4"], ["place", "--wafer", "mesh4x4"]]


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("waferflow: error: ") and "Traceback" not in err
    assert len(err.splitlines()) == 1
    return err


# --- 1. --optimizer only shapes a training step -------------------------------------------


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_an_optimizer_in_inference_is_refused_by_every_model_command(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command[0], "hf:gpt2-tiny", *command[1:], "--optimizer", "adamw"]
    assert _refused(capsys, *argv) == OPTIMIZER_MESSAGE
    assert _refused(capsys, *argv, "--mode", "infer") == OPTIMIZER_MESSAGE


def test_an_optimizer_in_inference_is_refused_by_the_python_api() -> None:
    with pytest.raises(ConfigError, match="--optimizer adamw applies to training only"):
        wf.compile("hf:gpt2-tiny", wafer="mesh4x4", optimizer="adamw")
    with pytest.raises(ConfigError, match="applies to training only"):
        trace_model("hf:gpt2-tiny", optimizer="adamw")
    with pytest.raises(ConfigError, match="applies to training only"):
        trace(nn.Linear(4, 2), (torch.randn(3, 4),), optimizer="adamw")


def test_the_default_optimizer_and_training_are_accepted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["trace", "hf:gpt2-tiny", "--optimizer", "sgd"]) == 0
    g = trace(nn.Linear(4, 2), (torch.randn(3, 4),), mode="train", optimizer="adamw")
    assert any(op.attrs.get("name") == "adamw.m.weight" for op in g.ops)


# --- 2. --moe-skew only sizes experts -----------------------------------------------------


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_a_skew_on_a_model_without_experts_is_refused(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command[0], "hf:gpt2", *command[1:], "--moe-skew", "1.5"]
    assert _refused(capsys, *argv) == SKEW_MESSAGE


def test_a_skew_without_experts_is_refused_by_the_python_api() -> None:
    with pytest.raises(ConfigError, match="cnn:amcoda has no experts"):
        wf.compile("cnn:amcoda", wafer="mesh4x4", moe_skew=2.0)
    with pytest.raises(ConfigError, match="hf:gpt2-tiny has no experts"):
        trace_model("hf:gpt2-tiny", moe_skew=1.25)
    with pytest.raises(ConfigError, match="has no experts"):  # a module: counted when traced
        trace(nn.Linear(4, 2), (torch.randn(3, 4),), moe_skew=1.5)


def test_expert_counts_come_from_the_zoo_without_building_the_model() -> None:
    from waferflow.frontend.catalog import expert_count

    assert expert_count("hf:mixtral-tiny") == 4 and expert_count("hf:mixtral-8x7b") == 8
    assert expert_count("hf:gpt2") == 0 and expert_count("cnn:amcoda") == 0
    assert expert_count("model.py:build") is None  # known once built


def test_the_uniform_skew_and_models_with_experts_are_accepted() -> None:
    trace_model("hf:gpt2-tiny", moe_skew=1.0)
    g = trace_model("hf:mixtral-tiny", moe_skew=1.5)
    assert {op.attrs.get("skew") for op in g.ops if op.kind.value == "moe_dispatch"} == {1.5}


# --- 3. a file that is not a plan (or not IR) -----------------------------------------------

HOW = "a plan file is what `waferflow compile MODEL --wafer WAFER -o PLAN.json` writes"


def test_ir_text_given_as_a_plan_names_the_command_that_makes_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ir = tmp_path / "x.wf"
    assert main(["trace", "hf:gpt2-tiny", "-o", str(ir)]) == 0
    capsys.readouterr()
    for command in (["simulate", str(ir)], ["viz", str(ir), "-o", str(tmp_path / "p.png")]):
        assert _refused(capsys, *command) == (
            f"waferflow: error: {ir}: this looks like waferflow IR text (a traced graph), not "
            "a compiled plan: make one from its model with `waferflow compile hf:gpt2-tiny "
            "--wafer WAFER -o PLAN.json` (with the --mode, --batch and --seq it was traced "
            "with)\n"
        )


def _trace_file(path: Path) -> None:
    report = CompiledPlan(seed_plan(), get_wafer("mesh4x4")).simulate()
    report.to_chrome_trace(path)


def _sweep_folder(path: Path) -> None:
    path.mkdir()
    (path / "results.jsonl").write_text('{"key":"k","row":{"index":0}}\n', encoding="utf-8")


WRONG_FILES = [
    ("empty.json", lambda p: p.write_text(""), "an empty file"),
    ("blank.json", lambda p: p.write_text(" \n\n"), "an empty file"),
    ("folder", lambda p: p.mkdir(), "a folder"),
    ("pic.png", lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), "a PNG picture"),
    ("blob.json", lambda p: p.write_bytes(bytes(range(256)) * 4), "a binary file"),
    ("zeros.json", lambda p: p.write_bytes(b"\0" * 64), "a binary file"),
    ("trace.json", _trace_file, "a Chrome / Perfetto trace (what --trace writes)"),
    ("out.sweep", _sweep_folder, "a sweep's results folder"),
    (
        "results.jsonl",
        lambda p: p.write_text('{"key":"a","row":{}}\n{"key":"b","row":{}}\n'),
        "a sweep's results journal",
    ),
    (
        "results.csv",
        lambda p: p.write_text("key,index,model\nk,0,hf:gpt2\n"),
        "a sweep's results table (results.csv)",
    ),
    (
        "wafer.toml",
        lambda p: p.write_text('preset = "mesh4x4"\n[wafer]\nname = "w"\n'),
        "a wafer description (TOML)",
    ),
    ("sweep.toml", lambda p: p.write_text('[job]\nmodel = "hf:gpt2-tiny"\n'), "a sweep file"),
    (
        "g.json",
        lambda p: p.write_text((GOLDEN / "mlp_train.json").read_text()),
        "waferflow IR as JSON (a traced graph)",
    ),
    (
        "other.json",
        lambda p: p.write_text('{"a": 1, "b": 2}'),
        "a JSON object without a plan's or graph's fields (it has: a, b)",
    ),
    ("list.json", lambda p: p.write_text("[1, 2]"), "a JSON array"),
    ("page.html", lambda p: p.write_text("<!DOCTYPE html><html></html>"), "an HTML page"),
]


@pytest.mark.parametrize(("name", "make", "what"), WRONG_FILES, ids=[w[0] for w in WRONG_FILES])
def test_a_file_that_is_not_a_plan_says_what_it_looks_like(
    name: str, make, what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    make(path)
    for command in (["simulate", str(path)], ["viz", str(path), "-o", str(tmp_path / "v.png")]):
        err = _refused(capsys, *command)
        assert err.startswith(f"waferflow: error: {path}: this looks like {what}")
        assert "not a compiled plan: " in err and "malformed JSON" not in err
        assert HOW in err or "make one from its model" in err


def test_a_plan_given_to_opt_says_it_is_a_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = CompiledPlan(seed_plan(), get_wafer("mesh4x4")).save(tmp_path / "p.json")
    err = _refused(capsys, "opt", str(plan), "-p", "dce")
    assert err == (
        f"waferflow: error: {plan}: this looks like a compiled plan (what `waferflow compile "
        "-o` writes), not waferflow IR: IR is what `waferflow trace MODEL -o FILE.wf` writes "
        "(text; JSON for a .json file); the plan goes to `waferflow simulate` or `waferflow "
        "viz`\n"
    )
    empty = tmp_path / "e.wf"
    empty.write_text("")
    assert "this looks like an empty file, not waferflow IR" in _refused(
        capsys, "opt", str(empty), "-p", "dce"
    )


def test_a_broken_plan_still_names_the_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = CompiledPlan(seed_plan(), get_wafer("mesh4x4")).save(tmp_path / "p.json")
    text = plan.read_text(encoding="utf-8")
    plan.write_text(text.replace('"version": 1,', '"version": 1', 1), encoding="utf-8")
    assert re.match(r"waferflow: error: .*p\.json:4:2: malformed JSON: Expecting ','", _refused(capsys, "simulate", str(plan)))  # fmt: skip
    plan.write_text(text[: len(text) // 2], encoding="utf-8")  # cut short
    assert "malformed JSON" in _refused(capsys, "simulate", str(plan))
    doc = json.loads(text)
    del doc["plan"]["actors"]  # a plan with a field missing is still a plan
    plan.write_text(json.dumps(doc), encoding="utf-8")
    assert "$.plan: missing field 'actors'" in _refused(capsys, "simulate", str(plan))


# --- 4. a coarse view of a TOML wafer -------------------------------------------------------


def _hinted_wafer(err: str) -> str:
    match = re.search(r"run it on that view: --wafer ([^\s;]+)", err)
    assert match, err
    return match[1]


@pytest.fixture(scope="module")
def coarse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A wafer TOML file and a plan compiled on its 4 x 4 coarse view."""
    folder = tmp_path_factory.mktemp("view")
    toml = folder / "plain.toml"
    toml.write_text('preset = "mesh16x16"\n', encoding="utf-8")
    plan = folder / "plan.json"
    argv = ["compile", "hf:gpt2-tiny", "--wafer", str(toml), "--coarsen", "4", "-q"]
    assert main([*argv, "-o", str(plan)]) == 0
    return toml, plan


def test_the_view_hint_for_a_toml_wafer_works_when_followed(
    coarse: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml, plan = coarse
    capsys.readouterr()
    for extra in ([], ["--kind", "placement", "-o", str(tmp_path / "p.png")]):
        command = "viz" if extra else "simulate"
        err = _refused(capsys, command, str(plan), "--wafer", str(toml), *extra)
        assert err == (
            "waferflow: error: plan 'hf:gpt2-tiny' was made for wafer view 'plain@4x', not "
            f"'plain'; run it on that view: --wafer {toml}@4x (load_plan(..., "
            f"wafer='{toml}@4x')); or leave the wafer out: the plan file holds its own\n"
        )
        assert main([command, str(plan), "--wafer", _hinted_wafer(err), *extra]) == 0
        capsys.readouterr()  # the run's report and progress
    assert load_plan(plan, wafer=f"{toml}@4x").wafer.name == "plain@4x"
    with pytest.raises(PlanError, match=re.escape(f"--wafer {toml}@4x")):
        load_plan(plan, wafer=toml)  # a Path: the same hint
    err = _refused(capsys, "simulate", str(plan), "--wafer", f"{toml}@2x")  # the wrong view
    assert _hinted_wafer(err) == f"{toml}@4x"


def test_the_view_hint_for_a_preset_names_the_preset_view(
    coarse: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, plan = coarse
    capsys.readouterr()
    err = _refused(capsys, "simulate", str(plan), "--wafer", "mesh4x4")  # another wafer
    assert "--wafer PATH@4x, PATH being the wafer file of 'plain'" in err
    folder = plan.parent
    preset_plan = folder / "preset.json"
    argv = ["compile", "hf:gpt2-tiny", "--wafer", "mesh16x16", "--coarsen", "4", "-q"]
    assert main([*argv, "-o", str(preset_plan)]) == 0
    capsys.readouterr()
    err = _refused(capsys, "simulate", str(preset_plan), "--wafer", "mesh16x16")
    assert _hinted_wafer(err) == "mesh16x16@4x"
    assert main(["simulate", str(preset_plan), "--wafer", "mesh16x16@4x", "-q"]) == 0


def test_the_view_hint_in_python_names_the_file_view_and_coarsen(
    coarse: tuple[Path, Path],
) -> None:
    """A plan of a wafer file's view simulated on the file's whole wafer, in Python: the
    hint cannot be --wafer plain@4x (no such preset); following it works."""
    from waferflow.backend_sim import simulate

    toml, plan = coarse
    made = load_plan(plan)
    whole = get_wafer(toml)
    with pytest.raises(PlanError) as info:
        simulate(made.plan, whole)
    msg = str(info.value)
    assert "--wafer plain@4x" not in msg
    assert "--wafer PATH@4x, PATH being the wafer file of 'plain'" in msg
    assert "wafer.coarsen(4)" in msg
    assert simulate(made.plan, whole.coarsen(4)).step_time_ps > 0


def test_a_bare_plan_of_a_toml_wafer_asks_for_the_file(
    coarse: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bare plan (no wafer inside) names its wafer only: a wafer file's name is no
    preset, so the message asks for the file, and giving it works."""
    toml, plan = coarse
    bare = tmp_path / "bare.json"
    bare.write_text(plan_to_json(load_plan(plan).plan), encoding="utf-8")
    capsys.readouterr()
    err = _refused(capsys, "simulate", str(bare))
    assert err == (
        f"waferflow: error: {bare}: this bare plan names its wafer only, 'plain@4x', which is "
        "not a preset: give the wafer file it was made for, --wafer PATH.toml@4x "
        "(load_plan(..., wafer='PATH.toml@4x')); plans saved by `waferflow compile -o` or "
        "CompiledPlan.save carry their wafer\n"
    )
    assert main(["simulate", str(bare), "--wafer", f"{toml}@4x"]) == 0

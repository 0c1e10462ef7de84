"""Every file the command line reads goes through one reader: bad bytes, huge numbers,
deep nesting, missing or mistyped fields all end in one ``waferflow: error:`` line
naming the file and the field (exit 2), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz.formats import GOLDEN, seed_plan
from waferflow.api import CompiledPlan
from waferflow.cli import EXIT_USER_ERROR, main
from waferflow.ir.target import get_wafer


@pytest.fixture
def bundle(tmp_path: Path) -> dict:
    path = tmp_path / "good.json"
    CompiledPlan(seed_plan(), get_wafer("mesh4x4"), notes=("n",)).save(path)
    return json.loads(path.read_text(encoding="utf-8"))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("waferflow: error: ") and "Traceback" not in err
    assert len(err.splitlines()) <= 3  # one message, not a dump of the input
    return err


def test_bytes_that_are_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ir = tmp_path / "g.wf"
    ir.write_bytes((GOLDEN / "mlp_train.ir").read_bytes().replace(b'"x"', b'"x\xff"', 1))
    assert "g.wf:2:" in _run(capsys, "opt", str(ir), "-p", "dce")
    plan = tmp_path / "p.json"
    plan.write_bytes(b'{"format": "waferflow.compiled\xfe"}')
    assert "p.json:1:31: not UTF-8 text: byte 0xfe (offset 30)" in _run(
        capsys, "simulate", str(plan)
    )


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d.pop("plan"), "$: missing field 'plan'"),
        (lambda d: d.pop("wafer_toml"), "$: missing field 'wafer_toml'"),
        (lambda d: d.update(plan=[1]), "$.plan: expected an object, found an array"),
        (lambda d: d.update(wafer_toml=3), "$.wafer_toml: expected the wafer as TOML text"),
        (lambda d: d.update(notes="one"), "$.notes: expected an array of strings"),
        (lambda d: d.update(notes=[1]), "$.notes[0]: expected a string"),
        (lambda d: d["plan"]["actors"][0].update(core=10**30), "$.plan.actors[0].core: "),
        (lambda d: d["plan"]["messages"][0].update(route="x"), "$.plan.messages[0].route"),
        (lambda d: d.update(extra=1), "$.extra: unknown field"),
    ],
)
def test_a_plan_bundle_with_a_bad_field_names_it(
    edit, needle: str, bundle: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(bundle)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(bundle), encoding="utf-8")
    assert needle in _run(capsys, "simulate", str(path))


def test_numbers_too_long_to_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    path.write_text('{"version": ' + "9" * 5000 + "}", encoding="utf-8")
    assert "an integer of 5000 digits" in _run(capsys, "simulate", str(path))
    graph = json.loads((GOLDEN / "mlp_train.json").read_text(encoding="utf-8"))
    graph["ops"][0]["attrs"]["big"] = "BIG"
    ir = tmp_path / "g.json"
    ir.write_text(json.dumps(graph).replace('"BIG"', "9" * 5000), encoding="utf-8")
    assert "an integer of 5000 digits" in _run(capsys, "opt", str(ir), "-p", "dce")


def test_an_ir_json_attribute_of_the_wrong_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = json.loads((GOLDEN / "mlp_train.json").read_text(encoding="utf-8"))
    graph["ops"][0]["attrs"]["odd"] = {"float": [1]}  # was: TypeError: unhashable type
    ir = tmp_path / "g.json"
    ir.write_text(json.dumps(graph), encoding="utf-8")
    assert "$.ops[0].attrs.odd: expected an attribute value" in _run(
        capsys, "opt", str(ir), "-p", "dce"
    )


def test_deep_nesting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ir = tmp_path / "g.wf"
    text = (GOLDEN / "mlp_train.ir").read_text(encoding="utf-8")
    ir.write_text(text.replace("{transpose_b=true}", "{a=" + "[" * 5000 + "]" * 5000 + "}", 1))
    assert "lists nested more than 100 deep" in _run(capsys, "opt", str(ir), "-p", "dce")
    toml = tmp_path / "w.toml"
    toml.write_text('preset = "mesh4x4"\n[faults]\ndead_cores = ' + "[" * 3000 + "]" * 3000)
    assert "nested too deeply" in _run(capsys, "wafers", "show", str(toml))

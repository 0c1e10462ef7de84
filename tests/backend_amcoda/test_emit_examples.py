"""examples/amcoda_plans.py --emit: the nine seed plans and three new ones, full size."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from waferflow.backend_amcoda import read_experiment, seed_cnn_layers

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "amcoda_plans.py"


@pytest.fixture(scope="module")
def example():  # the example script as a module
    spec = importlib.util.spec_from_file_location("amcoda_plans_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_emit_writes_twelve_checked_experiments(example, tmp_path: Path) -> None:
    out = tmp_path / "exp"
    assert example.main(["--emit", str(out)]) == 0
    plans = example.emit_plans(seed_cnn_layers())
    assert [name for name, _, _ in plans] == [
        "pipe", "gpipe2", "gpipe4", "ddd2", "ddt2", "dtt2", "ddd4", "ddt4", "dtt4",
        "ddd3_b48", "gpipe3_b48", "cnn4_dtdd2",
    ]  # fmt: skip
    for name, cnn, plan in plans:
        root = out / name
        expected = example.compile_plan(cnn, plan, 4)
        assert read_experiment(root) == expected.experiment  # round trip
        settings = json.loads((root / "settings.json").read_text())
        predicted = json.loads((root / "predicted.json").read_text())
        assert settings["test_actor_num"] == expected.experiment.n_actors
        assert predicted["batch_ns"] == expected.batch_ns
        assert predicted["plan"] == plan
    ddd3 = json.loads((out / "ddd3_b48" / "predicted.json").read_text())
    assert ddd3["model"]["batch"] == 48 and len(ddd3["actors"]) == 12
    assert (
        len(json.loads((out / "cnn4_dtdd2" / "predicted.json").read_text())["model"]["layers"]) == 7
    )

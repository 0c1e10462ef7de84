"""The Python API: compile, save, load, simulate gives the same report; reprs; errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import waferflow as wf
from waferflow.errors import WaferflowError


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def compiled() -> wf.CompiledPlan:
    return wf.compile(MLP(), (torch.randn(8, 64),), wafer="mesh4x4", mode="train")


def test_compile_module_in_three_lines(compiled: wf.CompiledPlan) -> None:
    report = compiled.simulate()
    assert report.step_time > 0
    assert "step time" in str(report)
    assert "CompiledPlan" in repr(compiled) and "mesh4x4" in repr(compiled)
    assert "Report" in repr(report)
    assert [t.step for t in report.timings][:3] == ["trace", "passes", "lower"]


def test_save_load_simulate_round_trip(compiled: wf.CompiledPlan, tmp_path: Path) -> None:
    path = compiled.save(tmp_path / "mlp.plan.json")
    again = wf.load_plan(path)
    assert again.plan == compiled.plan
    assert again.wafer == compiled.wafer
    a, b = compiled.simulate(), again.simulate()
    assert a.result.step_time_ps == b.result.step_time_ps
    assert a.result.summary() == b.result.summary()
    # the same inputs give the same bytes
    path2 = compiled.save(tmp_path / "again.json")
    assert path.read_bytes() == path2.read_bytes()


def test_ranks_are_saved_with_the_plan(compiled: wf.CompiledPlan, tmp_path: Path) -> None:
    import json
    from dataclasses import replace

    from waferflow.parallel.ranks import CoreRank

    ranks = {c: CoreRank(0, i, len(compiled.plan.cores), tp=i)
             for i, c in enumerate(compiled.plan.cores)}  # fmt: skip
    path = replace(compiled, ranks=ranks).save(tmp_path / "ranked.json")
    assert wf.load_plan(path).ranks == ranks
    assert wf.load_plan(compiled.save(tmp_path / "plain.json")).ranks is None
    doc = json.loads(path.read_text())
    doc["ranks"] = {"0": "nonsense"}
    path.write_text(json.dumps(doc))
    with pytest.raises(
        WaferflowError, match=r"\$\.ranks\.0: expected \[stage, rank, ranks, dp, tp\]"
    ):
        wf.load_plan(path)


def test_report_html_draws_its_pictures(compiled: wf.CompiledPlan, tmp_path: Path) -> None:
    page = compiled.simulate().to_html(tmp_path / "out" / "r.html")
    assert sorted(p.name for p in (tmp_path / "out" / "r_files").iterdir()) == [
        "links.png", "memory.png", "placement.png", "timeline.png",
    ]  # fmt: skip
    text = page.read_text()
    assert text.count("<img ") == 4 and "<table>" not in text  # no placement or parallel plan


def test_report_html_to_a_folder_is_one_clear_error(
    compiled: wf.CompiledPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before a picture is drawn (it raised ValueError: '.' has an empty name)."""
    monkeypatch.chdir(tmp_path)
    report = compiled.simulate()
    for where in (".", tmp_path):
        with pytest.raises(WaferflowError, match="is a directory, not a file"):
            report.to_html(where)
    assert list(tmp_path.iterdir()) == []


def test_ir_after_each_pass(compiled: wf.CompiledPlan) -> None:
    after_dce = compiled.ir_after("dce")
    after_fuse = compiled.ir_after("fuse-elementwise")
    assert len(after_fuse.ops) <= len(after_dce.ops)
    with pytest.raises(WaferflowError, match="no IR recorded after pass 'place'"):
        compiled.ir_after("place")


def test_wafer_accepts_preset_toml_and_object(tmp_path: Path) -> None:
    toml = tmp_path / "w.toml"
    toml.write_text('preset = "mesh4x4"\n[wafer]\nname = "mine"\n[link]\nbandwidth = 2e11\n')
    for wafer in ("mesh4x4", toml, wf.get_wafer("mesh4x4")):
        plan = wf.compile(MLP(), (torch.randn(8, 64),), wafer=wafer)
        assert plan.wafer.rows == 4
    assert wf.compile(MLP(), (torch.randn(8, 64),), wafer=toml).wafer.name == "mine"


def test_bad_arguments() -> None:
    with pytest.raises(WaferflowError, match="example_inputs"):
        wf.compile(MLP(), wafer="mesh4x4")
    with pytest.raises(WaferflowError, match="nope"):
        wf.compile(MLP(), (torch.randn(8, 64),), wafer="nope")
    with pytest.raises(WaferflowError, match="no-such-pass"):
        wf.compile(MLP(), (torch.randn(8, 64),), wafer="mesh4x4", passes="dce,no-such-pass")
    with pytest.raises(WaferflowError, match="no such plan file"):
        wf.load_plan("/nonexistent/plan.json")


@pytest.mark.parametrize("k", [0, -3, 1.5, True])
def test_a_coarsen_factor_below_one_is_an_error_not_one(k: object) -> None:
    from waferflow.api import resolve_wafer
    from waferflow.errors import ConfigError

    with pytest.raises(ConfigError, match="coarsen must be an integer >= 1"):
        resolve_wafer("mesh4x4", k)  # type: ignore[arg-type]
    assert resolve_wafer("mesh4x4", 2).name == "mesh4x4@2x"

"""The same command gives the same plan, byte for byte, and the same report (wall-clock
figures aside) on a quiet machine and on one whose cores are all busy: every solver
loop stops on deterministic work, never on the clock (waferflow/mapper/lns.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.busy import busy_cores
from waferflow.cli import main

MLP = """
import torch
from torch import nn


def make(batch=4):
    layers = []
    for _ in range(4):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    return nn.Sequential(*layers), (torch.randn(batch, 32),)
"""

# three models, each through the placement search (CP-SAT floorplan + rank LNS)
COMMANDS = {
    "mlp": ["{mlp}:make", "--mode", "train", "--plan", "dp=2,tp=2,pp=4,microbatches=2"],
    "gpt2": ["hf:gpt2-tiny", "--mode", "train", "--batch", "4", "--plan", "dp=2,tp=2,pp=2"],
    "resnet": ["cnn:resnet-tiny", "--batch", "4", "--plan", "dp=2,tp=4,pp=2"],
}
WALL = [  # the wall-clock figures of a report, and the paths written
    re.compile(r"\(\d+(\.\d+)? s wall\)"),
    re.compile(r"placement wall time: .*"),
    re.compile(r"compile steps: .*"),
    re.compile(r"wrote .*"),
]


def _compile(argv: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    report = out.with_suffix(".md")
    code = main(["compile", *argv, "--wafer", "mesh16x16", "--place-time", "0.5",
                 "-o", str(out), "--report", str(report)])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0, text
    text += report.read_text(encoding="utf-8")
    for pattern in WALL:
        text = pattern.sub("<wall>", text)
    return text


@pytest.mark.parametrize("model", sorted(COMMANDS))
def test_the_same_plan_and_report_on_a_busy_machine(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mlp.py").write_text(MLP, encoding="utf-8")
    argv = [a.format(mlp=tmp_path / "mlp.py") for a in COMMANDS[model]]
    quiet = _compile(argv, tmp_path / "quiet.json", capsys)
    with busy_cores():
        loaded = _compile(argv, tmp_path / "loaded.json", capsys)
    assert (tmp_path / "quiet.json").read_bytes() == (tmp_path / "loaded.json").read_bytes()
    assert quiet == loaded
    assert "lns:" in quiet  # the large-neighbourhood search ran

"""The discipline every CP-SAT call shares (waferflow/mapper/cpsat.py): nothing stops on
wall-clock time, so a machine loaded by other processes gives the same result byte for
byte; a hang guard on CPU time stops a solve that makes no progress and fails loudly,
rather than returning a result cut short (which would differ between runs)."""

from __future__ import annotations

import itertools
import math
import types
from pathlib import Path

import pytest
from ortools.sat.python import cp_model

from tests.busy import busy_cores
from tests.mapper.test_assign import _layered
from waferflow.cli import main
from waferflow.errors import PlanError, SolverHangError
from waferflow.mapper import cpsat
from waferflow.mapper.cpsat import SolveOptions, run_cpsat
from waferflow.mapper.placement import solve_assignment


def _golomb(marks: int) -> cp_model.CpModel:
    """The shortest Golomb ruler: solved at once, proved optimal only after minutes."""
    m = cp_model.CpModel()
    top = marks * marks
    x = [m.new_int_var(0, top, f"x{i}") for i in range(marks)]
    m.add(x[0] == 0)
    for a, b in itertools.pairwise(x):
        m.add(a < b)
    diffs = [x[j] - x[i] for i, j in itertools.combinations(range(marks), 2)]
    m.add_all_different(diffs)
    m.minimize(x[-1])
    return m


def test_no_call_has_a_wall_clock_limit() -> None:
    """A wall-clock limit fires sooner on a busy machine and ends the search at a
    different point: CP-SAT's own (``max_time_in_seconds``) stays unset."""
    run = run_cpsat(_golomb(5), SolveOptions(), 1.0)
    assert run.status == "OPTIMAL"
    assert math.isinf(run.solver.parameters.max_time_in_seconds)


def test_the_same_assignment_on_a_busy_machine() -> None:
    """The LNS (many short CP-SAT calls, each once given a wall-clock cap), quiet and
    with every core busy: the same bytes, rounds included."""
    problem = _layered(60, 8, 9)
    quiet = solve_assignment(problem, SolveOptions(time_limit=0.2, seed=3))
    with busy_cores():
        loaded = solve_assignment(problem, SolveOptions(time_limit=0.2, seed=3))
    assert loaded.to_json() == quiet.to_json()
    assert any(t.startswith("lns:") for t in quiet.report.techniques)


def test_a_hung_solve_fails_loudly() -> None:
    """A call that uses far more CPU time than its deterministic limit needs (here a
    guard of half a CPU second on a search that runs for minutes) raises."""
    with pytest.raises(SolverHangError, match=r"stopped after \d+ CPU seconds") as err:
        run_cpsat(_golomb(12), SolveOptions(max_cpu_time=0.5), 1000.0)
    assert not isinstance(err.value, PlanError)  # placement's fallbacks must not hide it


MLP = """
import torch
from torch import nn


def make(batch=4):
    return nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32)), (torch.randn(batch, 32),)
"""


def test_a_hung_placement_ends_the_compile_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Placement does not fall back on a baseline when a solve hangs (a plan that
    depends on when the guard fired): the compile fails, names the cause, writes
    nothing. The hang is a CPU clock that jumps an hour at every reading."""
    hours = itertools.count(0.0, 3600.0)
    monkeypatch.setattr(cpsat, "time", types.SimpleNamespace(process_time=lambda: next(hours)))
    monkeypatch.setattr(cpsat, "_GUARD_POLL", 0.001)
    (tmp_path / "mlp.py").write_text(MLP, encoding="utf-8")
    out = tmp_path / "plan.json"
    code = main(["compile", f"{tmp_path / 'mlp.py'}:make", "--plan", "dp=2,pp=2",
                 "--wafer", "torus8x8", "--place", "cpsat", "--place-time", "5",
                 "-o", str(out), "-q"])  # fmt: skip
    assert code == 2
    assert "CP-SAT was stopped after" in capsys.readouterr().err
    assert not out.exists()

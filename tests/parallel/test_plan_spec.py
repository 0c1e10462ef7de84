"""Parsing and checking parallel plans."""

from __future__ import annotations

import pytest

from waferflow.errors import PlanError
from waferflow.ir.sharding import MeshAxis
from waferflow.parallel import (
    CollectiveAlgo,
    GradReduce,
    ParallelPlan,
    PipelineSchedule,
    parse_plan,
    plan_grid,
)


def test_parse_full_plan() -> None:
    p = parse_plan("dp=2, tp=4, pp=2, microbatches=4, schedule=gpipe, grad-reduce=root, algo=ring")
    assert (p.dp, p.tp, p.pp, p.microbatches) == (2, 4, 2, 4)
    assert p.schedule is PipelineSchedule.GPIPE
    assert p.grad_reduce is GradReduce.ROOT
    assert p.algo is CollectiveAlgo.RING
    assert p.num_ranks == 16 and p.ranks_per_stage == 8


def test_aliases_flags_and_round_trip() -> None:
    p = parse_plan("mb=2,recompute,grad_reduce=all-reduce")
    assert p.microbatches == 2 and p.recompute
    assert parse_plan(str(p)) == p
    assert str(ParallelPlan(dp=2)) == "dp=2,tp=1,pp=1,microbatches=1"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("dp=0", "dp must be an integer >= 1"),
        ("dp=two", "dp='two' must be an integer"),
        ("warp=2", "unknown key 'warp'"),
        ("schedule=zigzag", "is not one of gpipe, 1f1b"),
        ("dp=2,dp=4", "given twice"),
        ("layers=ddx,ways=2", "'x'"),
        ("layers=dd,ways=2,tp=2", "cannot be combined"),
        ("ways=4", "give layers="),
        ("tp", "needs a value"),
    ],
)
def test_bad_plans_name_the_value(text: str, needle: str) -> None:
    with pytest.raises(PlanError, match=None) as info:
        parse_plan(text)
    assert needle in str(info.value)


def test_mesh_groups() -> None:
    mesh = parse_plan("dp=2,tp=3").mesh()
    assert mesh.size == 6
    assert mesh.group(4, MeshAxis.TP) == (3, 4, 5)
    assert mesh.group(4, MeshAxis.DP) == (1, 4)
    assert (mesh.index(4, MeshAxis.DP), mesh.index(4, MeshAxis.TP)) == (1, 1)
    assert mesh.groups(MeshAxis.TP) == ((0, 1, 2), (3, 4, 5))
    pattern = parse_plan("layers=dt,ways=4,mb=2").mesh()
    assert pattern.aliased and pattern.degree(MeshAxis.DP) == pattern.degree(MeshAxis.TP) == 4
    assert pattern.degree(MeshAxis.MB) == 2


def test_plan_grid() -> None:
    grid = plan_grid((1, 2), (1,), (1, 2), (4,), schedule=PipelineSchedule.GPIPE)
    assert [(p.dp, p.pp) for p in grid] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(p.microbatches == 4 and p.schedule is PipelineSchedule.GPIPE for p in grid)

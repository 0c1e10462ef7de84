"""Bad plans fail with one message naming the value and the constraint."""

from __future__ import annotations

import pytest

from waferflow.errors import PassError, PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.target import get_wafer
from waferflow.parallel import build_parallel_plan
from waferflow.passes import PassContext, PassManager

from .graphs import fast_wafer, mlp

MESH = get_wafer("mesh16x16")


@pytest.mark.parametrize(
    ("plan", "needle"),
    [
        ("dp=3", "dp=3 does not divide the batch 8 of input %input_ids"),
        ("dp=2,microbatches=3", "microbatches=3 does not divide the per-replica batch 4"),
        ("tp=3", "tp=3 does not divide the 64-wide pieces"),
        ("dp=16,tp=4,pp=2", "needs 128 cores"),
        ("pp=40", "only"),
    ],
)
def test_gpt2_bad_plans(gpt2_tiny: Graph, plan: str, needle: str) -> None:
    wafer = get_wafer("mesh4x4") if "dp=16" in plan else MESH
    with pytest.raises(PlanError) as info:
        build_parallel_plan(gpt2_tiny, wafer, plan, check_memory=False)
    assert needle in str(info.value)


def test_heads_must_divide(llama_tiny: Graph) -> None:
    # llama-tiny has 2 key/value heads: tp=4 cannot split them
    with pytest.raises(PlanError) as info:
        build_parallel_plan(llama_tiny, MESH, "tp=4", check_memory=False)
    # it names the 2 groups the view cuts (not the 4 query heads tp=4 would divide)
    assert "tp=4 does not divide the 2 groups" in str(info.value)
    assert "key/value heads" in str(info.value)


def test_channels_must_divide(amcoda_cnn: Graph) -> None:
    with pytest.raises(PlanError, match="tp=3 does not divide the 16 output channels of conv1"):
        build_parallel_plan(amcoda_cnn, MESH, "tp=3", check_memory=False)


def test_pattern_length_is_checked(amcoda_cnn: Graph) -> None:
    with pytest.raises(PlanError) as info:
        build_parallel_plan(amcoda_cnn, MESH, "layers=ddtdd,ways=2", check_memory=False)
    msg = str(info.value)
    assert "5 letter(s)" in msg and "4 layer(s)" in msg and "conv1, conv2, conv3, fc" in msg
    # fewer letters than layers is the seed machine's per-layer form, not an error
    short = build_parallel_plan(amcoda_cnn, MESH, "layers=ddt,ways=2", check_memory=False)
    assert short.spec.layers == "ddts" and short.spec.pp == 6


def test_more_ranks_than_alive_cores() -> None:
    wafer = fast_wafer(2, rows=2).with_dead_cores(0.5, seed=1)
    with pytest.raises(PlanError, match="2 alive"):
        build_parallel_plan(mlp(), wafer, "dp=2,pp=2")


def test_pass_options_are_checked() -> None:
    with pytest.raises(PassError, match="unknown key"):
        PassManager('parallel-lowering{plan="dp=2,warp=9"}')
    with pytest.raises(PassError, match="algo"):
        PassManager("lower-collectives{algo=spiral}")
    with pytest.raises(PassError, match="needs a target wafer"):
        PassManager("parallelize{dp=2}").run(mlp(), PassContext())
    with pytest.raises(PassError, match="is not parallelised: run parallelize first"):
        PassManager("schedule").run(mlp(), PassContext(wafer=fast_wafer(2)))

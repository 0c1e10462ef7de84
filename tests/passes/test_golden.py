"""Golden IR for each pass: build a graph, run a pipeline, compare the printed IR.

The parallel passes start from a traced MLP step (``inputs/mlp_step.wf``) taken to
the pass before them on the ``mesh4x4`` wafer, so that each golden file shows one
pass's input and output."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from waferflow.ir import Graph, print_graph
from waferflow.ir.parser import parse_graph
from waferflow.ir.target import get_wafer
from waferflow.passes import DEFAULT_PIPELINE, PassContext, PassManager

from . import graphs
from .golden import GOLDEN_DIR, check_golden, golden_text, strip_comments

WAFER = get_wafer("mesh4x4")
TP2 = "parallelize{tp=2,span=1}"
DP_PP_MB = "parallelize{dp=2,pp=2,microbatches=2,span=1}"
ZERO1 = "parallelize{dp=2,zero=1,span=1}"
ZERO3 = "parallelize{dp=2,microbatches=2,zero=3,span=1}"
EP2 = "parallelize{ep=2,span=1}"
SHIFT = "parallelize{dp=2,zero=3,matmul=shift,span=1},insert-collectives"


def after(pipeline: str, source: Callable[[], Graph] = graphs.mlp_step) -> Callable[[], Graph]:
    """The MLP step (or ``source``) after ``pipeline``: the input of the next pass's
    golden case."""

    def build() -> Graph:
        return PassManager(pipeline).run(source(), PassContext(wafer=WAFER))

    return build


# (directory, case, graph builder, pipeline)
CASES: list[tuple[str, str, Callable[[], Graph], str]] = [
    ("canonicalize", "mlp_train", graphs.mlp_train, "canonicalize"),
    ("canonicalize", "views", graphs.views, "canonicalize"),
    (
        "canonicalize",
        "keep_bookkeeping",
        graphs.mlp_train,
        "canonicalize{drop-bookkeeping=false}",
    ),
    ("dce", "mlp_train", graphs.mlp_train, "dce"),
    ("dce", "sources", graphs.sources, "dce"),
    ("dce", "sources_no_keep", graphs.sources, "dce{keep-sources=false}"),
    ("fuse-elementwise", "chain", graphs.chain, "fuse-elementwise"),
    ("fuse-elementwise", "diamond", graphs.diamond, "fuse-elementwise"),
    ("fuse-elementwise", "multi_use", graphs.multi_use, "fuse-elementwise"),
    ("fuse-elementwise", "max2", graphs.long_chain, "fuse-elementwise{max=2}"),
    ("fuse-elementwise", "mlp_train", graphs.mlp_train, "canonicalize,dce,fuse-elementwise"),
    ("split-backward", "conv_train", graphs.conv_train, "split-backward"),
    ("annotate-cost", "costs", graphs.costs, "annotate-cost"),
    ("annotate-cost", "costs_overwrite", graphs.costs, "annotate-cost{overwrite=true}"),
    ("annotate-cost", "mlp_train", graphs.mlp_train, "annotate-cost"),
    ("pipeline", "mlp_train_default", graphs.mlp_train, DEFAULT_PIPELINE),
    ("fuse-elementwise", "member_attrs", graphs.scaled_scores, "fuse-elementwise"),
    # the parallel passes, one step each
    ("parallelize", "mlp_tp2", graphs.mlp_step, TP2),
    ("parallelize", "mlp_dp2_pp2_mb2", graphs.mlp_step, DP_PP_MB),
    ("insert-collectives", "mlp_tp2", after(TP2), "insert-collectives"),
    ("insert-collectives", "mlp_dp2_pp2_mb2", after(DP_PP_MB), "insert-collectives"),
    # ZeRO: stage 1 reduce-scatters the gradients and gathers the updated parameters;
    # stage 3 keeps the parameters as dp shards, gathered before each phase's use
    ("parallelize", "mlp_dp2_zero3", graphs.mlp_step, ZERO3),
    ("insert-collectives", "mlp_dp2_zero1", after(ZERO1), "insert-collectives"),
    ("insert-collectives", "mlp_dp2_mb2_zero3", after(ZERO3), "insert-collectives"),
    # compute-shift: schedule marks the parameter gathers feeding a matmul shift=true
    ("schedule", "mlp_dp2_zero3_shift", after(SHIFT), "schedule"),
    # experts: dealt out over ep, their tokens re-split by expert (all-to-all) and back
    ("parallelize", "moe_ep2", graphs.moe_step, EP2),
    ("insert-collectives", "moe_ep2", after(EP2, graphs.moe_step), "insert-collectives"),
    ("schedule", "mlp_tp2", after(f"{TP2},insert-collectives"), "schedule"),
    ("schedule", "mlp_dp2_pp2_mb2", after(f"{DP_PP_MB},insert-collectives"), "schedule"),
    (
        "lower-collectives",
        "mlp_tp2_ring",
        after(f"{TP2},insert-collectives,schedule"),
        "lower-collectives{algo=ring}",
    ),
    (
        "plan-memory",
        "mlp_dp2_pp2_mb2",
        after(f"{DP_PP_MB},insert-collectives,schedule"),
        "plan-memory",
    ),
    ("place", "mlp_dp2_pp2_mb2", after(f"{DP_PP_MB},insert-collectives"), "place{time=1.0}"),
    ("route", "mlp_tp2", after(f"{TP2},insert-collectives,schedule"), "route"),
    ("parallel-lowering", "mlp_tp2", graphs.mlp_step, 'parallel-lowering{plan="tp=2,span=1"}'),
]


def _run(build: Callable[[], Graph], pipeline: str) -> tuple[str, str]:
    graph = build()
    before = print_graph(graph)
    result = PassManager(pipeline, verify_each=True).run(graph, PassContext(wafer=WAFER))
    return before, print_graph(result)


@pytest.mark.parametrize(("directory", "case", "build", "pipeline"), CASES, ids=lambda c: c)
def test_golden(directory: str, case: str, build: Callable[[], Graph], pipeline: str) -> None:
    before, after = _run(build, pipeline)
    check_golden(GOLDEN_DIR / directory / f"{case}.wf", golden_text(pipeline, before, after))


@pytest.mark.parametrize(("directory", "case", "build", "pipeline"), CASES, ids=lambda c: c)
def test_golden_files_parse_back(
    directory: str, case: str, build: Callable[[], Graph], pipeline: str
) -> None:
    """Each golden output is valid IR text: it parses and prints back unchanged."""
    text = (GOLDEN_DIR / directory / f"{case}.wf").read_text()
    ir = strip_comments(text)
    assert print_graph(parse_graph(text)) == ir


def test_every_golden_file_has_a_case() -> None:
    """A stale golden file (its case renamed or gone) would otherwise go unnoticed."""
    expected = {GOLDEN_DIR / d / f"{c}.wf" for d, c, _, _ in CASES}
    assert set(GOLDEN_DIR.rglob("*.wf")) == expected

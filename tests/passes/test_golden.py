"""Golden IR for each pass: build a graph, run a pipeline, compare the printed IR."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from waferflow.ir import Graph, print_graph
from waferflow.ir.parser import parse_graph
from waferflow.passes import DEFAULT_PIPELINE, PassContext, PassManager

from . import graphs
from .golden import GOLDEN_DIR, check_golden, golden_text, strip_comments

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
]


def _run(build: Callable[[], Graph], pipeline: str) -> tuple[str, str]:
    graph = build()
    before = print_graph(graph)
    after = print_graph(PassManager(pipeline, verify_each=True).run(graph, PassContext()))
    return before, after


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

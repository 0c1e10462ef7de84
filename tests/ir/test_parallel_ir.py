"""Parallel annotations in the IR: text and JSON round trips, parse errors, and the
verifier's rules (partial sums, stages, micro-batches, collectives, regions)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waferflow.errors import ParseError
from waferflow.ir.graph import Graph
from waferflow.ir.parallel import MbMode, OpParallel, ParallelLevel
from waferflow.ir.parser import parse_graph
from waferflow.ir.printer import print_graph
from waferflow.ir.serialize import dumps_graph, graph_from_json, graph_to_json, loads_graph
from waferflow.ir.sharding import PARTIAL, MeshAxis, Sharding, Split
from waferflow.ir.verifier import graph_problems

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "passes"

HEAD = 'graph @g parallel(plan="dp=2,tp=2,microbatches=2", wafer="w", dp=2, tp=2, mb=2, pp=2, ranks=4, level={level}) {{\n'
# x split over dp and micro-batches, w row-parallel; y = x @ w is a partial sum along tp
BODY = """\
  %x = input "x" : f32[8,16]{dp=split(0), mb=split(0, block=2)} fwd
  %w = param "w" : f32[16,4]{tp=split(0)} fwd
  %y = matmul %x, %w : f32[8,4]{dp=split(0), tp=partial, mb=split(0, block=2)} fwd par(stage=0, mb=per_mb, in=[{dp=split(0), tp=split(1), mb=split(0, block=2)}, {tp=split(0)}], div=[mb, dp, tp])
"""


def _graph(tail: str, level: str = "sharded") -> Graph:
    return parse_graph(HEAD.format(level=level) + BODY + tail)


def _problems(tail: str, level: str = "sharded") -> str:
    return "\n".join(graph_problems(_graph(tail, level)))


def _golden_outputs() -> list[Path]:
    return sorted(p for p in GOLDEN.rglob("*.wf") if "parallel(" in p.read_text())


def _ir(path: Path) -> str:
    return "".join(
        line + "\n" for line in path.read_text().splitlines() if not line.startswith("#")
    )


@pytest.mark.parametrize("path", _golden_outputs(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_parallel_graphs_round_trip_as_text_and_json(path: Path) -> None:
    text = _ir(path)
    g = parse_graph(text)
    assert print_graph(g) == text
    assert graph_problems(g) == []
    doc = graph_to_json(g)
    assert doc["version"] == 2 and "parallel" in doc
    assert print_graph(loads_graph(dumps_graph(g))) == text
    assert print_graph(graph_from_json(doc)) == text


def test_the_annotations_are_typed_and_frozen() -> None:
    g = _graph("  return %y\n}\n")
    assert g.parallel is not None and g.parallel.level is ParallelLevel.SHARDED
    assert g.parallel.degrees() == {MeshAxis.DP: 2, MeshAxis.TP: 2, MeshAxis.MB: 2, MeshAxis.EP: 1}
    y = g.value("y")
    assert y.sharding == Sharding.of({MeshAxis.DP: Split(0, 4), MeshAxis.TP: PARTIAL,
                                      MeshAxis.MB: Split(0, 2)})  # fmt: skip
    par = y.producer.par if y.producer is not None else None
    assert par == OpParallel(
        stage=0, mode=MbMode.PER_MB,
        inputs=(Sharding.of({MeshAxis.DP: Split(0, 4), MeshAxis.TP: Split(1, 8),
                             MeshAxis.MB: Split(0, 2)}),
                Sharding.of({MeshAxis.TP: Split(0, 8)})),
        divided=(MeshAxis.MB, MeshAxis.DP, MeshAxis.TP),
    )  # fmt: skip
    with pytest.raises(AttributeError):
        par.stage = 1  # type: ignore[misc]


def test_a_graph_without_annotations_prints_as_before() -> None:
    text = 'graph @g {\n  %x = input "x" : f32[2] fwd\n  return %x\n}\n'
    g = parse_graph(text)
    assert g.parallel is None and print_graph(g) == text
    assert graph_to_json(g)["version"] == 1


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('graph @g {\n  %x = input "x" : f32[8]{dp=split(0)} fwd\n  return %x\n}\n',
         "the graph has dp=1"),
        ('graph @g parallel(wafer="w") {\n  return\n}\n', "needs plan="),
        ('graph @g parallel(plan="", wafer="w", dq=2) {\n  return\n}\n', "unknown field 'dq' in parallel(...) (known: plan, wafer, dp"),
        ('graph @g parallel(plan="", wafer="w", dp=2) {\n  %x = input "x" : f32[8]{xp=partial} fwd\n  return %x\n}\n',
         "unknown mesh axis 'xp'"),
        ('graph @g parallel(plan="", wafer="w", dp=2) {\n  %x = input "x" : f32[8]{dp=split(0, block=0)} fwd\n  return %x\n}\n',
         "block >= 1"),
        ('graph @g parallel(plan="", wafer="w", dp=2) {\n  %x = input "x" : f32[8] fwd\n  %y = neg %x : f32[8] fwd par(mb=late)\n  return %y\n}\n',
         "needs stage="),
        ('graph @g parallel(plan="", wafer="w", dp=2) {\n  %x = input "x" : f32[8] fwd\n  %y = neg %x : f32[8] fwd par(stage=0, in=[{}, {}])\n  return %y\n}\n',
         "2 placement(s) for 1 operand(s)"),
        ('graph @g parallel(plan="", wafer="w", dp=2) {\n  %x = input "x" : f32[8] fwd\n  %y = neg %x : f32[8] fwd par(stage=0, mb=sometimes)\n  return %y\n}\n',
         "unknown micro-batch mode 'sometimes'"),
    ],
)  # fmt: skip
def test_parse_errors_name_the_problem(text: str, needle: str) -> None:
    with pytest.raises(ParseError, match=re.escape(needle)):
        parse_graph(text)


# -- the verifier --------------------------------------------------------------------------


def test_a_pending_reduction_is_fine_until_collectives_are_inserted() -> None:
    tail = "  %z = relu %y : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=0, mb=per_mb, in=[{dp=split(0), mb=split(0, block=2)}], div=[mb, dp])\n  return %z\n}\n"  # fmt: skip
    assert _problems(tail) == ""
    assert "the collective that converts it is missing" in _problems(tail, "collectives")


def test_a_plan_that_reshards_between_stages_needs_no_collective_there() -> None:
    """``reshard=true`` (a per-layer plan): an operand from another stage may differ from
    what its op needs (the transfer converts it), one from its own stage may not; its
    stages may have fewer ranks than the header's."""
    head = HEAD.replace("level={level})", "level=collectives, reshard=true)")
    cross = "  %z = relu %y : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=1, mb=per_mb, in=[{dp=split(0), mb=split(0, block=2)}], div=[mb, dp])\n  return %z\n}\n"  # fmt: skip
    g = parse_graph(head.format() + BODY + cross)
    assert graph_problems(g) == [] and g.parallel is not None and g.parallel.reshard
    assert print_graph(parse_graph(print_graph(g))) == print_graph(g)
    assert loads_graph(dumps_graph(g)).parallel == g.parallel
    same = cross.replace("par(stage=1", "par(stage=0")
    problems = "\n".join(graph_problems(parse_graph(head.format() + BODY + same)))
    assert "the collective that converts it is missing" in problems


def test_a_reduction_of_a_partial_sum_is_an_error() -> None:
    tail = "  %s = sum %y : f32[]{dp=partial, tp=partial, mb=partial} fwd par(stage=0, mb=per_mb, div=[mb, dp])\n  return %s\n}\n"  # fmt: skip
    problems = _problems(tail)
    assert "op 3 (%s = sum at the top level): reduces %y, a partial sum along tp" in problems


def test_an_output_left_partial_is_an_error_once_collectives_are_in() -> None:
    tail = "  return %y\n}\n"
    assert _problems(tail) == ""
    problems = _problems(tail, "collectives")
    assert "output 0 %y (%y = matmul at the top level) is a partial sum along tp, returned without a reduction" in problems  # fmt: skip


def test_a_collective_must_match_what_it_converts() -> None:
    good = "  %r = all_reduce %y {axis=\"tp\", dst=\"R\", src=\"P\"} : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=0, mb=per_mb)\n  return %r\n}\n"  # fmt: skip
    assert _problems(good, "collectives") == ""
    wrong = good.replace('dst="R", src="P"', 'dst="R", src="R"')
    assert "src='R' but %y comes in as P along tp" in _problems(wrong, "collectives")
    twice = good + ""
    twice = good.replace("  return %r\n", "  %r2 = all_reduce %r {axis=\"tp\", dst=\"R\", src=\"P\"} : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=0, mb=per_mb)\n  return %r2\n")  # fmt: skip
    assert "src='P' but %r comes in as R along tp" in _problems(twice, "collectives")


def test_a_forward_op_cannot_use_a_later_stage() -> None:
    tail = (
        "  %r = all_reduce %y {axis=\"tp\", dst=\"R\", src=\"P\"} : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=1, mb=per_mb)\n"
        "  %z = relu %r : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=0, mb=per_mb, div=[mb, dp])\n"
        "  return %z\n}\n"
    )  # fmt: skip
    assert "stage 0 uses %r from stage 1" in _problems(tail)
    backward = tail.replace("relu %r", "neg %r").replace("fwd par(stage=0", "bwd par(stage=0")
    assert "stage 0 uses" not in _problems(backward)  # gradients flow back


def test_micro_batch_modes_are_checked() -> None:
    tail = (
        "  %r = all_reduce %y {axis=\"tp\", dst=\"R\", src=\"P\"} : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=0, mb=late)\n"
        "  %z = relu %r : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=0, mb=per_mb, div=[mb, dp])\n"
        "  %e = neg %z : f32[8,4]{dp=split(0), mb=split(0, block=2)} fwd par(stage=0)\n"
        "  return %e\n}\n"
    )  # fmt: skip
    problems = _problems(tail)
    assert "runs per micro-batch but reads %r (%r = all_reduce at the top level), which needs every micro-batch" in problems  # fmt: skip
    assert "runs once before the micro-batches but reads %z" in problems


def test_splits_and_placements_are_checked() -> None:
    text = (
        'graph @g parallel(plan="tp=2", wafer="w", tp=2, ranks=2) {\n'
        '  %x = input "x" : f32[8]{dp=split(0, block=4), tp=split(1, block=4)} fwd\n'
        "  %y = neg %x : f32[8] fwd par(stage=3)\n"
        "  return %y\n}\n"
    )
    problems = "\n".join(graph_problems(parse_graph(text)))
    assert "result %x is placed along dp, whose degree is 1" in problems
    assert "result %x is split on dimension 1 of f32[8]" in problems
    assert "stage 3 is outside 0..0" in problems


def test_regions_are_one_per_stage_and_disjoint() -> None:
    text = (
        'graph @g parallel(plan="pp=2", wafer="w", pp=2, ranks=2) {\n'
        '  %x = input "x" : f32[8] fwd\n'
        "  %a = neg %x : f32[8] fwd par(stage=0, on=[0, 1])\n"
        "  %b = neg %a : f32[8] fwd par(stage=0, on=[0, 2])\n"
        "  %c = neg %b : f32[8] fwd par(stage=1, on=[1, 3, 4])\n"
        "  %d = neg %c : f32[8] fwd par(stage=1)\n"
        "  return %d\n}\n"
    )
    problems = "\n".join(graph_problems(parse_graph(text)))
    assert "region differs from the other ops of stage 0" in problems
    assert "region has 3 core(s) for 2 ranks" in problems
    assert "no region (on=[...]) while other ops are placed" in problems
    assert "core 1 runs ranks of stages 0 and 1" in problems


def test_annotations_need_the_header() -> None:
    g = _graph("  return %y\n}\n")
    g.parallel = None
    assert graph_problems(g) == [
        "op 0 (%x = input at the top level): parallel annotations in a graph without a "
        "parallel(...) header"
    ]


@given(
    st.lists(
        st.tuples(st.sampled_from(list(MbMode)), st.integers(0, 1),
                  st.sampled_from(["partial", "split(0)", "split(0, block=1)", "replicated"])),
        min_size=1, max_size=5,
    )
)  # fmt: skip
def test_random_annotations_round_trip(ops: list[tuple[MbMode, int, str]]) -> None:
    lines = [
        'graph @r parallel(plan="dp=2,pp=2", wafer="w", dp=2, pp=2, ranks=2) {',
        '  %v0 = input "x" : f32[4,2] fwd',
    ]
    for i, (mode, stage, place) in enumerate(ops, start=1):
        s = "" if place == "replicated" else f"{{dp={place}}}"
        lines.append(
            f"  %v{i} = neg %v{i - 1} : f32[4,2]{s} fwd par(stage={stage}, mb={mode.value}, "
            f"in=[{{dp={place}}}], on=[{stage * 2}, {stage * 2 + 1}])"
        )
    lines += [f"  return %v{len(ops)}", "}"]
    g = parse_graph("\n".join(lines) + "\n")
    again = print_graph(g)
    assert print_graph(parse_graph(again)) == again
    assert print_graph(loads_graph(dumps_graph(g))) == again
    op = g.ops[1]
    assert op.par is not None and replace(op.par, stage=op.par.stage) == op.par

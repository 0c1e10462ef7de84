"""The verifier: accepts valid graphs, and names the op for each broken invariant."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings

from tests.ir.strategies import graphs
from waferflow.errors import VerificationError
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, AttrValue, Cost, Graph, Op, Value
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.verifier import MAX_REPORTED, graph_problems, verify_graph

K = OpKind


def t(*shape: int, dtype: DType = DType.F32) -> TensorType:
    return TensorType(shape, dtype)


def src(g: Graph, name: str, ty: TensorType, kind: OpKind = K.INPUT) -> Value:
    return g.add_op(kind, (), [ty], attrs=Attrs.of(name=name), names=[name]).result


def op(g: Graph, kind: OpKind, operands: list[Value], *types: TensorType, **attrs: AttrValue) -> Op:
    return g.add_op(kind, operands, list(types), attrs=Attrs.of(attrs))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_valid_graphs_verify(g: Graph) -> None:
    assert graph_problems(g) == []
    verify_graph(g)


def test_a_valid_graph_with_every_type_rule() -> None:
    text = """graph @ok {
      %x = input "x" : f32[8,4]
      %w = param "w" : f32[16,4]
      %b = param "b" : f32[16]
      %s = constant "s" : f32[]
      %mm = matmul %x, %w {transpose_b=true} : f32[8,16]
      %mt = matmul %w, %x {transpose_a=false, transpose_b=true} : f32[16,8]
      %am = addmm %b, %x, %w {transpose_b=true} : f32[8,16]
      %add = add %mm, %b : f32[8,16]
      %sc = mul %add, %s : f32[8,16]
      %col = param "col" : f32[8,1]
      %outer = sub %col, %b : f32[8,16]
      %where = where %col, %sc, %s : f32[8,16]
      %v = view %sc : f32[2,4,16]
      %p = permute %v : f32[16,2,4]
      %c = clone %p : f32[16,2,4]
      %bx = view %x : f32[2,4,4]
      %bw = param "bw" : f32[2,4,3]
      %bmm = bmm %bx, %bw : f32[2,4,3]
      %mm3 = matmul %v, %x : f32[7]
      %ar = all_reduce %x : f32[1,2,3]
      %cmp = compare %add, %s : bool[8,16]
      return %c, %bmm, %ar, %cmp, %am, %mt, %outer, %where, %mm3
    }"""
    verify_graph(parse_graph(text))


def _problems_of(build: Callable[[Graph], None]) -> list[str]:
    g = Graph("broken")
    build(g)
    return graph_problems(g)


def _foreign_operand(g: Graph) -> None:
    other = Graph("other")
    y = src(other, "y", t(2))
    g.set_outputs([op(g, K.RELU, [y], t(2)).result])


def _use_before_def(g: Graph) -> None:
    x = src(g, "x", t(2))
    a = op(g, K.RELU, [x], t(2))
    b = op(g, K.EXP, [a.result], t(2))
    g.ops[1], g.ops[2] = b, a  # exp now comes before the relu it uses
    g.set_outputs([b.result])


def _cycle(g: Graph) -> None:
    x = src(g, "x", t(2))
    a = op(g, K.ADD, [x, x], t(2))
    b = op(g, K.EXP, [a.result], t(2))
    a.operands = (x, b.result)  # a uses b, b uses a
    g.set_outputs([b.result])


def _duplicate_names(g: Graph) -> None:
    x = src(g, "x", t(2))
    y = op(g, K.RELU, [x], t(2)).result
    y.name = "x"
    g.set_outputs([y])


def _no_outputs(g: Graph) -> None:
    src(g, "x", t(2))


def _foreign_output(g: Graph) -> None:
    src(g, "x", t(2))
    g.set_outputs([Value("ghost", t(2))])


def _source_with_operand(g: Graph) -> None:
    x = src(g, "x", t(2))
    g.set_outputs([g.add_op(K.PARAM, [x], [t(2)], attrs=Attrs.of(name="p")).result])


def _source_without_name(g: Graph) -> None:
    g.set_outputs([g.add_op(K.PARAM, [], [t(2)], attrs=Attrs.of(name=3)).result])


def _wrong_producer(g: Graph) -> None:
    x = src(g, "x", t(2))
    y = op(g, K.RELU, [x], t(2)).result
    y.producer = x.producer
    g.set_outputs([y])


def _negative_cost(g: Graph) -> None:
    x = src(g, "x", t(2))
    g.set_outputs([g.add_op(K.RELU, [x], [t(2)], cost=Cost(flops=-1)).result])


def _bad_broadcast_result(g: Graph) -> None:
    a, b = src(g, "a", t(4, 1)), src(g, "b", t(3))
    g.set_outputs([op(g, K.ADD, [a, b], t(4, 1)).result])


def _shapes_do_not_broadcast(g: Graph) -> None:
    a, b = src(g, "a", t(4, 2)), src(g, "b", t(3))
    g.set_outputs([op(g, K.MUL, [a, b], t(4, 3)).result])


def _scalar_does_not_hide_a_bad_result(g: Graph) -> None:
    a, s = src(g, "a", t(4)), src(g, "s", t())
    g.set_outputs([op(g, K.MUL, [a, s], t(5)).result])


def _view_numel(g: Graph) -> None:
    x = src(g, "x", t(2, 3))
    g.set_outputs([op(g, K.VIEW, [x], t(7)).result])


def _matmul_inner(g: Graph) -> None:
    a, b = src(g, "a", t(2, 3)), src(g, "b", t(4, 5))
    g.set_outputs([op(g, K.MATMUL, [a, b], t(2, 5)).result])


def _matmul_transpose_ignored(g: Graph) -> None:
    a, b = src(g, "a", t(2, 3)), src(g, "b", t(5, 3))  # needs transpose_b
    g.set_outputs([op(g, K.MATMUL, [a, b], t(2, 5), transpose_b=False).result])


def _matmul_flag_not_bool(g: Graph) -> None:
    a, b = src(g, "a", t(2, 3)), src(g, "b", t(5, 3))
    g.set_outputs([op(g, K.MATMUL, [a, b], t(2, 5), transpose_b=1).result])


def _matmul_result(g: Graph) -> None:
    a, b = src(g, "a", t(2, 3)), src(g, "b", t(3, 5))
    g.set_outputs([op(g, K.MATMUL, [a, b], t(5, 2)).result])


def _bmm_batch(g: Graph) -> None:
    a, b = src(g, "a", t(2, 3, 4)), src(g, "b", t(3, 4, 5))
    g.set_outputs([op(g, K.BMM, [a, b], t(2, 3, 5)).result])


def _permute_sizes(g: Graph) -> None:
    x = src(g, "x", t(2, 3))
    g.set_outputs([op(g, K.PERMUTE, [x], t(3, 3)).result])


def _clone_shape(g: Graph) -> None:
    x = src(g, "x", t(2, 3))
    g.set_outputs([op(g, K.CLONE, [x], t(6)).result])


def _unprintable_value_name(g: Graph) -> None:
    x = src(g, "x", t(2))
    x.name = "a b"
    g.set_outputs([x])


def _unprintable_graph_name(g: Graph) -> None:
    g.name = "my graph"
    g.set_outputs([src(g, "x", t(2))])


def _bad_attrs(g: Graph) -> None:
    x = src(g, "x", t(2))
    g.set_outputs([g.add_op(K.RELU, [x], [t(2)], attrs=Attrs((("a", 1), ("a", [2])))).result])


def _same_op_twice(g: Graph) -> None:
    x = src(g, "x", t(2))
    g.ops.append(g.ops[0])
    g.set_outputs([x])


@pytest.mark.parametrize(
    ("build", "needles"),
    [
        (_foreign_operand, ["op 0 (%0 = relu): operand %y is not defined by any op"]),
        (_use_before_def, ["op 1 (%1 = exp): operand %0 is used before op 2 defines it"]),
        (_cycle, ["op 1 (%0 = add): operand %1 is used before op 2", "has a cycle: op 1"]),
        (_duplicate_names, ["op 1 (%x = relu): value name %x is already used by op 0"]),
        (_no_outputs, ["the graph has no outputs"]),
        (_foreign_output, ["output %ghost is not defined"]),
        (_source_with_operand, ["op 1 (%0 = param): source op has 1 operand(s)"]),
        (_source_without_name, ["op 0 (%0 = param): source op needs a string attribute 'name'"]),
        (_wrong_producer, ["op 1 (%0 = relu): result %0 does not name this op as its producer"]),
        (_negative_cost, ["cost flops must be a non-negative integer, got -1"]),
        (_bad_broadcast_result, ["result %0: f32[4,1] should have shape [4,3]"]),
        (_shapes_do_not_broadcast, ["operand shapes do not broadcast: f32[4,2], f32[3]"]),
        (_scalar_does_not_hide_a_bad_result, ["should have shape [4]"]),
        (_view_numel, ["op 1 (%0 = view): a view keeps the element count: f32[2,3] has 6"]),
        (_matmul_inner, ["inner dimensions differ: f32[2,3] x f32[4,5]"]),
        (_matmul_transpose_ignored, ["inner dimensions differ", "transpose_b=false"]),
        (_matmul_flag_not_bool, ["attribute transpose_b must be true or false, got 1"]),
        (_matmul_result, ["result f32[5,2] should have shape [2,5]"]),
        (_bmm_batch, ["batch dimensions differ: f32[2,3,4] x f32[3,4,5]"]),
        (_permute_sizes, ["is not a reordering of the dimensions of f32[2,3]"]),
        (_clone_shape, ["result f32[6] should have the shape of its operand f32[2,3]"]),
        (_unprintable_value_name, ["value name 'a b' cannot be printed"]),
        (_unprintable_graph_name, ["graph name 'my graph' cannot be printed"]),
        (_bad_attrs, ["attribute 'a' is given twice", "attribute 'a' has a value of unsupported"]),
        (_same_op_twice, ["op 1 (%x = input): the same op object also appears as op 0"]),
    ],
)
def test_each_broken_invariant_is_reported(
    build: Callable[[Graph], None], needles: list[str]
) -> None:
    problems = _problems_of(build)
    joined = "\n".join(problems)
    for needle in needles:
        assert needle in joined, joined
    with pytest.raises(VerificationError) as info:
        g = Graph("broken")
        build(g)
        verify_graph(g)
    assert str(info.value).startswith("graph @")
    assert needles[0] in str(info.value)


def test_collectives_and_comm_are_not_type_checked() -> None:
    g = Graph("g")
    x = src(g, "x", t(2, 3))
    a = op(g, K.ALL_GATHER, [x], t(99)).result
    s = op(g, K.SEND, [a], t(1)).result
    g.set_outputs([s])
    verify_graph(g)


def test_report_is_capped_and_counts_the_rest() -> None:
    g = Graph("many")
    x = src(g, "x", t(2))
    outs = [op(g, K.VIEW, [x], t(3)).result for _ in range(MAX_REPORTED + 5)]
    g.set_outputs(outs)
    assert len(graph_problems(g)) == MAX_REPORTED + 5
    with pytest.raises(VerificationError) as info:
        verify_graph(g)
    lines = str(info.value).splitlines()
    assert lines[0] == f"graph @many is invalid ({MAX_REPORTED + 5} problem(s)):"
    assert len(lines) == 1 + MAX_REPORTED + 1
    assert lines[1].startswith("  op 1 (%0 = view): a view keeps the element count")
    assert lines[-1] == "  ... and 5 more"

"""The text form: print -> parse -> print is the identity, and errors point at the culprit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ir.strategies import fingerprint, graphs
from waferflow.errors import ParseError
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, Cost, Graph, Phase, Provenance
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.printer import print_graph
from waferflow.ir.verifier import verify_graph

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "ir"
F32 = DType.F32


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_print_parse_print_is_identity(g: Graph) -> None:
    text = print_graph(g)
    back = parse_graph(text)
    assert print_graph(back) == text
    assert fingerprint(back) == fingerprint(g)
    verify_graph(back)  # operands are the very values their producers define


def test_golden_file_round_trips_byte_for_byte() -> None:
    text = (GOLDEN / "mlp_train.ir").read_text(encoding="utf-8")
    g = parse_graph(text, source="mlp_train.ir")
    verify_graph(g)
    assert print_graph(g) == text
    assert len(g.ops) == 23
    assert [v.name for v in g.outputs] == ["loss", "w1.new", "w2.new", "b1.new"]
    split = next(op for op in g.ops if op.kind is OpKind.SPLIT)
    assert [v.name for v in split.results] == ["g_w1.a", "g_w1.b"]
    update = g.value("w1.new").producer
    assert update is not None
    assert update.phase is Phase.OPT
    assert update.attrs.get("clip") == (-math.inf, math.inf)
    assert math.isnan(update.attrs.get("eps"))  # type: ignore[arg-type]
    check = next(op for op in g.ops if op.kind is OpKind.ASSERT)
    assert check.results == ()
    assert check.attrs.get("msg") == 'finite "grads"é'
    assert g.value("1").producer.cost == Cost(33554432, 2162688, 131072)  # type: ignore[union-attr]
    assert g.value("1").producer.prov == Provenance("fc1", "aten.mm.default")  # type: ignore[union-attr]


def test_sketch_forms_comments_and_defaults() -> None:
    text = """
    # a hand-written graph
    graph @demo {   # trailing comment
      %x = input "x" : f32[2,3]          # phase defaults to fwd

      %w = param "w#1" {init="zeros"}    : f32[4,3]
      %1 = matmul %x, %w {transpose_b}   : f32[2,4] bwd cost(write=8, flops=48)
      return %1
    }
    """
    g = parse_graph(text)
    x, w, mm = g.ops
    assert x.phase is Phase.FWD and x.attrs == Attrs.of(name="x")
    assert w.attrs == Attrs.of(name="w#1", init="zeros")  # sorted, as Attrs.of keeps them
    assert mm.attrs == Attrs.of(transpose_b=True)
    assert mm.cost == Cost(flops=48, bytes_read=0, bytes_written=8)
    assert mm.phase is Phase.BWD
    assert mm.result.type == TensorType((2, 4), F32)
    assert print_graph(g) == (
        "graph @demo {\n"
        '  %x = input "x" : f32[2,3] fwd\n'
        '  %w = param "w#1" {init="zeros"} : f32[4,3] fwd\n'
        "  %1 = matmul %x, %w {transpose_b=true} : f32[2,4] bwd cost(flops=48, read=0, write=8)\n"
        "  return %1\n"
        "}\n"
    )


def test_attribute_values_of_every_kind() -> None:
    text = (
        "graph @a {\n"
        '  %x = input "x" {a=-7, b=1.5e-05, c=-0.0, d=inf, e=-inf, f=nan, g=true, h=none, '
        'i=[], j=[[1, [2.0]], "s"], k="\\u00e9\\n\\"", l=123456789012345678901234567890} : f32[] fwd\n'
        "  return %x\n"
        "}\n"
    )
    g = parse_graph(text)
    attrs = g.ops[0].attrs.as_dict()
    assert attrs["a"] == -7 and isinstance(attrs["a"], int)
    assert attrs["b"] == 1.5e-05
    assert math.copysign(1.0, attrs["c"]) == -1.0  # type: ignore[arg-type]
    assert attrs["d"] == math.inf and attrs["e"] == -math.inf
    assert math.isnan(attrs["f"])  # type: ignore[arg-type]
    assert attrs["g"] is True and attrs["h"] is None
    assert attrs["i"] == () and attrs["j"] == ((1, (2.0,)), "s")
    assert attrs["k"] == 'é\n"'
    assert attrs["l"] == 123456789012345678901234567890
    assert print_graph(g) == text


def test_source_name_goes_back_to_its_sorted_place() -> None:
    g = Graph("g")
    g.add_op(
        OpKind.PARAM, (), [TensorType((2,), F32)], attrs=Attrs.of(name="p", a=1, z=2), names=["p"]
    )
    g.set_outputs([g.ops[0].result])
    back = parse_graph(print_graph(g))
    assert back.ops[0].attrs == g.ops[0].attrs


def test_zero_outputs_and_zero_results_print_and_parse() -> None:
    g = Graph("g")
    x = g.add_op(OpKind.INPUT, (), [TensorType((), F32)], attrs=Attrs.of(name="x")).result
    g.add_op(OpKind.ASSERT, (x,), [])
    text = print_graph(g)
    assert text == 'graph @g {\n  %0 = input "x" : f32[] fwd\n  assert %0 :  fwd\n  return \n}\n'
    assert print_graph(parse_graph(text)) == text


def test_a_long_chain_parses() -> None:
    # Deep graphs must not recurse: 3000 chained ops.
    g = Graph("chain")
    v = g.add_op(OpKind.INPUT, (), [TensorType((4,), F32)], attrs=Attrs.of(name="x")).result
    for _ in range(3000):
        v = g.add_op(OpKind.RELU, (v,), [v.type], cost=Cost(4, 16, 16)).result
    g.set_outputs([v])
    text = print_graph(g)
    assert print_graph(parse_graph(text)) == text


HEAD = 'graph @g {\n  %x = input "x" : f32[2] fwd\n'


@pytest.mark.parametrize(
    ("text", "line", "col", "needle"),
    [
        # unknown op kind, with close matches
        (HEAD + "  %y = rleu %x : f32[2] fwd\n  return %y\n}\n", 3, 8, "did you mean relu"),
        # use of an undefined value
        (HEAD + "  %y = relu %z : f32[2] fwd\n  return %y\n}\n", 3, 13, "undefined value %z"),
        # value defined twice
        (HEAD + "  %x = relu %x : f32[2] fwd\n  return %x\n}\n", 3, 3, "defined twice"),
        # a bad dimension, and an unknown element type
        (HEAD + "  %y = relu %x : f32[2,n] fwd\n  return %y\n}\n", 3, 24, "bad dimension 'n'"),
        (HEAD + "  %y = relu %x : f23[2] fwd\n  return %y\n}\n", 3, 18, "did you mean f32"),
        # missing closing brace: reported where the input ends
        (HEAD + "  return %x\n", 3, 12, "expected '}' to close graph @g"),
        # unterminated string
        ('graph @g {\n  %x = input "x : f32[2] fwd\n  return %x\n}\n', 2, 14, "unterminated"),
        # results and types disagree
        (HEAD + "  %a, %b = split %x : f32[1] fwd\n  return %a\n}\n", 3, 21, "2 result(s) but 1"),
        # a bad attribute value
        (HEAD + "  %y = relu %x {a=maybe} : f32[2] fwd\n  return %y\n}\n", 3, 19, "bad attribute"),
        # missing ':' is reported at the end of the line, not on the next one
        (HEAD + "  %y = relu %x\n  return %y\n}\n", 3, 15, "expected ':'"),
        # a quoted name on an op that is not a source
        (HEAD + '  %y = relu "n" %x : f32[2] fwd\n  return %y\n}\n', 3, 13, "only source ops"),
        # text after the graph
        (HEAD + "  return %x\n}\n}\n", 5, 1, "end of input after"),
        # a bad escape inside a string
        ('graph @g {\n  %x = input "a\\q" : f32[2] fwd\n  return %x\n}\n', 2, 16, "escape"),
        # a repeated attribute
        (HEAD + "  %y = relu %x {a=1, a=2} : f32[2] fwd\n  return %y\n}\n", 3, 22, "given twice"),
        # no graph header
        ("%x = input : f32[2]\n", 1, 1, "expected 'graph @name {'"),
        # a typo of return
        (HEAD + "  retrun %x\n}\n", 3, 3, "did you mean return"),
    ],
)
def test_parse_errors_point_at_the_culprit(text: str, line: int, col: int, needle: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_graph(text, source="bad.ir")
    err = info.value
    assert (err.line, err.col, err.source) == (line, col, "bad.ir"), str(err)
    assert needle in str(err)
    assert str(err).startswith(f"bad.ir:{line}:{col}: ")


def test_columns_count_characters_not_bytes() -> None:
    text = 'graph @g {\n  %x = input "é中" : f32[2] fwd\n  %y = relu %x, %q : f32[2] fwd\n'
    text = text.replace("%y = relu %x, %q", "%é = relu %x, %q")
    with pytest.raises(ParseError) as info:
        parse_graph(text)
    assert (info.value.line, info.value.col) == (3, 17)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mangled_text_fails_only_with_parse_errors(data: st.DataObject) -> None:
    text = list((GOLDEN / "mlp_train.ir").read_text(encoding="utf-8"))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text) - 1))
        edit = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        char = data.draw(st.sampled_from('%@{}[](),:="\\#\n -.09aefinx\u00e9'))
        if edit == "delete":
            del text[at]
        elif edit == "insert":
            text.insert(at, char)
        else:
            text[at] = char
    try:
        parse_graph("".join(text))
    except ParseError as err:
        assert err.line >= 1 and err.col >= 1


def test_huge_integers_are_a_parse_error() -> None:
    text = HEAD + "  %y = relu %x {a=" + "9" * 5000 + "} : f32[2] fwd\n  return %y\n}\n"
    with pytest.raises(ParseError, match="integer too long"):
        parse_graph(text)

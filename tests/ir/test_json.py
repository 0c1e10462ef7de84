"""The JSON form: lossless round trips, stable bytes, and errors that name the field."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.ir.strategies import fingerprint, graphs
from waferflow.errors import ParseError, VerificationError, WaferflowError
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, Graph, Value
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.printer import print_graph
from waferflow.ir.serialize import (
    FORMAT,
    VERSION,
    GraphFormatError,
    dumps_graph,
    graph_from_json,
    graph_to_json,
    loads_graph,
)
from waferflow.ir.verifier import verify_graph

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "ir"
F32 = TensorType((2,), DType.F32)


def _strict_json(text: str) -> Any:
    """Standard JSON only: NaN / Infinity literals are refused."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_json_round_trip_is_lossless_and_stable(g: Graph) -> None:
    text = dumps_graph(g)
    assert dumps_graph(g) == text  # deterministic
    _strict_json(text)
    back = loads_graph(text)
    assert fingerprint(back) == fingerprint(g)
    assert dumps_graph(back) == text
    assert print_graph(back) == print_graph(g)
    verify_graph(back)
    # the dict form too, without going through text
    assert fingerprint(graph_from_json(graph_to_json(g))) == fingerprint(g)


def _one_source(**attrs: Any) -> Graph:
    g = Graph("g")
    x = g.add_op(OpKind.INPUT, (), [F32], attrs=Attrs.of(name="x", **attrs), names=["x"]).result
    g.set_outputs([x])
    return g


def test_tuples_and_non_finite_floats_survive() -> None:
    g = _one_source(t=(1, (2.5, ("s", None)), ()), pinf=math.inf, ninf=-math.inf, nan=math.nan)
    doc = graph_to_json(g)
    assert doc["ops"][0]["attrs"]["pinf"] == {"float": "inf"}
    assert doc["ops"][0]["attrs"]["ninf"] == {"float": "-inf"}
    assert doc["ops"][0]["attrs"]["nan"] == {"float": "nan"}
    assert doc["ops"][0]["attrs"]["t"] == [1, [2.5, ["s", None]], []]
    back = loads_graph(dumps_graph(g)).ops[0].attrs.as_dict()
    assert back["t"] == (1, (2.5, ("s", None)), ())
    assert isinstance(back["t"], tuple) and isinstance(back["t"][1], tuple)  # type: ignore[index]
    assert back["pinf"] == math.inf and back["ninf"] == -math.inf
    assert math.isnan(back["nan"])  # type: ignore[arg-type]


def test_ints_floats_and_bools_stay_apart() -> None:
    back = loads_graph(dumps_graph(_one_source(i=1, f=1.0, b=True, z=-0.0))).ops[0].attrs
    assert type(back.get("i")) is int and type(back.get("f")) is float
    assert back.get("b") is True
    assert math.copysign(1.0, back.get("z")) == -1.0  # type: ignore[arg-type]


def test_golden_json() -> None:
    ir_text = (GOLDEN / "mlp_train.ir").read_text(encoding="utf-8")
    json_text = (GOLDEN / "mlp_train.json").read_text(encoding="utf-8")
    g = parse_graph(ir_text)
    assert graph_to_json(g) == json.loads(json_text)
    assert dumps_graph(g) == json.dumps(json.loads(json_text), sort_keys=True)
    assert print_graph(loads_graph(json_text)) == ir_text


def _doc() -> dict[str, Any]:
    g = Graph("g")
    x = g.add_op(OpKind.INPUT, (), [F32], attrs=Attrs.of(name="x"), names=["x"]).result
    y = g.add_op(OpKind.RELU, (x,), [F32], attrs=Attrs.of(a=(1, 2)), names=["y"]).result
    g.set_outputs([y])
    return graph_to_json(g)


def _edit(path: list[Any], value: Any, delete: bool = False) -> dict[str, Any]:
    doc = copy.deepcopy(_doc())
    node: Any = doc
    for step in path[:-1]:
        node = node[step]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "path", "needle"),
    [
        (_edit(["format"], "onnx"), "$.format", "unknown format 'onnx'"),
        (_edit(["version"], 3), "$.version", "reads versions 1, 2"),
        (_edit(["version"], True), "$.version", "unsupported version"),
        (_edit(["outputs"], None, delete=True), "$", "missing field 'outputs'"),
        (_edit(["extra"], 1), "$.extra", "unknown field"),
        (_edit(["ops", 1, "kind"], "rleu"), "$.ops[1].kind", "did you mean relu"),
        (_edit(["ops", 1, "kindd"], "relu"), "$.ops[1].kindd", "did you mean 'kind'"),
        (_edit(["ops", 1, "operands", 0], "nope"), "$.ops[1].operands[0]", "not defined"),
        (_edit(["ops", 1, "results", 0, "name"], "x"), "$.ops[1].results[0].name", "twice"),
        (
            _edit(["ops", 0, "results", 0, "shape", 0], -1),
            "$.ops[0].results[0].shape[0]",
            "non-neg",
        ),
        (_edit(["ops", 0, "results", 0, "dtype"], "f31"), "$.ops[0].results[0].dtype", "f32"),
        (_edit(["ops", 1, "attrs", "a", 1], {"x": 1}), "$.ops[1].attrs.a[1]", "attribute value"),
        (_edit(["ops", 1, "attrs", "not-id"], 1), "$.ops[1].attrs.not-id", "identifier"),
        (_edit(["ops", 1, "phase"], "back"), "$.ops[1].phase", "unknown phase"),
        (_edit(["ops", 1, "cost", "flops"], 1.5), "$.ops[1].cost.flops", "an integer"),
        (_edit(["ops", 1, "prov", "module"], 3), "$.ops[1].prov.module", "a string"),
        (_edit(["outputs", 0], "zz"), "$.outputs[0]", "not defined"),
        (_edit(["ops"], {}), "$.ops", "expected an array"),
    ],
)
def test_bad_documents_name_the_field(doc: dict[str, Any], path: str, needle: str) -> None:
    with pytest.raises(GraphFormatError) as info:
        graph_from_json(doc)
    assert info.value.path == path
    assert str(info.value).startswith(path + ": ")
    assert needle in str(info.value)
    assert isinstance(info.value, WaferflowError)


def test_defaults_for_optional_op_fields() -> None:
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "name": "tiny",
        "ops": [{"kind": "input", "results": [{"name": "x", "dtype": "f32", "shape": []}]}],
        "outputs": ["x"],
    }
    g = graph_from_json(doc)
    assert print_graph(g) == "graph @tiny {\n  %x = input : f32[] fwd\n  return %x\n}\n"


def test_malformed_json_is_a_parse_error_with_position() -> None:
    with pytest.raises(ParseError) as info:
        loads_graph('{\n  "format": "waferflow.graph",\n  "version": 1,,\n}', source="g.json")
    assert (info.value.line, info.value.col, info.value.source) == (3, 16, "g.json")


def test_duplicate_keys_and_nan_literals_are_refused() -> None:
    good = dumps_graph(parse_graph((GOLDEN / "mlp_train.ir").read_text(encoding="utf-8")))
    with pytest.raises(GraphFormatError, match="key 'name' twice"):
        loads_graph(good.replace('"name": "mlp_train"', '"name": "a", "name": "b"'))
    with pytest.raises(GraphFormatError, match="NaN is not JSON"):
        loads_graph(good.replace('{"float": "nan"}', "NaN"))


def test_writing_a_graph_with_a_foreign_operand_fails() -> None:
    g = Graph("g")
    stray = Value("stray", F32)
    y = g.add_op(OpKind.RELU, (stray,), [F32]).result
    g.set_outputs([y])
    with pytest.raises(VerificationError, match="uses %stray"):
        graph_to_json(g)

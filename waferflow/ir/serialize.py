"""The IR as JSON, for machine interchange (never pickle).

A document looks like::

    {"format": "waferflow.graph", "version": 1, "name": "mlp",
     "ops": [{"kind": "input", "operands": [], "results": [{"name": "x", "dtype": "f32",
              "shape": [32, 512]}], "attrs": {"name": "x"}, "phase": "fwd",
              "prov": {"module": "", "aten": ""},
              "cost": {"flops": 0, "bytes_read": 0, "bytes_written": 0}}, ...],
     "outputs": ["x"]}

Values are referred to by name. Attribute tuples are JSON arrays (they come back as
tuples); the non-finite floats JSON lacks are written ``{"float": "inf"}``,
``{"float": "-inf"}`` and ``{"float": "nan"}``. Attributes are an object, so they
load in sorted key order, as ``Attrs.of`` keeps them. The full description is in
docs/ir.md.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable
from typing import Any

from waferflow.errors import FormatError, VerificationError
from waferflow.fileio import INT64_MAX, loads_json, short, want, want_object
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, AttrValue, Cost, Graph, Phase, Provenance, Value
from waferflow.ir.opkind import OpKind

__all__ = [
    "FORMAT",
    "VERSION",
    "GraphFormatError",
    "dumps_graph",
    "graph_from_json",
    "graph_to_json",
    "loads_graph",
]

FORMAT = "waferflow.graph"
VERSION = 1

_TOP_KEYS = ("format", "version", "name", "ops", "outputs")
_OP_KEYS = ("kind", "operands", "results", "attrs", "phase", "prov", "cost")
_RESULT_KEYS = ("name", "dtype", "shape")
_PROV_KEYS = ("module", "aten")
_COST_KEYS = ("flops", "bytes_read", "bytes_written")
_SPECIAL_FLOATS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class GraphFormatError(FormatError):
    """A JSON graph document that does not follow the format; ``path`` names the field
    (``$.ops[3].results[0].shape``)."""

    def __init__(self, path: str, message: str, source: str = "") -> None:
        super().__init__(path, message, source)


# -- writing ---------------------------------------------------------------------------


def _encode_attr(value: AttrValue) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, tuple):
        return [_encode_attr(v) for v in value]
    return value


def graph_to_json(graph: Graph) -> dict[str, Any]:
    """The graph as a JSON-ready dict (only dicts, lists, strings, numbers, bools, None).

    Raises ``VerificationError`` if an operand or output is not defined earlier in the
    graph, since such a document could not be read back.
    """
    defined: set[int] = set()
    ops: list[dict[str, Any]] = []
    for index, op in enumerate(graph.ops):
        for v in op.operands:
            if id(v) not in defined:
                raise VerificationError(
                    f"cannot write graph @{graph.name} as JSON: op {index} "
                    f"({op.kind.value}) uses %{v.name} before any op of the graph defines it"
                )
        defined.update(id(v) for v in op.results)
        ops.append(
            {
                "kind": op.kind.value,
                "operands": [v.name for v in op.operands],
                "results": [
                    {"name": v.name, "dtype": v.type.dtype.value, "shape": list(v.type.shape)}
                    for v in op.results
                ],
                "attrs": {k: _encode_attr(v) for k, v in op.attrs},
                "phase": op.phase.value,
                "prov": {"module": op.prov.module, "aten": op.prov.aten},
                "cost": {
                    "flops": op.cost.flops,
                    "bytes_read": op.cost.bytes_read,
                    "bytes_written": op.cost.bytes_written,
                },
            }
        )
    for v in graph.outputs:
        if id(v) not in defined:
            raise VerificationError(
                f"cannot write graph @{graph.name} as JSON: output %{v.name} is not "
                f"defined by any op of the graph"
            )
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": graph.name,
        "ops": ops,
        "outputs": [v.name for v in graph.outputs],
    }


def dumps_graph(graph: Graph) -> str:
    """The graph as one line of JSON with sorted keys: stable, byte for byte."""
    return json.dumps(graph_to_json(graph), sort_keys=True, indent=None, allow_nan=False)


# -- reading ---------------------------------------------------------------------------


def _want_object(value: Any, path: str, keys: tuple[str, ...], required: int) -> dict[str, Any]:
    """``value`` as an object whose keys are among ``keys``; the first ``required`` of
    them must be present."""
    return want_object(value, path, keys, required, error=GraphFormatError)


def _want(value: Any, path: str, check: Callable[[Any], bool], what: str) -> Any:
    return want(value, path, check, what, error=GraphFormatError)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_list(v: Any) -> bool:
    return isinstance(v, list)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return _is_int(v) and 0 <= v <= INT64_MAX


def _decode_attr(value: Any, path: str) -> AttrValue:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return tuple(_decode_attr(v, f"{path}[{i}]") for i, v in enumerate(value))
    special = value.get("float") if isinstance(value, dict) and len(value) == 1 else None
    if isinstance(special, str) and special in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[special]
    raise GraphFormatError(
        path,
        "expected an attribute value (number, string, boolean, null, array, or "
        '{"float": "inf" | "-inf" | "nan"})',
    )


def _enum_value(enum: Any, text: Any, path: str, what: str) -> Any:
    _want(text, path, _is_str, f"{what} as a string")
    try:
        return enum(text)
    except ValueError:
        known = [m.value for m in enum]
        close = difflib.get_close_matches(text[:100], known, n=3)
        hint = "; did you mean " + " or ".join(close) + "?" if close else ""
        raise GraphFormatError(path, f"unknown {what} {short(text)}{hint}") from None


def _lookup(names: dict[str, Value], name: Any, path: str) -> Value:
    _want(name, path, _is_str, "a value name")
    value = names.get(name)
    if value is None:
        raise GraphFormatError(
            path,
            f"value {short(name)} is not defined by an earlier op (ops are in topological order)",
        )
    return value


def graph_from_json(doc: Any) -> Graph:
    """Build a graph from a dict as ``graph_to_json`` returns it.

    Raises ``GraphFormatError`` naming the JSON path of the first bad field.
    """
    _want_object(doc, "$", _TOP_KEYS, required=len(_TOP_KEYS))
    if doc["format"] != FORMAT:
        raise GraphFormatError(
            "$.format", f"unknown format {short(doc['format'])}; expected {FORMAT!r}"
        )
    version = doc["version"]
    if not _is_int(version) or version != VERSION:
        raise GraphFormatError(
            "$.version",
            f"unsupported version {short(version)}; this waferflow reads version {VERSION}",
        )
    graph = Graph(_want(doc["name"], "$.name", _is_str, "a string"))
    names: dict[str, Value] = {}
    ops = _want(doc["ops"], "$.ops", _is_list, "an array")
    for i, raw in enumerate(ops):
        _add_op(graph, names, raw, f"$.ops[{i}]")
    outputs = _want(doc["outputs"], "$.outputs", _is_list, "an array")
    graph.set_outputs(_lookup(names, n, f"$.outputs[{i}]") for i, n in enumerate(outputs))
    return graph


def _add_op(graph: Graph, names: dict[str, Value], raw: Any, path: str) -> None:
    _want_object(raw, path, _OP_KEYS, required=1)
    kind = _enum_value(OpKind, raw["kind"], f"{path}.kind", "op kind")
    operands_raw = _want(raw.get("operands", []), f"{path}.operands", _is_list, "an array")
    operands = [_lookup(names, n, f"{path}.operands[{j}]") for j, n in enumerate(operands_raw)]
    results_raw = _want(raw.get("results", []), f"{path}.results", _is_list, "an array")
    result_names: list[str] = []
    types: list[TensorType] = []
    for j, res in enumerate(results_raw):
        rpath = f"{path}.results[{j}]"
        _want_object(res, rpath, _RESULT_KEYS, required=3)
        name = _want(res["name"], f"{rpath}.name", _is_str, "a string")
        if not name:
            raise GraphFormatError(f"{rpath}.name", "value names must not be empty")
        if name in names or name in result_names:
            raise GraphFormatError(f"{rpath}.name", f"value {short(name)} is defined twice")
        result_names.append(name)
        dtype = _enum_value(DType, res["dtype"], f"{rpath}.dtype", "element type")
        shape = _want(res["shape"], f"{rpath}.shape", _is_list, "an array")
        for k, d in enumerate(shape):
            if not _is_count(d):
                raise GraphFormatError(
                    f"{rpath}.shape[{k}]",
                    f"expected a non-negative integer up to 2**63-1, found {short(d)}",
                )
        try:
            types.append(TensorType(tuple(shape), dtype))
        except ValueError as exc:
            raise GraphFormatError(f"{rpath}.shape", str(exc)) from None
    attrs_raw = want_object(raw.get("attrs", {}), f"{path}.attrs", error=GraphFormatError)
    items: list[tuple[str, AttrValue]] = []
    for key in sorted(attrs_raw):
        if not key.isidentifier():
            raise GraphFormatError(
                f"{path}.attrs.{key[:60]}",
                f"attribute name {short(key)} is not an identifier",
            )
        items.append((key, _decode_attr(attrs_raw[key], f"{path}.attrs.{key}")))
    phase = _enum_value(Phase, raw.get("phase", "fwd"), f"{path}.phase", "phase")
    prov_raw = _want_object(raw.get("prov", {}), f"{path}.prov", _PROV_KEYS, required=0)
    prov_parts = [
        _want(prov_raw.get(k, ""), f"{path}.prov.{k}", _is_str, "a string") for k in _PROV_KEYS
    ]
    cost_raw = _want_object(raw.get("cost", {}), f"{path}.cost", _COST_KEYS, required=0)
    cost_parts = [
        _want(cost_raw.get(k, 0), f"{path}.cost.{k}", _is_count, "an integer in 0..2**63-1")
        for k in _COST_KEYS
    ]
    op = graph.add_op(
        kind,
        operands,
        types,
        attrs=Attrs(tuple(items)),
        cost=Cost(*cost_parts),
        phase=phase,
        prov=Provenance(*prov_parts),
        names=result_names,
        exact_names=True,
    )
    for v in op.results:
        names[v.name] = v


def loads_graph(text: str, source: str = "<json>") -> Graph:
    """Read a graph from JSON text (as ``dumps_graph`` writes it).

    Malformed JSON raises ``ParseError`` with line and column; a well-formed document
    that breaks the format raises ``GraphFormatError`` naming the field.
    """
    try:
        doc = loads_json(
            text, source, constant_hint='; write non-finite floats as {"float": "inf"} and so on'
        )
        return graph_from_json(doc)
    except FormatError as exc:  # one class for the whole format, with the file named
        raise GraphFormatError(exc.path, exc.detail, source) from None

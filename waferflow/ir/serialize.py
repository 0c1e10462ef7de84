"""The IR as JSON, for machine interchange (never pickle).

A document looks like::

    {"format": "waferflow.graph", "version": 1, "name": "mlp",
     "ops": [{"kind": "input", "operands": [], "results": [{"name": "x", "dtype": "f32",
              "shape": [32, 512]}], "attrs": {"name": "x"}, "phase": "fwd",
              "prov": {"module": "", "aten": ""},
              "cost": {"flops": 0, "bytes_read": 0, "bytes_written": 0}}, ...],
     "outputs": ["x"]}

A parallelised graph also carries ``"parallel"`` (its plan), a ``"sharding"`` on each
result that is not replicated, and a ``"par"`` on each op (docs/ir.md); such a
document is version 2, any other version 1. Values are referred to by name. Attribute tuples are JSON arrays (they come back as
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
from waferflow.fileio import INT64_MAX, kind_name, loads_json, short, want, want_object
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import (
    REPLICATED_EVERYWHERE,
    Attrs,
    AttrValue,
    Cost,
    Graph,
    Op,
    Phase,
    Provenance,
    Value,
)
from waferflow.ir.opkind import OpKind
from waferflow.ir.parallel import GraphParallel, MbMode, OpParallel, ParallelLevel, sorted_axes
from waferflow.ir.sharding import PARTIAL, MeshAxis, Placement, Sharding, Split

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
VERSION = 2  # the newest version written; 1 (no parallel annotations) is also read
_VERSIONS = (1, 2)

_TOP_KEYS = ("format", "version", "name", "ops", "outputs", "parallel")
_OP_KEYS = ("kind", "operands", "results", "attrs", "phase", "prov", "cost", "par")
_RESULT_KEYS = ("name", "dtype", "shape", "sharding")
_GRAPH_PAR_KEYS = (
    "plan",
    "wafer",
    "dp",
    "tp",
    "mb",
    "pp",
    "ranks",
    "level",
    "reshard",
    "ep",
    "zero",
)
_OP_PAR_KEYS = ("stage", "mode", "inputs", "divided", "stats", "region")
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


def _encode_sharding(s: Sharding) -> dict[str, Any]:
    return {
        a.value: {"split": p.dim, "block": p.block} if isinstance(p, Split) else "partial"
        for a, p in s.placements
    }


def _encode_par(op: Op) -> dict[str, Any]:
    par = op.par
    assert par is not None
    return {
        "stage": par.stage,
        "mode": par.mode.value,
        "inputs": [_encode_sharding(s) for s in par.inputs],
        "divided": [a.value for a in par.divided],
        "stats": [[a.value, d] for a, d in par.stats],
        "region": list(par.region),
    }


def _encode_result(v: Value) -> dict[str, Any]:
    out: dict[str, Any] = {"name": v.name, "dtype": v.type.dtype.value, "shape": list(v.type.shape)}
    if not v.sharding.is_replicated:
        out["sharding"] = _encode_sharding(v.sharding)
    return out


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
        doc_op: dict[str, Any] = {
                "kind": op.kind.value,
                "operands": [v.name for v in op.operands],
                "results": [_encode_result(v) for v in op.results],
                "attrs": {k: _encode_attr(v) for k, v in op.attrs},
                "phase": op.phase.value,
                "prov": {"module": op.prov.module, "aten": op.prov.aten},
                "cost": {
                    "flops": op.cost.flops,
                    "bytes_read": op.cost.bytes_read,
                    "bytes_written": op.cost.bytes_written,
                },
            }  # fmt: skip
        if op.par is not None:
            doc_op["par"] = _encode_par(op)
        ops.append(doc_op)
    for v in graph.outputs:
        if id(v) not in defined:
            raise VerificationError(
                f"cannot write graph @{graph.name} as JSON: output %{v.name} is not "
                f"defined by any op of the graph"
            )
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": 1,
        "name": graph.name,
        "ops": ops,
        "outputs": [v.name for v in graph.outputs],
    }
    annotated = graph.parallel is not None or any(
        "par" in o or any("sharding" in r for r in o["results"]) for o in ops
    )
    if annotated:
        doc["version"] = 2
    gp = graph.parallel
    if gp is not None:
        doc["parallel"] = {
            "plan": gp.plan, "wafer": gp.wafer, "dp": gp.dp, "tp": gp.tp, "mb": gp.mb,
            "pp": gp.pp, "ranks": gp.ranks, "level": gp.level.value,
            **({"reshard": True} if gp.reshard else {}),
        }  # fmt: skip
        if gp.zero:
            doc["parallel"]["zero"] = gp.zero
        if gp.ep > 1:
            doc["parallel"]["ep"] = gp.ep
    return doc


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
    _want_object(doc, "$", _TOP_KEYS, required=5)
    if doc["format"] != FORMAT:
        raise GraphFormatError(
            "$.format", f"unknown format {short(doc['format'])}; expected {FORMAT!r}"
        )
    version = doc["version"]
    if not _is_int(version) or version not in _VERSIONS:
        raise GraphFormatError(
            "$.version",
            f"unsupported version {short(version)}; this waferflow reads versions "
            f"{', '.join(map(str, _VERSIONS))}",
        )
    graph = Graph(_want(doc["name"], "$.name", _is_str, "a string"))
    if "parallel" in doc:
        if version < 2:
            raise GraphFormatError("$.parallel", "parallel annotations need version 2")
        graph.parallel = _decode_graph_parallel(doc["parallel"], "$.parallel")
    names: dict[str, Value] = {}
    ops = _want(doc["ops"], "$.ops", _is_list, "an array")
    for i, raw in enumerate(ops):
        _add_op(graph, names, raw, f"$.ops[{i}]")
    outputs = _want(doc["outputs"], "$.outputs", _is_list, "an array")
    graph.set_outputs(_lookup(names, n, f"$.outputs[{i}]") for i, n in enumerate(outputs))
    return graph


def _decode_graph_parallel(raw: Any, path: str) -> GraphParallel:
    _want_object(raw, path, _GRAPH_PAR_KEYS, required=2)
    plan = _want(raw["plan"], f"{path}.plan", _is_str, "a string")
    wafer = _want(raw["wafer"], f"{path}.wafer", _is_str, "a string")
    ints: dict[str, int] = {}
    for key in ("dp", "tp", "mb", "pp", "ranks", "ep"):
        value = raw.get(key, 1)
        if not _is_int(value) or value < 1:
            raise GraphFormatError(
                f"{path}.{key}", f"expected an integer >= 1, found {short(value)}"
            )
        ints[key] = value
    level = _enum_value(ParallelLevel, raw.get("level", "sharded"), f"{path}.level", "level")
    zero = raw.get("zero", 0)
    if not _is_int(zero) or zero not in (0, 1, 2, 3):
        raise GraphFormatError(f"{path}.zero", f"expected a ZeRO stage 0..3, found {short(zero)}")
    reshard = raw.get("reshard", False)
    if not isinstance(reshard, bool):
        raise GraphFormatError(f"{path}.reshard", f"expected true or false, found {short(reshard)}")
    return GraphParallel(plan, wafer, level=level, reshard=reshard, zero=zero, **ints)


def _decode_sharding(raw: Any, path: str) -> Sharding:
    if not isinstance(raw, dict):
        raise GraphFormatError(path, f"expected an object, found {kind_name(raw)}")
    items: dict[MeshAxis, Placement] = {}
    for key, value in raw.items():
        axis = _enum_value(MeshAxis, key, f"{path}.{key}", "mesh axis")
        if value == "partial":
            items[axis] = PARTIAL
            continue
        _want_object(value, f"{path}.{key}", ("split", "block"), required=2)
        dim, block = value["split"], value["block"]
        if not _is_int(dim) or dim < 0:
            raise GraphFormatError(
                f"{path}.{key}.split", f"expected a dimension, found {short(dim)}"
            )
        if not _is_int(block) or block < 1:
            raise GraphFormatError(
                f"{path}.{key}.block", f"expected an integer >= 1, found {short(block)}"
            )
        items[axis] = Split(dim, block)
    return Sharding.of(items)


def _decode_par(raw: Any, path: str, operands: list[Value]) -> OpParallel:
    _want_object(raw, path, _OP_PAR_KEYS, required=1)
    stage = _want(raw["stage"], f"{path}.stage", _is_int, "an integer")
    if stage < 0:
        raise GraphFormatError(f"{path}.stage", f"expected a stage >= 0, found {stage}")
    mode = _enum_value(MbMode, raw.get("mode", "early"), f"{path}.mode", "micro-batch mode")
    if "inputs" in raw:
        cells = _want(raw["inputs"], f"{path}.inputs", _is_list, "an array")
        if len(cells) != len(operands):
            raise GraphFormatError(
                f"{path}.inputs", f"{len(cells)} placement(s) for {len(operands)} operand(s)"
            )
        inputs = tuple(_decode_sharding(c, f"{path}.inputs[{i}]") for i, c in enumerate(cells))
    else:
        inputs = tuple(v.sharding for v in operands)
    divided_raw = _want(raw.get("divided", []), f"{path}.divided", _is_list, "an array")
    divided = sorted_axes(
        _enum_value(MeshAxis, a, f"{path}.divided[{i}]", "mesh axis")
        for i, a in enumerate(divided_raw)
    )
    stats: list[tuple[MeshAxis, int]] = []
    for i, pair in enumerate(_want(raw.get("stats", []), f"{path}.stats", _is_list, "an array")):
        if not (isinstance(pair, list) and len(pair) == 2 and _is_int(pair[1])):
            raise GraphFormatError(f"{path}.stats[{i}]", "expected [axis, dimension]")
        stats.append(
            (_enum_value(MeshAxis, pair[0], f"{path}.stats[{i}][0]", "mesh axis"), pair[1])
        )
    region_raw = _want(raw.get("region", []), f"{path}.region", _is_list, "an array")
    for i, c in enumerate(region_raw):
        if not _is_int(c) or c < 0:
            raise GraphFormatError(f"{path}.region[{i}]", f"expected a core id, found {short(c)}")
    return OpParallel(stage, mode, inputs, divided, tuple(stats), tuple(region_raw))


def _add_op(graph: Graph, names: dict[str, Value], raw: Any, path: str) -> None:
    _want_object(raw, path, _OP_KEYS, required=1)
    kind = _enum_value(OpKind, raw["kind"], f"{path}.kind", "op kind")
    operands_raw = _want(raw.get("operands", []), f"{path}.operands", _is_list, "an array")
    operands = [_lookup(names, n, f"{path}.operands[{j}]") for j, n in enumerate(operands_raw)]
    results_raw = _want(raw.get("results", []), f"{path}.results", _is_list, "an array")
    result_names: list[str] = []
    types: list[TensorType] = []
    shardings: list[Sharding] = []
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
        shardings.append(
            _decode_sharding(res["sharding"], f"{rpath}.sharding")
            if "sharding" in res
            else REPLICATED_EVERYWHERE
        )
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
    par = _decode_par(raw["par"], f"{path}.par", operands) if "par" in raw else None
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
        par=par,
        shardings=shardings,
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

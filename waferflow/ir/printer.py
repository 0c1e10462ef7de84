"""The IR's text form (printer). The grammar is in docs/ir.md; ``parser.py`` reads it back.

    graph @mlp {
      %x = input "x" : f32[32,512] fwd
      %1 = matmul %x, %w1 {transpose_b=true} : f32[32,1024] fwd loc("fc1", "aten.mm.default") cost(flops=33554432, read=2162688, write=131072)
      return %1
    }

Everything after the result types (phase, loc, cost) is part of the op and
round-trips exactly; a ``#`` starts a comment the parser ignores.
"""

from __future__ import annotations

import json
import math

from waferflow.ir.graph import Attrs, AttrValue, Cost, Graph, Op, Provenance
from waferflow.ir.opkind import SOURCES


def format_attr_value(value: AttrValue) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".e") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value)
    return "[" + ", ".join(format_attr_value(v) for v in value) + "]"


def format_attrs(attrs: Attrs) -> str:
    if not len(attrs):
        return ""
    return "{" + ", ".join(f"{k}={format_attr_value(v)}" for k, v in attrs) + "}"


def format_op(op: Op) -> str:
    parts: list[str] = []
    results = ", ".join(f"%{v.name}" for v in op.results)
    head = f"{results} = {op.kind.value}" if op.results else op.kind.value
    parts.append(head)
    attrs = op.attrs
    if op.kind in SOURCES and isinstance(attrs.get("name"), str):
        parts.append(json.dumps(attrs.get("name")))
        attrs = Attrs(tuple((k, v) for k, v in attrs if k != "name"))
    if op.operands:
        parts.append(", ".join(f"%{v.name}" for v in op.operands))
    if len(attrs):
        parts.append(format_attrs(attrs))
    text = " ".join(parts)
    text += " : " + ", ".join(str(v.type) for v in op.results)
    text += " " + op.phase.value
    if op.prov != Provenance():
        text += f" loc({json.dumps(op.prov.module)}, {json.dumps(op.prov.aten)})"
    if op.cost != Cost():
        c = op.cost
        text += f" cost(flops={c.flops}, read={c.bytes_read}, write={c.bytes_written})"
    return text


def print_graph(graph: Graph) -> str:
    """The whole graph as text, ending in a newline."""
    lines = [f"graph @{graph.name} {{"]
    lines.extend("  " + format_op(op) for op in graph.ops)
    lines.append("  return " + ", ".join(f"%{v.name}" for v in graph.outputs))
    lines.append("}")
    return "\n".join(lines) + "\n"

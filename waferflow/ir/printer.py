"""The IR's text form (printer). The grammar is in docs/ir.md; ``parser.py`` reads it back.

    graph @mlp {
      %x = input "x" : f32[32,512] fwd
      %1 = matmul %x, %w1 {transpose_b=true} : f32[32,1024] fwd loc("fc1", "aten.mm.default") cost(flops=33554432, read=2162688, write=131072)
      return %1
    }

Everything after the result types (phase, loc, cost) is part of the op and
round-trips exactly; a ``#`` starts a comment the parser ignores. A parallelised
graph also prints its plan (``parallel(...)`` after its name), each value's
sharding after its type (``f32[8,32]{dp=split(0), tp=partial}``) and each op's
stage, micro-batch mode, operand placements and region (``par(...)`` at the end).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from waferflow.ir.graph import Attrs, AttrValue, Cost, Graph, Op, Provenance
from waferflow.ir.opkind import SOURCES
from waferflow.ir.parallel import GraphParallel, MbMode, OpParallel
from waferflow.ir.sharding import MeshAxis, Partial, Placement, Sharding, Split

Degrees = Mapping[MeshAxis, int]


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


def format_placement(p: Placement, size: int, n: int) -> str:
    """``split(d)`` (contiguous over ``n`` ranks), ``split(d, block=b)``, ``partial``
    or ``replicated``."""
    if isinstance(p, Split):
        if p.block * n == size and n > 1:
            return f"split({p.dim})"
        return f"split({p.dim}, block={p.block})"
    return "partial" if isinstance(p, Partial) else "replicated"


def format_sharding(s: Sharding, shape: Sequence[int], degrees: Degrees) -> str:
    """``{dp=split(0), tp=partial}``; ``{}`` when replicated along every axis."""
    parts = []
    for axis, p in s.placements:
        size = shape[p.dim] if isinstance(p, Split) and 0 <= p.dim < len(shape) else 0
        parts.append(f"{axis.value}={format_placement(p, size, degrees.get(axis, 0))}")
    return "{" + ", ".join(parts) + "}"


def format_graph_parallel(gp: GraphParallel) -> str:
    extra = (f", ep={gp.ep}" if gp.ep > 1 else "") + (f", zero={gp.zero}" if gp.zero else "")
    return (
        f"parallel(plan={json.dumps(gp.plan)}, wafer={json.dumps(gp.wafer)}, dp={gp.dp}, "
        f"tp={gp.tp}, mb={gp.mb}, pp={gp.pp}, ranks={gp.ranks}, level={gp.level.value}"
        + (", reshard=true" if gp.reshard else "")
        + f"{extra})"
    )


def format_op_parallel(op: Op, par: OpParallel, degrees: Degrees) -> str:
    """``par(stage=0, mb=per_mb, in=[...], div=[dp, tp], stats={tp=1}, on=[0, 1])``;
    ``in`` only when some operand is needed otherwise than it is placed."""
    parts = [f"stage={par.stage}"]
    if par.mode is not MbMode.EARLY:
        parts.append(f"mb={par.mode.value}")
    own = tuple(v.sharding for v in op.operands)
    if par.inputs != own:
        shapes = [v.type.shape for v in op.operands]
        shapes += [()] * (len(par.inputs) - len(shapes))
        cells = (format_sharding(s, sh, degrees) for s, sh in zip(par.inputs, shapes, strict=False))
        parts.append("in=[" + ", ".join(cells) + "]")
    if par.divided:
        parts.append("div=[" + ", ".join(a.value for a in par.divided) + "]")
    if par.stats:
        parts.append("stats={" + ", ".join(f"{a.value}={d}" for a, d in par.stats) + "}")
    if par.region:
        parts.append("on=[" + ", ".join(map(str, par.region)) + "]")
    return "par(" + ", ".join(parts) + ")"


def format_op(op: Op, degrees: Degrees | None = None) -> str:
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
    deg: Degrees = degrees if degrees is not None else {}
    text += " : " + ", ".join(
        str(v.type) if v.sharding.is_replicated
        else str(v.type) + format_sharding(v.sharding, v.type.shape, deg)
        for v in op.results
    )  # fmt: skip
    text += " " + op.phase.value
    if op.prov != Provenance():
        text += f" loc({json.dumps(op.prov.module)}, {json.dumps(op.prov.aten)})"
    if op.cost != Cost():
        c = op.cost
        text += f" cost(flops={c.flops}, read={c.bytes_read}, write={c.bytes_written})"
    if op.par is not None:
        text += " " + format_op_parallel(op, op.par, deg)
    return text


def print_graph(graph: Graph) -> str:
    """The whole graph as text, ending in a newline."""
    gp = graph.parallel
    head = f"graph @{graph.name} " + (format_graph_parallel(gp) + " " if gp is not None else "")
    degrees = gp.degrees() if gp is not None else {}
    lines = [head + "{"]
    lines.extend("  " + format_op(op, degrees) for op in graph.ops)
    lines.append("  return " + ", ".join(f"%{v.name}" for v in graph.outputs))
    lines.append("}")
    return "\n".join(lines) + "\n"

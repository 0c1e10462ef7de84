"""A short human-readable summary of a graph: what a user checks first."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from waferflow.ir.graph import Graph, Phase
from waferflow.ir.opkind import OpKind, group_of


@dataclass(frozen=True, slots=True)
class GraphSummary:
    name: str
    num_ops: int
    ops_by_group: tuple[tuple[str, int], ...]
    flops_by_phase: tuple[tuple[Phase, int], ...]
    param_count: int
    param_bytes: int
    input_bytes: int
    total_flops: int
    total_bytes: int

    def __str__(self) -> str:
        lines = [f"graph @{self.name}: {self.num_ops} ops"]
        lines.append(
            f"  parameters   {self.param_count:,} ({human_bytes(self.param_bytes)}),"
            f" inputs {human_bytes(self.input_bytes)}"
        )
        lines.append(
            f"  work         {human_count(self.total_flops)}FLOP,"
            f" {human_bytes(self.total_bytes)} moved"
        )
        for phase, flops in self.flops_by_phase:
            lines.append(f"    {phase.value:<5} {human_count(flops)}FLOP")
        groups = ", ".join(f"{g} {n}" for g, n in self.ops_by_group)
        lines.append(f"  ops by group {groups}")
        return "\n".join(lines)


def summarize(graph: Graph) -> GraphSummary:
    groups = Counter(group_of(op.kind) for op in graph.ops)
    flops = Counter[Phase]()
    params = [op.result for op in graph.ops if op.kind == OpKind.PARAM]
    inputs = [op.result for op in graph.ops if op.kind == OpKind.INPUT]
    for op in graph.ops:
        flops[op.phase] += op.cost.flops
    total = graph.total_cost()
    return GraphSummary(
        name=graph.name,
        num_ops=len(graph.ops),
        ops_by_group=tuple(sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))),
        flops_by_phase=tuple((p, flops[p]) for p in Phase if flops[p]),
        param_count=sum(v.type.numel for v in params),
        param_bytes=sum(v.type.nbytes for v in params),
        input_bytes=sum(v.type.nbytes for v in inputs),
        total_flops=total.flops,
        total_bytes=total.bytes,
    )


def human_count(n: float) -> str:
    """1234567 -> '1.23 M' (SI prefixes, three significant digits)."""
    for factor, prefix in (
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
    ):
        if abs(n) >= factor:
            return f"{n / factor:.3g} {prefix}"
    return f"{n:.3g} "


def human_bytes(n: float) -> str:
    """Binary prefixes: 1536 -> '1.5 KiB'."""
    for factor, prefix in (
        (2**50, "PiB"),
        (2**40, "TiB"),
        (2**30, "GiB"),
        (2**20, "MiB"),
        (2**10, "KiB"),
    ):
        if abs(n) >= factor:
            return f"{n / factor:.3g} {prefix}"
    return f"{int(n)} B"


def human_time(seconds: float, digits: int = 4) -> str:
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if abs(seconds) >= factor:
            return f"{seconds / factor:.{digits}g} {unit}"
    return f"{seconds / 1e-12:.{digits}g} ps"

"""Compute-shift matmuls (Cannon; T10): rotate an operand instead of gathering it.

When a matmul needs one operand whole along a rank axis (``all_gather`` of X, split
over the n ranks of a group, then ``X W`` on every rank), the gather-based way
waits for the whole of X and then multiplies. The compute-shift way multiplies
block by block while the blocks travel around the group's ring: at step j a rank
multiplies the block it holds (its 1/n of the matmul's share) and passes that
block to its ring successor, which is a ring all-gather whose steps interleave
with the n pieces of the matmul (T10: "operands rotate between neighbouring cores
instead of being gathered"; Cannon's algorithm on a 1D ring). Per rank, with the
matmul's own time c (its share, at the roofline), b the block's bytes, B and L the
links' bandwidth and latency and h the hops from a rank to its ring successor:

    gather:  T_g = (all-gather time: the cheapest algorithm's estimate) + c
             on a ring of one-hop links: (n - 1) (b / B + L) + c
    shift:   T_s = c / n + (n - 1) max(c / n, b / B + h L)

Both move (n - 1) b bytes per rank; the shift holds two blocks instead of the whole
operand. The shift wins when its successors are near (a torus, or a row of a
mesh whose ring closes over few hops) and loses when the ring's closing link is
long (a mesh row of many ranks: h = n - 1 for the last rank).

``matmul=shift`` rotates every all-gather that feeds exactly one matmul (``x W`` or
``W x`` in its matrix operands; a ZeRO-3 parameter gather, a tensor-parallel gather
between incompatible splits); ``matmul=auto`` decides each by the closed forms on
the group's cores (``decide_shifts``, run by ``schedule``; the decision is the
all-gather's attribute ``shift=true`` in the IR); ``gather`` (default) never.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferflow.ir.graph import Graph, Op, Value
from waferflow.ir.opkind import VIEWS, OpKind
from waferflow.ir.sharding import MeshAxis
from waferflow.ir.target.wafer import Wafer
from waferflow.mapper.collectives import CollectiveKind, choose_algorithm
from waferflow.mapper.routing import route
from waferflow.parallel.layout import Layout
from waferflow.parallel.plan_spec import MatmulAlgo, ParallelPlan
from waferflow.parallel.propagate import ShardingResult
from waferflow.parallel.shardcost import instance_degrees, op_cost, value_bytes

K = OpKind
SHIFTABLE = frozenset({K.MATMUL, K.BMM, K.ADDMM, K.BADDBMM})


@dataclass(frozen=True)
class ShiftCost:
    """The two ways of one gather-then-matmul, per rank (seconds, bytes)."""

    gather_seconds: float
    shift_seconds: float
    block_bytes: int
    ranks: int


def shift_time(n: int, compute_s: float, block_bytes: int, bandwidth: float, latency: float,
               hops: int) -> float:  # fmt: skip
    """``T_s`` of the module docstring."""
    step = compute_s / n
    return step + (n - 1) * max(step, block_bytes / bandwidth + hops * latency)


def matmul_reading(graph: Graph, gather: Op) -> Op | None:
    """The one matmul that reads ``gather``'s result (through views) as a matrix
    operand, or None (several readers, or not a matmul)."""
    readers: list[tuple[Op, Value]] = []
    users = graph.users()
    stack = [gather.results[0]]
    while stack:
        v = stack.pop()
        for u in users.get(v, []):
            if u.kind in VIEWS:
                stack.extend(u.results)
            else:
                readers.append((u, v))
    if len(readers) != 1 or readers[0][0].kind not in SHIFTABLE:
        return None
    op, v = readers[0]
    first = 1 if op.kind in (K.ADDMM, K.BADDBMM) else 0
    return op if any(x is v for x in op.operands[first : first + 2]) else None


def is_shift(op: Op) -> bool:
    return op.kind is K.ALL_GATHER and bool(op.attrs.get("shift", False))


def reads_shift(op: Op) -> Op | None:
    """The shift all-gather whose blocks ``op`` (a matmul) multiplies, if any."""
    if op.kind not in SHIFTABLE:
        return None
    for v in op.operands:
        while v.producer is not None and v.producer.kind in VIEWS and v.producer.operands:
            v = v.producer.operands[0]
        if v.producer is not None and is_shift(v.producer):
            return v.producer
    return None


def decide_shifts(
    graph: Graph, plan: ParallelPlan, sharding: ShardingResult, wafer: Wafer, layout: Layout
) -> list[str]:
    """Mark the all-gathers that rotate (``shift=true``) as ``plan.matmul`` says;
    returns a note per decision taken by cost. A mark already in the IR is kept."""
    if plan.matmul is MatmulAlgo.GATHER:
        return []
    notes = []
    for op in list(graph.ops):
        if op.kind is not K.ALL_GATHER or "shift" in op.attrs or op.par is None:
            continue
        mm = matmul_reading(graph, op)
        if mm is None or mm.par is None or mm.par.mode is not op.par.mode:
            continue  # one rotation per matmul instance
        cost = shift_cost(op, mm, plan, sharding, wafer, layout)
        if cost is None:
            continue
        take = plan.matmul is MatmulAlgo.SHIFT or cost.shift_seconds < cost.gather_seconds
        op.attrs = op.attrs.with_(shift=take)
        if plan.matmul is MatmulAlgo.AUTO:
            notes.append(
                f"matmul=auto: %{op.results[0].name} ({op.prov.module or 'top level'}) "
                f"{'rotates' if take else 'is gathered'}: shift {cost.shift_seconds * 1e6:.4g} "
                f"us vs gather {cost.gather_seconds * 1e6:.4g} us over {cost.ranks} ranks"
            )
    return notes


def shift_cost(
    gather: Op,
    mm: Op,
    plan: ParallelPlan,
    sharding: ShardingResult,
    wafer: Wafer,
    layout: Layout,
) -> ShiftCost | None:
    """Both closed forms for rank 0's group of ``gather`` on ``layout``."""
    assert gather.par is not None and mm.par is not None
    axis = MeshAxis(str(gather.attrs.get("axis")))
    mesh = plan.mesh()
    group = mesh.group(0, axis)
    n = len(group)
    if n < 2:
        return None
    cores = [layout.core(gather.par.stage, r) for r in group]
    coords = [divmod(c, wafer.cols) for c in cores]
    deg = instance_degrees(mesh, False)
    block = value_bytes(gather.operands[0], sharding.of(gather.operands[0]), deg)
    osh = sharding.ops[mm]
    flops, br, bw = op_cost(mm, osh, [sharding.of(r) for r in mm.results], mesh, 0, -1, False)
    dtype = mm.results[0].type.dtype
    compute = max(flops / wafer.peak(dtype), (br + bw) / wafer.sram_bandwidth)
    hops = max(len(route(wafer, coords[i], coords[(i + 1) % n])) - 1 for i in range(n))
    spec = wafer.link
    _, gather_s, _ = choose_algorithm(
        CollectiveKind.ALL_GATHER, n, block * n, coords, lambda a, b: route(wafer, a, b),
        lambda a, b: wafer.link_spec(a, b).bandwidth, lambda a, b: wafer.link_spec(a, b).latency,
    )  # fmt: skip
    shift_s = shift_time(n, compute, block, spec.bandwidth, spec.latency, hops)
    return ShiftCost(gather_s + compute, shift_s, block, n)


__all__ = [
    "SHIFTABLE",
    "ShiftCost",
    "decide_shifts",
    "is_shift",
    "matmul_reading",
    "reads_shift",
    "shift_cost",
    "shift_time",
]

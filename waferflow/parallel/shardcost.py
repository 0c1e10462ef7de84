"""What one rank's share of an op costs, and how big one rank's share of a value is.

An op divided along some axes (``OpSharding.divided``) does ``1 / prod(degrees)`` of
its FLOPs on each rank and micro-batch; the remainder of an uneven division goes to
the first shares, so the shares of an op always sum to its FLOPs exactly. Bytes
moved scale with the operands' and results' shard sizes (a replicated operand is
read whole by every rank). A value's share is its shape with every split dimension
divided by its axis degree (``mb`` only counts for per-micro-batch instances).
"""

from __future__ import annotations

import math
from functools import lru_cache

from waferflow.ir.graph import Op, Value
from waferflow.ir.sharding import MeshAxis, Sharding, shard_shape
from waferflow.parallel.plan_spec import Mesh
from waferflow.parallel.propagate import OpSharding


@lru_cache(maxsize=64)
def instance_degrees(mesh: Mesh, per_mb: bool) -> dict[MeshAxis, int]:
    """Each axis's degree for one instance of an op (``mb`` counts only per
    micro-batch). Cached per mesh, as the assembly asks millions of times: the dict is
    shared, so callers only read it."""
    deg = mesh.degrees()
    if not per_mb:
        deg[MeshAxis.MB] = 1
    return deg


def value_bytes(v: Value, sharding: Sharding, deg: dict[MeshAxis, int]) -> int:
    return math.prod(shard_shape(v.type.shape, sharding, deg)) * v.type.dtype.itemsize


def share(total: int, parts: int, index: int) -> int:
    """Share ``index`` of ``total`` cut into ``parts`` (sizes differ by at most one)."""
    base, extra = divmod(total, parts)
    return base + (1 if index < extra else 0)


def division(
    osh: OpSharding, mesh: Mesh, rank: int, instance: int, per_mb: bool
) -> tuple[int, int]:
    """(number of shares, this rank's share index) of an op's work."""
    deg = instance_degrees(mesh, per_mb)
    parts, index = 1, 0
    seen_dims: set[int] = set()
    for axis in (MeshAxis.MB, MeshAxis.DP, MeshAxis.EP, MeshAxis.TP):
        if axis not in osh.divided or deg[axis] <= 1:
            continue
        if axis is MeshAxis.MB:
            i = max(instance, 0)
        else:
            dim = dict(mesh.axis_dim)[axis]
            if dim in seen_dims:  # dp and tp on one physical axis: counted once
                continue
            seen_dims.add(dim)
            i = mesh.index(rank, axis)
        parts, index = parts * deg[axis], index * deg[axis] + i
    return parts, index


def op_cost(
    op: Op,
    osh: OpSharding,
    result_sh: list[Sharding],
    mesh: Mesh,
    rank: int,
    instance: int,
    per_mb: bool,
) -> tuple[int, int, int]:
    """(flops, bytes read, bytes written) of one rank's instance of ``op``."""
    parts, index = division(osh, mesh, rank, instance, per_mb)
    deg = instance_degrees(mesh, per_mb)
    flops = share(op.cost.flops, parts, index)
    full_in = sum(v.type.nbytes for v in op.operands)
    part_in = sum(value_bytes(v, s, deg) for v, s in zip(op.operands, osh.inputs, strict=True))
    full_out = sum(v.type.nbytes for v in op.results)
    part_out = sum(value_bytes(v, s, deg) for v, s in zip(op.results, result_sh, strict=True))
    read = op.cost.bytes_read * part_in // full_in if full_in else op.cost.bytes_read // parts
    written = (
        op.cost.bytes_written * part_out // full_out if full_out else op.cost.bytes_written // parts
    )
    return flops, read, written


__all__ = ["division", "instance_degrees", "op_cost", "share", "value_bytes"]

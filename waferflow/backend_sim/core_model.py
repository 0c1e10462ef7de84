"""The core model (``[core]``): how many cycles one core, or one node of a coarse view,
takes for one datapath pass (``OpWork``). The event simulator and the analytical
estimator both time actors through ``costs.core_ps``, which sums these passes.

A pass reads its operands through the read ports, computes, and writes its results
through the write ports; with ``overlap`` it takes the slowest of the three, else
their sum, plus ``fixed_cycles`` (the seed machine's ALU: R + C + W + 2). What
computes, and what streams through the ports, depends on the op:

* **a matmul or convolution on the MAC array** (``core.array``), from its matrix
  products (``OpWork.gemms``). SCALE-Sim's analytical model (Samajdar et al., ISPASS
  2020, "A Systematic Methodology for Characterizing Scalability of DNN Accelerators
  using SCALE-Sim") maps a product onto an ``R x C`` array as two spatial dimensions
  ``Sr x Sc`` and a temporal one ``T``:

  ============  ====  ====  ====
  dataflow      Sr    Sc    T
  ============  ====  ====  ====
  output        m     n     k
  weight        k     n     m
  input         k     m     n
  ============  ====  ====  ====

  (for a convolution m = output pixels, n = filters, k = the convolution window, the
  paper's Nofmap, Nfilter and Wconv). Each fold (tile) of ``R x C`` takes
  ``2R + C + T - 2`` cycles (fill, stream, drain) and there are
  ``ceil(Sr / R) * ceil(Sc / C)`` of them: a dimension that does not fill the array
  wastes the rest. ``batch`` products (groups, heads) are more folds; a core's
  ``count`` arrays share the folds; ``macs_per_pe`` other than 1 scales ``T``.
  Operand traffic: the stationary operand is read once, a streamed operand once per
  fold along the other spatial dimension, results are written once (output
  stationary) or once per fold along the reduction (partial sums, read back before
  adding; weight and input stationary).
* **a matmul on the vector unit** (no array, or a dtype the array does not take): a
  multiply-accumulate stream per lane (``y[0:n] += a * B[k, 0:n]``, the operand ``a``
  held in a register): ``batch * m * k * ceil(n / lanes)`` lane-steps, each reading an
  element of ``B`` and of ``y`` and writing ``y``.
* **every other op group on the vector unit** (``core.vector``): one element
  operation per FLOP (the frontend counts one per element), ``lanes x ops_per_lane``
  per cycle; its operands and results stream through the ports once.
* **a group listed in ``core.rates``** keeps that rate (an explicit override; ``inf``:
  no compute cycles), and with no unit for it the wafer's peak times the FLOPs: the
  model issue 11 introduced, unchanged (``amcoda``).

**A node of a coarse view** pools ``K x K`` cores (``K = coarsen_factor``), each with
the fine core's array and vector unit (the ``[core]`` table of a view keeps them per
fine core; its ports and rates are the node's sums). A product is tiled over the node
as SCALE-Sim scales out over a grid of arrays: its batch is spread first (each core
takes ``ceil(batch / min(batch, K^2))`` of it), the cores left per batch share form a
``G x G`` grid (``G = isqrt(K^2 // min(batch, K^2))``) over which ``Sr`` and ``Sc``
are cut (``ceil(Sr / G)``, ``ceil(Sc / G)``), and each core quantises its own block on
its own arrays. The slowest (largest) block sets the time; its traffic, over one core's
share of the node's ports. A matmul pass also waits for its operands to reach the
node's cores (``costs.node_network_ps``, per pass here): a floor under the pass, as in
the roofline. A partly dead node (capacity ``c < 1``) is ``1 / c`` slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from functools import lru_cache

from waferflow.ir.dtypes import DType
from waferflow.ir.opkind import MATMUL_LIKE, OpKind, group_of
from waferflow.ir.plan import OpWork
from waferflow.ir.plan_parts import Gemm
from waferflow.ir.target.parts import CoreModel, Dataflow, MacArray, VectorUnit, rate_for

K = OpKind


class Unit(Enum):
    """What timed a pass's compute."""

    ARRAY = "array"  # the MAC array
    VECTOR = "vector"  # the vector unit
    RATE = "rate"  # a core.rates entry
    PEAK = "peak"  # the wafer's peak FLOP/s (no unit, no rate; or the roofline)


class Bound(Enum):
    """Which resource set a pass's time (the largest term)."""

    COMPUTE = "compute"
    READ = "read"
    WRITE = "write"
    NETWORK = "node network"  # operands reaching a coarse node's cores
    FIXED = "fixed"  # only fixed cycles (an empty pass)


def op_class(kind: OpKind) -> str:
    """The class a report groups ops by: ``matmul``, ``conv``, ``attention``, else the
    op's group (``elementwise``, ``reduction``, ...)."""
    if kind in (K.CONV, K.CONV_BACKWARD):
        return "conv"
    if kind in (K.SDPA, K.SDPA_BACKWARD):
        return "attention"
    return group_of(kind)


@dataclass(frozen=True, slots=True)
class PassTime:
    """One pass on one core (or node), in cycles. ``ideal`` is its work at the peak of
    the unit that ran it (``unit``): MACs at the array's, element ops at the vector
    unit's, FLOPs at a rate or at the wafer's peak; ``ideal / cycles`` is the pass's
    utilisation of that unit."""

    op_class: str
    unit: Unit
    flops: int
    cycles: int  # the pass's time, fixed cycles included
    compute: int
    read: int
    write: int
    network: int
    ideal: Fraction
    bound: Bound


@dataclass(frozen=True, slots=True)
class GemmTiming:
    """One product on one core's arrays (or vector unit): compute cycles, and the
    bytes it streams (per core; ``reads`` one entry per operand stream)."""

    cycles: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]


def _ceil(a: int | Fraction, b: int | Fraction) -> int:
    q = Fraction(a) / Fraction(b)
    return -(-q.numerator // q.denominator)


def node_split(g: Gemm, grid: int) -> tuple[int, int]:
    """(batch per core, G): how a node of ``grid x grid`` cores tiles a product: the
    batch spread first, the cores left per share as a ``G x G`` grid."""
    cores = grid * grid
    spread = min(g.batch, cores)
    return _ceil(g.batch, spread), max(1, math.isqrt(cores // spread))


def spatial(g: Gemm, flow: Dataflow) -> tuple[int, int, int]:
    """SCALE-Sim's (Sr, Sc, T) for a product under ``flow`` (module docstring)."""
    if flow is Dataflow.OUTPUT:
        return g.m, g.n, g.k
    if flow is Dataflow.WEIGHT:
        return g.k, g.n, g.m
    return g.k, g.m, g.n


def array_timing(g: Gemm, a: MacArray, dtype: DType, grid: int = 1) -> GemmTiming:
    """A product on one core's arrays, as the core of a ``grid x grid`` node that holds
    the largest block (``grid = 1``: a fine core, the whole product)."""
    batch, side = node_split(g, grid)
    sr, sc, t = spatial(g, a.dataflow)
    sr, sc = _ceil(sr, side), _ceil(sc, side)
    fr, fc = _ceil(sr, a.rows), _ceil(sc, a.cols)
    folds = _ceil(batch * fr * fc, a.count)
    stream = _ceil(t, Fraction(a.rate(dtype)))
    cycles = folds * (2 * a.rows + a.cols + stream - 2)
    size = dtype.itemsize
    # the streamed operands re-read once per fold along the other spatial dimension
    if a.dataflow is Dataflow.OUTPUT:  # m x k along rows (fc times), k x n along cols (fr)
        reads = (sr * t * fc, t * sc * fr)
        out, psum = sr * sc, 0
    else:  # weight: k x n held, m x k streamed; input: k x m held, k x n streamed
        reads = (sr * sc, t * sr * fc)
        out, psum = sc * t * fr, sc * t * (fr - 1)
    reads = tuple(batch * e * size for e in (*reads, psum) if e)
    return GemmTiming(cycles, reads, (batch * out * size,))


def vector_gemm_timing(g: Gemm, v: VectorUnit, dtype: DType, grid: int = 1) -> GemmTiming:
    """A product on one core's vector unit: a multiply-accumulate stream per lane."""
    batch, side = node_split(g, grid)
    m, n = _ceil(g.m, side), _ceil(g.n, side)
    steps = batch * m * g.k * _ceil(n, v.lanes)
    cycles = _ceil(steps, Fraction(v.rate(dtype)))
    stream = batch * m * g.k * n * dtype.itemsize
    return GemmTiming(cycles, (stream, stream), (stream,))


def port_cycles(sizes: tuple[int, ...], ports: int, per_cycle: Fraction) -> int:
    """Cycles to stream ``sizes`` bytes through ``ports`` ports of ``per_cycle`` bytes
    each: each transfer takes whole cycles on one port; the largest go first, each to
    the least loaded port. With no more transfers than ports: the largest one."""
    loads = [0] * ports
    for c in sorted((_ceil(b, per_cycle) for b in sizes if b > 0), reverse=True):
        i = loads.index(min(loads))
        loads[i] += c
    return max(loads, default=0)


@dataclass(frozen=True, slots=True)
class CoreContext:
    """What times a pass besides the pass: the wafer's core, clock, coarse-view factor
    and on-die link bandwidth (hashable, so that equal passes are timed once)."""

    core: CoreModel
    clock_hz: float
    peak_flops: tuple[tuple[DType, float], ...]  # the wafer's (a node's, on a view)
    grid: int = 1  # the coarse view's K (1: a fine core)
    link_bandwidth: float = 0.0  # for the node network floor of a coarse view


def pass_time(ctx: CoreContext, w: OpWork, dtype: DType, capacity: float = 1.0) -> PassTime:
    """One pass (module docstring); cached on its arguments."""
    return _pass_time(ctx, w, dtype, capacity)


@lru_cache(maxsize=1 << 16)
def _pass_time(ctx: CoreContext, w: OpWork, dtype: DType, capacity: float) -> PassTime:
    core, grid = ctx.core, ctx.grid
    cap = Fraction(capacity)
    port = Fraction(core.port_bandwidth) * cap / Fraction(ctx.clock_hz)
    group = group_of(w.kind)
    rate = dict(core.rates).get(group)
    matmul = w.kind in MATMUL_LIKE
    array = core.array if matmul and rate is None else None
    if array is not None and array.rate(dtype) <= 0:
        array = None  # a dtype the array does not take: the vector unit
    vector = core.vector if rate is None and array is None else None
    per_core = grid * grid  # ports and traffic: one core's share of the node's
    if matmul and w.gemms and (array is not None or vector is not None):
        compute = r = wr = busy = 0
        for g in w.gemms:  # one product after the other
            gt = (
                array_timing(g, array, dtype, grid)
                if array is not None
                else vector_gemm_timing(g, vector, dtype, grid)  # type: ignore[arg-type]
            )
            gr = port_cycles(tuple(b * per_core for b in gt.reads), core.read_ports, port)
            gw = port_cycles(tuple(b * per_core for b in gt.writes), core.write_ports, port)
            gc = _ceil(gt.cycles, cap)
            compute, r, wr = compute + gc, r + gr, wr + gw
            busy += _combine(core, gc, gr, gw)
        if array is not None:
            unit = Unit.ARRAY
            ideal = Fraction(sum(g.macs for g in w.gemms)) / (
                Fraction(array.peak_macs(dtype)) * per_core * cap
            )
        else:
            assert vector is not None
            unit = Unit.VECTOR
            ideal = Fraction(sum(g.macs for g in w.gemms)) / (
                Fraction(vector.peak_ops(dtype)) * per_core * cap
            )
    else:
        r = port_cycles(w.reads, core.read_ports, port)
        wr = port_cycles(w.writes, core.write_ports, port)
        if rate is not None or (array is None and vector is None):
            unit = Unit.RATE if rate is not None else Unit.PEAK
            per_s = rate if rate is not None else _peak(ctx, dtype)
            if math.isinf(per_s):
                compute, ideal = 0, Fraction(0)
            else:
                per_cycle = Fraction(per_s) * cap / Fraction(ctx.clock_hz)
                compute, ideal = _ceil(w.flops, per_cycle), Fraction(w.flops) / per_cycle
        elif array is not None:  # a matmul whose shape is unknown: the array at its peak
            unit = Unit.ARRAY
            per_cycle = Fraction(array.peak_macs(dtype)) * per_core * cap
            ideal = Fraction(w.flops, 2) / per_cycle
            compute = _ceil(w.flops, 2 * per_cycle)
        else:
            assert vector is not None
            unit = Unit.VECTOR
            ops = Fraction(w.flops, 2) if matmul else Fraction(w.flops)  # a MAC is one op
            per_cycle = Fraction(vector.peak_ops(dtype)) * per_core * cap
            compute, ideal = _ceil(ops, per_cycle), ops / per_cycle
        busy = _combine(core, compute, r, wr)
    network = _node_network(ctx, w) if matmul else 0
    cycles = max(busy, network) + core.fixed_cycles
    return PassTime(
        op_class=op_class(w.kind),
        unit=unit,
        flops=w.flops,
        cycles=cycles,
        compute=compute,
        read=r,
        write=wr,
        network=network,
        ideal=ideal,
        bound=_bound(compute, r, wr, network),
    )


def _combine(core: CoreModel, compute: int, read: int, write: int) -> int:
    """Reads, compute and writes: the slowest with overlap, else their sum."""
    return max(compute, read, write) if core.overlap else compute + read + write


def _bound(compute: int, read: int, write: int, network: int) -> Bound:
    terms = ((compute, Bound.COMPUTE), (read, Bound.READ), (write, Bound.WRITE),
             (network, Bound.NETWORK))  # fmt: skip
    best = max(terms, key=lambda t: t[0])
    return best[1] if best[0] > 0 else Bound.FIXED


def _peak(ctx: CoreContext, dtype: DType) -> float:
    """The wafer's peak FLOP/s for ``dtype`` (``Wafer.peak``'s fallback)."""
    return rate_for(ctx.peak_flops, dtype)


def _node_network(ctx: CoreContext, w: OpWork) -> int:
    """Cycles for a matmul's operands to reach the cores of a coarse node (0 on a fine
    wafer): ``sum(reads) * (K - 1) / (2 K B)`` (``costs.node_network_ps``)."""
    k = ctx.grid
    nbytes = sum(w.reads)
    if k <= 1 or not nbytes or ctx.link_bandwidth <= 0:
        return 0
    return _ceil(
        Fraction(nbytes * (k - 1)) * Fraction(ctx.clock_hz),
        Fraction(2 * k) * Fraction(ctx.link_bandwidth),
    )


__all__ = [
    "Bound",
    "CoreContext",
    "GemmTiming",
    "PassTime",
    "Unit",
    "array_timing",
    "node_split",
    "op_class",
    "pass_time",
    "port_cycles",
    "spatial",
    "vector_gemm_timing",
]

"""The core model (``backend_sim.core_model``) against closed forms: the TPU-like preset's
32 x 32 array on a small convolution, a ReLU and a large matmul, and SCALE-Sim's
analytical cycle counts (Samajdar et al., ISPASS 2020) for a table of layers under the
three dataflows."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import pytest

from waferflow.backend_sim import estimate, simulate
from waferflow.backend_sim.core_model import Bound, Unit, array_timing, pass_time
from waferflow.backend_sim.costs import (
    actor_passes,
    compute_ps,
    core_context,
    core_ps,
    duration_ps,
)
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, Graph
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import Actor, Gemm, OpWork, Plan
from waferflow.ir.target import get_wafer
from waferflow.ir.target.parts import Dataflow, MacArray
from waferflow.ir.work import op_work

TPU = get_wafer("tpu-like")
BF16 = DType.BF16


@dataclass(frozen=True)
class Conv:
    """A convolution layer as SCALE-Sim's topology files give it: the input feature
    map with its padding (H x W x C), the filter (R x S), the filter count M, stride."""

    name: str
    h: int
    w: int
    r: int
    s: int
    c: int
    m: int
    stride: int = 1

    @property
    def out(self) -> tuple[int, int]:
        return (self.h - self.r) // self.stride + 1, (self.w - self.s) // self.stride + 1


def conv_op(layer: Conv, dtype: DType = BF16):
    """The layer as an IR convolution (one image), as the frontend gives it."""
    e, f = layer.out
    g = Graph("c")
    x = g.add_op(OpKind.INPUT, (), [TensorType((1, layer.c, layer.h, layer.w), dtype)], names=["x"])
    wt = TensorType((layer.m, layer.c, layer.r, layer.s), dtype)
    w = g.add_op(OpKind.INPUT, (), [wt], names=["w"])
    y = TensorType((1, layer.m, e, f), dtype)
    attrs = Attrs.of(stride=(layer.stride, layer.stride))
    return g.add_op(OpKind.CONV, [x.results[0], w.results[0]], [y], attrs=attrs)


def conv_work(layer: Conv, dtype: DType = BF16) -> OpWork:
    op = conv_op(layer, dtype)
    size = dtype.itemsize
    reads = [math.prod(v.type.shape) * size for v in op.operands]
    writes = [math.prod(r.type.shape) * size for r in op.results]
    e, f = layer.out
    flops = 2 * e * f * layer.m * layer.r * layer.s * layer.c
    (work,) = op_work(op, reads, writes, flops)
    return work


def scalesim_cycles(layer: Conv, rows: int, cols: int, flow: Dataflow) -> int:
    """SCALE-Sim's analytical runtime of one layer on one rows x cols array (Samajdar
    et al., ISPASS 2020, sec. III): Sr x Sc spatial and T temporal by dataflow, each
    fold ``2 R + C + T - 2`` cycles, ``ceil(Sr / R) * ceil(Sc / C)`` folds."""
    e, f = layer.out
    n_ofmap, w_conv, n_filter = e * f, layer.r * layer.s * layer.c, layer.m
    sr, sc, t = {
        Dataflow.OUTPUT: (n_ofmap, n_filter, w_conv),
        Dataflow.WEIGHT: (w_conv, n_filter, n_ofmap),
        Dataflow.INPUT: (w_conv, n_ofmap, n_filter),
    }[flow]
    return (2 * rows + cols + t - 2) * math.ceil(sr / rows) * math.ceil(sc / cols)


# ResNet-18 / ResNet-50 / MobileNet-like layers and transformer GEMMs written as 1 x 1
# convolutions (tokens x 1 "pixels", d_model channels), as SCALE-Sim's GEMM mode does.
LAYERS = [
    Conv("issue: 3x3, 8 -> 16", 18, 18, 3, 3, 8, 16),
    Conv("resnet conv1", 230, 230, 7, 7, 3, 64, stride=2),
    Conv("resnet 3x3 64", 58, 58, 3, 3, 64, 64),
    Conv("resnet 1x1 256 -> 128", 28, 28, 1, 1, 256, 128),
    Conv("resnet 3x3 512 s2", 16, 16, 3, 3, 256, 512, stride=2),
    Conv("fc 512 -> 1000", 1, 1, 1, 1, 512, 1000),
    Conv("bert qkv 128 tok", 128, 1, 1, 1, 768, 2304),
    Conv("gpt2 mlp 256 tok", 256, 1, 1, 1, 768, 3072),
]


@pytest.mark.parametrize("flow", list(Dataflow))
@pytest.mark.parametrize("layer", LAYERS, ids=lambda c: c.name)
def test_array_cycles_match_scalesim_analytical_model(layer: Conv, flow: Dataflow) -> None:
    work = conv_work(layer)
    assert 2 * sum(g.macs for g in work.gemms) == work.flops  # the im2col product
    for rows, cols in ((32, 32), (16, 64), (128, 128)):
        array = MacArray(rows, cols, flow)
        (g,) = work.gemms
        assert array_timing(g, array, BF16).cycles == scalesim_cycles(layer, rows, cols, flow)


def test_scalesim_counts_by_hand() -> None:
    # the layer, 16 x 16 outputs: Nofmap 256, Wconv 72, Nfilter 16, 32 x 32 array
    (g,) = conv_work(LAYERS[0]).gemms
    assert g == Gemm(m=256, n=16, k=72)
    ws, os_, is_ = (array_timing(g, MacArray(32, 32, f), BF16).cycles for f in Dataflow)
    assert ws == 3 * (64 + 32 + 256 - 2) == 1050  # 3 x 1 folds
    assert os_ == 8 * (64 + 32 + 72 - 2) == 1328  # 8 x 1 folds
    assert is_ == 3 * 8 * (64 + 32 + 16 - 2) == 2640  # 3 x 8 folds


def _pass(work: OpWork) -> tuple[int, Fraction, Unit, Bound]:
    p = pass_time(core_context(TPU), work, BF16)
    return p.cycles, p.ideal / p.cycles, p.unit, p.bound


def test_a_small_convolution_fills_at_most_half_the_tpu_array() -> None:
    for hw in (18, 66):  # 16 x 16 and 64 x 64 outputs
        layer = Conv("c", hw, hw, 3, 3, 8, 16)
        cycles, util, unit, bound = _pass(conv_work(layer))
        pixels = (hw - 2) ** 2
        # weight stationary: 72 x 16 weights over 3 x 1 folds of 32 x 32, the pixels stream
        assert cycles == 3 * (2 * 32 + 32 + pixels - 2)
        assert util == Fraction(pixels * 16 * 72, 1024 * cycles)
        assert util <= Fraction(72, 96) * Fraction(16, 32) <= Fraction(1, 2)
        assert unit is Unit.ARRAY and bound is Bound.COMPUTE
    assert util > Fraction(35, 100)  # a long stream approaches the shape's 37.5 %


def test_a_relu_runs_at_the_vector_units_rate() -> None:
    n = 1 << 20  # elements, bf16
    relu = OpWork(OpKind.RELU, n, (2 * n,), (2 * n,))
    cycles, util, unit, _ = _pass(relu)
    # 32 lanes x 1 op; the read (and the write) port moves 64 B = 32 elements per cycle
    assert cycles == n // 32 and util == 1 and unit is Unit.VECTOR
    roofline = replace(TPU, core=None)
    a = Actor(0, "relu", 0, flops=n, bytes_read=2 * n, bytes_written=2 * n, dtype=BF16,
              op_kind=OpKind.RELU, work=(relu,))  # fmt: skip
    # the roofline ran it at the SRAM's 192 B/cycle (the array's peak is idle for it)
    assert core_ps(a, TPU) == duration_ps(n // 32, TPU.clock_hz)
    assert compute_ps(a, roofline) == duration_ps(4 * n, 192e9)


def test_a_large_square_matmul_approaches_the_array_peak() -> None:
    n = 4096
    mm = OpWork(OpKind.MATMUL, 2 * n**3, (2 * n * n, 2 * n * n), (2 * n * n,), (Gemm(n, n, n),))
    cycles, util, unit, bound = _pass(mm)
    # 128 x 128 folds of (2 x 32 + 32 + 4096 - 2) cycles; the inputs and partial sums
    # stream through the ports in fewer (n^3 / 32 elements of 2 B at 64 B/cycle each)
    assert cycles == 128 * 128 * (64 + 32 + n - 2)
    assert util == Fraction(n, n + 94) > Fraction(97, 100)
    assert unit is Unit.ARRAY and bound is Bound.COMPUTE


def test_simulator_and_estimator_share_the_core_model() -> None:
    conv = conv_work(Conv("c", 66, 66, 3, 3, 8, 16))
    relu = OpWork(OpKind.RELU, 4096 * 16, (2 * 4096 * 16,), (2 * 4096 * 16,))
    a = Actor(0, "conv", 0, flops=conv.flops, dtype=BF16, op_kind=OpKind.CONV, work=(conv,))
    b = Actor(1, "relu", 0, flops=relu.flops, dtype=BF16, op_kind=OpKind.RELU, work=(relu,))
    plan = Plan.build("two", TPU.name, [a, b], [])
    expect = sum(p.cycles for x in (a, b) for p in actor_passes(x, TPU))
    sim = simulate(plan, TPU)
    assert sim.step_time_ps == estimate(plan, TPU).step_time_ps == expect * 1000
    classes = {s.op_class: s for s in sim.op_classes}
    assert set(classes) == {"conv", "elementwise"}
    assert classes["elementwise"].utilisation == 1.0
    assert classes["conv"].utilisation == pytest.approx(4096 * 16 * 72 / 1024 / (3 * 4190))
    assert classes["conv"].units == ("MAC array",) and classes["conv"].bounds[0][0] == "compute"
    text = sim.summary()
    assert "op classes" in text and "conv" in text and "of MAC array" in text

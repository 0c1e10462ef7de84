"""Small hand-built graphs and wafers for the parallel tests."""

from __future__ import annotations

from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, Cost, Graph, Phase, Provenance
from waferflow.ir.opkind import OpKind
from waferflow.ir.target import Wafer, parse_wafer_toml

K = OpKind
F32 = DType.F32


def fast_wafer(cols: int, rows: int = 1, peak: float = 1e12, sram: str = "1 GiB") -> Wafer:
    """A wafer whose links are as good as free: 1 ps per packet, no latency."""
    return parse_wafer_toml(
        f"""
[wafer]
name = "ideal{rows}x{cols}"
rows = {rows}
cols = {cols}
topology = "mesh"
clock_hz = 1e9
sram_bytes = "{sram}"
sram_bandwidth = 1e30
[wafer.peak_flops]
f32 = {peak}
[link]
bandwidth = 1e30
latency = 0
"""
    )


def chain(stages: int, batch: int, width: int, fwd_flops: int, bwd_flops: int) -> Graph:
    """``stages`` equal layers: forward ``h_i = act(h_{i-1})`` (module ``layers.i``,
    ``fwd_flops`` each), a sum as the loss, and backward ops ``g_i = act_bwd(g, h_i)``
    (``bwd_flops`` each). No parameters: a pure pipeline of compute."""
    g = Graph("chain")
    t = TensorType((batch, width), F32)
    x = g.add_op(K.INPUT, result_types=[t], names=["x"]).result
    acts = []
    h = x
    for i in range(stages):
        h = g.add_op(
            K.RELU, [h], [t], cost=Cost(fwd_flops), prov=Provenance(f"layers.{i}", "relu"),
            names=[f"h{i}"],
        ).result
        acts.append(h)
    loss = g.add_op(
        K.SUM, [h], [TensorType((), F32)], prov=Provenance("loss", "sum"), names=["loss"]
    ).result
    grad = g.add_op(
        K.FILL, [loss], [TensorType((), F32)], phase=Phase.BWD, prov=Provenance("loss", "ones"),
        names=["g_loss"],
    ).result
    for i in reversed(range(stages)):
        grad = g.add_op(
            K.ACT_BACKWARD, [grad, acts[i]], [t], attrs=Attrs.of(fn="relu"),
            cost=Cost(bwd_flops), phase=Phase.BWD, prov=Provenance(f"layers.{i}", "relu_bwd"),
            names=[f"g{i}"],
        ).result
    g.set_outputs([loss, grad])
    return g

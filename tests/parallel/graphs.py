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
            K.RELU,
            [h],
            [t],
            cost=Cost(fwd_flops),
            prov=Provenance(f"layers.{i}", "relu"),
            names=[f"h{i}"],
        ).result
        acts.append(h)
    loss = g.add_op(
        K.SUM, [h], [TensorType((), F32)], prov=Provenance("loss", "sum"), names=["loss"]
    ).result
    grad = g.add_op(
        K.FILL,
        [loss],
        [TensorType((), F32)],
        phase=Phase.BWD,
        prov=Provenance("loss", "ones"),
        names=["g_loss"],
    ).result
    for i in reversed(range(stages)):
        grad = g.add_op(
            K.ACT_BACKWARD,
            [grad, acts[i]],
            [t],
            attrs=Attrs.of(fn="relu"),
            cost=Cost(bwd_flops),
            phase=Phase.BWD,
            prov=Provenance(f"layers.{i}", "relu_bwd"),
            names=[f"g{i}"],
        ).result
    g.set_outputs([loss, grad])
    return g


def mlp(batch: int = 8, d: int = 16, h: int = 64) -> Graph:
    """A two-layer MLP training step between two tanh's, with SGD:
    ``t = tanh(x); y = gelu(t @ w1) @ w2; loss = sum(tanh(y))``."""
    g = Graph("mlp")
    tx, th = TensorType((batch, d), F32), TensorType((batch, h), F32)
    scalar = TensorType((), F32)

    def op(kind, operands, ty, module, phase=Phase.FWD, flops=0, name=None, **attrs):  # type: ignore[no-untyped-def]
        return g.add_op(
            kind, operands, [ty], attrs=Attrs.of(attrs), cost=Cost(flops), phase=phase,
            prov=Provenance(module, kind.value), names=[name],
        ).result  # fmt: skip

    x = g.add_op(K.INPUT, result_types=[tx], names=["x"]).result
    w1 = g.add_op(K.PARAM, result_types=[TensorType((d, h), F32)], names=["w1"]).result
    w2 = g.add_op(K.PARAM, result_types=[TensorType((h, d), F32)], names=["w2"]).result
    t = op(K.TANH, [x], tx, "pre", name="t")
    hid = op(K.MATMUL, [t, w1], th, "fc1", flops=2 * batch * d * h, name="hid")
    a = op(K.GELU, [hid], th, "act", name="a")
    y = op(K.MATMUL, [a, w2], tx, "fc2", flops=2 * batch * h * d, name="y")
    out = op(K.TANH, [y], tx, "post", name="out")
    loss = op(K.SUM, [out], scalar, "loss", name="loss")
    g_out = op(K.FILL, [out], tx, "loss", Phase.BWD, name="g_out")
    g_y = op(K.ACT_BACKWARD, [g_out, out], tx, "post", Phase.BWD, name="g_y", fn="tanh")
    w2t = op(K.TRANSPOSE, [w2], TensorType((d, h), F32), "fc2", Phase.BWD, name="w2t")
    g_a = op(K.MATMUL, [g_y, w2t], th, "fc2", Phase.BWD, 2 * batch * d * h, name="g_a")
    at = op(K.TRANSPOSE, [a], TensorType((h, batch), F32), "fc2", Phase.BWD, name="at")
    g_w2 = op(K.MATMUL, [at, g_y], TensorType((h, d), F32), "fc2", Phase.BWD,
              2 * batch * d * h, name="g_w2")  # fmt: skip
    g_h = op(K.ACT_BACKWARD, [g_a, hid], th, "act", Phase.BWD, name="g_h", fn="gelu")
    w1t = op(K.TRANSPOSE, [w1], TensorType((h, d), F32), "fc1", Phase.BWD, name="w1t")
    g_t = op(K.MATMUL, [g_h, w1t], tx, "fc1", Phase.BWD, 2 * batch * d * h, name="g_t")
    tt = op(K.TRANSPOSE, [t], TensorType((d, batch), F32), "fc1", Phase.BWD, name="tt")
    g_w1 = op(K.MATMUL, [tt, g_h], TensorType((d, h), F32), "fc1", Phase.BWD,
              2 * batch * d * h, name="g_w1")  # fmt: skip
    g_x = op(K.ACT_BACKWARD, [g_t, t], tx, "pre", Phase.BWD, name="g_x", fn="tanh")
    w1n = op(K.ADD, [w1, g_w1], TensorType((d, h), F32), "fc1", Phase.OPT, name="w1.new")
    w2n = op(K.ADD, [w2, g_w2], TensorType((h, d), F32), "fc2", Phase.OPT, name="w2.new")
    g.set_outputs([loss, g_x, w1n, w2n])
    return g

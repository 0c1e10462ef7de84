"""Small input graphs for the pass tests, built with the Graph API."""

from __future__ import annotations

from pathlib import Path

from waferflow.ir import Attrs, Cost, DType, Graph, OpKind, Phase, Provenance, TensorType, Value
from waferflow.ir.graph import AttrValue

K = OpKind
FWD, BWD, OPT = Phase.FWD, Phase.BWD, Phase.OPT


def f32(*shape: int) -> TensorType:
    return TensorType(tuple(shape), DType.F32)


class Builder:
    """A thin helper over ``Graph.add_op`` for one-result ops."""

    def __init__(self, name: str) -> None:
        self.g = Graph(name)

    def src(self, kind: OpKind, name: str, ty: TensorType, hint: str | None = None) -> Value:
        op = self.g.add_op(kind, (), [ty], attrs=Attrs.of(name=name), names=[hint or name])
        return op.result

    def op(
        self,
        kind: OpKind,
        *operands: Value,
        ty: TensorType | None = None,
        name: str | None = None,
        phase: Phase = FWD,
        cost: Cost | None = None,
        module: str = "",
        aten: str = "",
        **attrs: AttrValue,
    ) -> Value:
        result_type = ty if ty is not None else operands[0].type
        op = self.g.add_op(
            kind,
            operands,
            [result_type],
            attrs=Attrs.of(attrs) if attrs else None,
            cost=cost,
            phase=phase,
            prov=Provenance(module, aten) if (module or aten) else None,
            names=[name],
        )
        return op.result

    def done(self, *outputs: Value) -> Graph:
        self.g.set_outputs(outputs)
        return self.g


def mlp_train() -> Graph:
    """A two-layer MLP training step (MSE loss, SGD) as a tracer might give it: a
    no-op view, a detach and an assert, a metadata op, a dead chain, a saved
    activation used by the backward pass, and elementwise SGD updates. The forward
    matmuls carry the frontend's cost; the rest is left uncosted."""
    b = Builder("mlp_train")
    x = b.src(K.INPUT, "x", f32(8, 16))
    y = b.src(K.INPUT, "y", f32(8, 4))
    w1 = b.src(K.PARAM, "fc1.weight", f32(32, 16), "w1")
    b1 = b.src(K.PARAM, "fc1.bias", f32(32), "b1")
    w2 = b.src(K.PARAM, "fc2.weight", f32(4, 32), "w2")
    two = b.src(K.CONSTANT, "two", f32(), "two")
    lr = b.src(K.CONSTANT, "lr", f32(), "lr")
    mm = "aten.mm.default"
    h = b.op(K.MATMUL, x, w1, ty=f32(8, 32), name="h", transpose_b=True,
             module="fc1", aten=mm, cost=Cost(8192, 2560, 1024))  # fmt: skip
    hv = b.op(K.VIEW, h, name="hv", shape=(8, 32), module="fc1", aten="aten.view.default")
    hb = b.op(K.ADD, hv, b1, name="hb", module="fc1", aten="aten.add.Tensor")
    a = b.op(K.GELU, hb, name="a", module="act", aten="aten.gelu.default")
    ad = b.op(K.DETACH, a, name="ad", aten="aten.detach.default")
    b.g.add_op(K.ASSERT, [ad], [], attrs=Attrs.of(msg="finite"), prov=Provenance("", "aten._assert_async.msg"))  # fmt: skip
    b.g.add_op(K.METADATA, [x], [], attrs=Attrs.of(key="batch"))
    o = b.op(K.MATMUL, ad, w2, ty=f32(8, 4), name="o", transpose_b=True,
             module="fc2", aten=mm, cost=Cost(2048, 1536, 128))  # fmt: skip
    d = b.op(K.SUB, o, y, name="d", module="loss", aten="aten.sub.Tensor")
    sq = b.op(K.MUL, d, d, name="sq", module="loss", aten="aten.mul.Tensor")
    loss = b.op(K.MEAN, sq, ty=f32(), name="loss", module="loss", aten="aten.mean.default")
    dead = b.op(K.MUL, hb, hb, name="dead", aten="aten.mul.Tensor")
    b.op(K.EXP, dead, name="dead2", aten="aten.exp.default")
    # backward
    g_d = b.op(K.MUL, d, two, name="g_d", phase=BWD, aten="aten.mul.Tensor")
    g_w2 = b.op(K.MATMUL, g_d, a, ty=f32(4, 32), name="g_w2", phase=BWD, transpose_a=True,
                aten=mm)  # fmt: skip
    g_a = b.op(K.MATMUL, g_d, w2, ty=f32(8, 32), name="g_a", phase=BWD, aten=mm)
    g_h = b.op(K.ACT_BACKWARD, g_a, hb, name="g_h", phase=BWD, act="gelu",
               aten="aten.gelu_backward.default")  # fmt: skip
    g_w1 = b.op(K.MATMUL, g_h, x, ty=f32(32, 16), name="g_w1", phase=BWD, transpose_a=True,
                aten=mm)  # fmt: skip
    g_b1 = b.op(K.SUM, g_h, ty=f32(32), name="g_b1", phase=BWD, dims=(0,),
                aten="aten.sum.dim_IntList")  # fmt: skip
    # SGD: w - lr * g
    new: list[Value] = []
    for w, g in ((w1, g_w1), (b1, g_b1), (w2, g_w2)):
        step = b.op(K.MUL, g, lr, name=f"step_{w.name}", phase=OPT, module="sgd")
        new.append(b.op(K.SUB, w, step, name=f"{w.name}_new", phase=OPT, module="sgd"))
    return b.done(loss, *new)


def views() -> Graph:
    """Every canonicalize rule, with a near miss beside each."""
    b = Builder("views")
    x = b.src(K.INPUT, "x", f32(4, 8))
    u = b.src(K.INPUT, "u", f32(1, 1, 8))
    sq = b.src(K.INPUT, "sq", f32(4, 4))
    v_same = b.op(K.VIEW, x, name="v_same", shape=(4, 8))
    v_diff = b.op(K.VIEW, v_same, ty=f32(32), name="v_diff", shape=(32,))
    # as_strided: a real reordering with the same type, and one that is a no-op
    strided = b.op(K.VIEW, x, name="strided", size=(4, 8), stride=(1, 4), storage_offset=0)
    s_ok = b.op(K.VIEW, x, name="s_ok", size=(4, 8), stride=(8, 1), storage_offset=0)
    t_id = b.op(K.TRANSPOSE, x, name="t_id", dim0=1, dim1=-1)  # swaps dim 1 with itself
    t_sq = b.op(K.TRANSPOSE, sq, name="t_sq", dim0=0, dim1=1)  # same type, real transpose
    t_nodims = b.op(K.TRANSPOSE, sq, name="t_nodims")  # no attrs: cannot tell, kept
    p_unit = b.op(K.PERMUTE, u, name="p_unit", dims=(1, 0, 2))  # moves only unit dims
    p_id = b.op(K.PERMUTE, t_id, name="p_id", dims=(0, 1))
    e_same = b.op(K.EXPAND, p_id, name="e_same", shape=(4, 8))
    e_grow = b.op(K.EXPAND, u, ty=f32(4, 1, 8), name="e_grow", shape=(4, 1, 8))
    al = b.op(K.ALIAS, e_same, name="al")
    cl = b.op(K.CLONE, al, name="cl")
    cp = b.op(K.COPY, cl, x, name="cp")  # copy(dst, src): the result is src
    cast = b.op(K.COPY, cp, ty=TensorType((4, 8), DType.F16), name="cast")  # changes dtype: kept
    parts = b.g.add_op(K.SPLIT, [cp], [f32(2, 8), f32(2, 8)], attrs=Attrs.of(sizes=(2, 2)),
                       names=["part0", "part1"])  # fmt: skip
    gi = b.op(K.GETITEM, *parts.results, ty=f32(2, 8), name="gi", index=1)
    gi_bad = b.op(K.GETITEM, parts.results[0], ty=f32(8), name="gi_bad", index=0)  # types differ
    asrt = b.g.add_op(K.ASSERT, [gi], [f32(2, 8)], names=["checked"]).result
    b.g.add_op(K.METADATA, [gi], [f32()], names=["meta_unused"])  # result unused: dropped
    meta = b.g.add_op(K.METADATA, [gi], [TensorType((), DType.I64)], names=["meta_used"]).result
    s = b.op(K.ADD, asrt, asrt, name="s")
    return b.done(v_diff, strided, s_ok, t_sq, t_nodims, p_unit, e_grow, cast, s, gi_bad, meta)


def chain() -> Graph:
    """x * s + b, then gelu, feeding a matmul: the three elementwise ops fuse."""
    b = Builder("chain")
    x = b.src(K.INPUT, "x", f32(16, 64))
    s = b.src(K.PARAM, "scale", f32(64), "s")
    bias = b.src(K.PARAM, "bias", f32(64), "bias")
    w = b.src(K.PARAM, "w", f32(64, 32), "w")
    m = b.op(K.MUL, x, s, name="m", module="blk", cost=Cost(1024, 4352, 4096))
    a = b.op(K.ADD, m, bias, name="a", module="blk", cost=Cost(1024, 4352, 4096))
    g = b.op(K.GELU, a, name="g", module="blk.act", cost=Cost(8192, 4096, 4096))
    y = b.op(K.MATMUL, g, w, ty=f32(16, 32), name="y", cost=Cost(65536, 12288, 2048))
    return b.done(y)


def diamond() -> Graph:
    """t = tanh(x); u = t * x; v = t + u: t has two users, both in the group."""
    b = Builder("diamond")
    x = b.src(K.INPUT, "x", f32(8, 8))
    t = b.op(K.TANH, x, name="t", cost=Cost(64, 256, 256))
    u = b.op(K.MUL, t, x, name="u", cost=Cost(64, 512, 256))
    v = b.op(K.ADD, t, u, name="v", cost=Cost(64, 512, 256))
    return b.done(v)


def multi_use() -> Graph:
    """Values that must stay visible: %e is also used by a matmul, %r is a graph
    output, and %n feeds the backward pass."""
    b = Builder("multi_use")
    x = b.src(K.INPUT, "x", f32(8, 8))
    w = b.src(K.PARAM, "w", f32(8, 8))
    e = b.op(K.EXP, x, name="e")
    n = b.op(K.NEG, e, name="n")
    r = b.op(K.RELU, n, name="r")
    q = b.op(K.SQRT, r, name="q")
    p = b.op(K.MATMUL, e, w, name="p")
    z = b.op(K.ADD, q, p, name="z")
    gz = b.op(K.MUL, z, n, name="gz", phase=BWD)
    gs = b.op(K.SIGMOID, gz, name="gs", phase=BWD)
    return b.done(r, gs)


def long_chain(n: int = 5) -> Graph:
    """x -> relu -> exp -> neg -> ... (n ops), for the ``max`` option."""
    b = Builder("long_chain")
    v = b.src(K.INPUT, "x", f32(4, 4))
    kinds = [K.RELU, K.EXP, K.NEG, K.ABS, K.SQRT, K.TANH, K.SIGMOID]
    for i in range(n):
        v = b.op(kinds[i % len(kinds)], v, name=f"c{i}", cost=Cost(16, 64, 64))
    return b.done(v)


def sources() -> Graph:
    """Unused sources of every kind and a dead op on one of them."""
    b = Builder("sources")
    x = b.src(K.INPUT, "x", f32(4))
    b.src(K.INPUT, "unused_in", f32(4))
    w = b.src(K.PARAM, "unused_param", f32(4), "unused_param")
    b.src(K.BUFFER, "running_mean", f32(4), "running_mean")
    b.src(K.CONSTANT, "c", f32(4), "c")
    b.op(K.MUL, w, w, name="dead")
    r = b.op(K.RELU, x, name="r")
    return b.done(r)


def costs() -> Graph:
    """One op of each costing rule, all uncosted except %pre. %a is [6,5] and used
    with transpose_a, so the matmuls contract over K = 6."""
    b = Builder("costs")
    x = b.src(K.INPUT, "x", f32(2, 3, 4))
    a = b.src(K.INPUT, "a", f32(6, 5))
    bm = b.src(K.INPUT, "bm", f32(6, 3))
    bias = b.src(K.PARAM, "bias", f32(3))
    img = b.src(K.INPUT, "img", f32(2, 3, 8, 8))
    wconv = b.src(K.PARAM, "wconv", f32(4, 3, 3, 3))
    mm = b.op(K.MATMUL, a, bm, ty=f32(5, 3), name="mm", transpose_a=True)  # [5,6]x[6,3]
    bmm = b.op(K.BMM, x, b.op(K.TRANSPOSE, x, ty=f32(2, 4, 3), name="xt", dim0=1, dim1=2),
               ty=f32(2, 3, 3), name="bmm")  # fmt: skip
    addmm = b.op(K.ADDMM, bias, a, bm, ty=f32(5, 3), name="addmm", transpose_a=True)
    conv = b.op(K.CONV, img, wconv, ty=f32(2, 4, 6, 6), name="conv")
    ew = b.op(K.GELU, x, name="ew")
    red = b.op(K.SUM, x, ty=f32(2, 3), name="red", dims=(2,))
    norm = b.op(K.LAYER_NORM, x, name="norm")
    view = b.op(K.VIEW, x, ty=f32(6, 4), name="view", shape=(6, 4))
    cat = b.op(K.CAT, view, view, ty=f32(12, 4), name="cat", dim=0)
    pre = b.op(K.RELU, x, name="pre", cost=Cost(1, 2, 3))
    fused = b.op(K.FUSED, x, name="fused", ops=("mul", "add", "tanh"))
    return b.done(mm, bmm, addmm, conv, ew, red, norm, cat, pre, fused)


def conv_train() -> Graph:
    """Two convolutions' backward as autograd records them: conv2's computes the input,
    weight and bias gradients in one op; conv1's (the data needs no gradient) only its
    weight gradient."""
    b = Builder("conv_train")
    x = b.src(K.INPUT, "x", f32(2, 3, 8, 8))
    w1 = b.src(K.PARAM, "conv1.weight", f32(4, 3, 3, 3), "w1")
    w2 = b.src(K.PARAM, "conv2.weight", f32(4, 4, 3, 3), "w2")
    b2 = b.src(K.PARAM, "conv2.bias", f32(4), "b2")
    conv = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    h = b.op(K.CONV, x, w1, ty=f32(2, 4, 8, 8), name="h", module="conv1",
             cost=Cost(27648, 2000, 2048), **conv)  # fmt: skip
    a = b.op(K.RELU, h, name="a", module="relu1")
    y = b.op(K.CONV, a, w2, b2, ty=f32(2, 4, 8, 8), name="y", module="conv2", **conv)
    gy = b.op(K.MUL, y, y, name="gy", phase=BWD)
    g2 = b.g.add_op(
        K.CONV_BACKWARD, [gy, a, w2], [f32(2, 4, 8, 8), f32(4, 4, 3, 3), f32(4)],
        attrs=Attrs.of(output_mask=(True, True, True), **conv), cost=Cost(73728, 4736, 2640),
        phase=BWD, prov=Provenance("conv2", "aten.convolution_backward.default"),
        names=["ga", "g_w2", "g_b2"],
    )  # fmt: skip
    gh = b.op(K.ACT_BACKWARD, g2.results[0], h, name="gh", phase=BWD, module="relu1", act="relu")
    g1 = b.g.add_op(
        K.CONV_BACKWARD, [gh, x, w1], [f32(4, 3, 3, 3)],
        attrs=Attrs.of(output_mask=(False, True, False), **conv), cost=Cost(27648, 3584, 432),
        phase=BWD, prov=Provenance("conv1", "aten.convolution_backward.default"),
        names=["g_w1"],
    )  # fmt: skip
    return b.done(g1.results[0], g2.results[1], g2.results[2])


def scaled_scores() -> Graph:
    """Attention-style scores: a scale by 1/sqrt(d) (a scalar ``other``), a mask fill
    and an exp; fused, each member keeps its attributes."""
    b = Builder("scaled")
    q = b.src(K.INPUT, "q", f32(4, 4))
    m = b.op(K.MUL, q, name="s", module="attn", other=0.125)
    w = b.op(K.WHERE, m, name="masked", module="attn", value=-1e9)
    e = b.op(K.EXP, w, name="e", module="attn")
    return b.done(e)


INPUTS = Path(__file__).parent / "inputs"


def mlp_step() -> Graph:
    """A traced two-layer MLP training step (``inputs/mlp_step.wf``), as text."""
    from waferflow.ir.parser import parse_graph

    path = INPUTS / "mlp_step.wf"
    return parse_graph(path.read_text(encoding="utf-8"), source=str(path))


def moe_step() -> Graph:
    """A traced mixture-of-experts training step (``inputs/moe_step.wf``), as text."""
    from waferflow.ir.parser import parse_graph

    path = INPUTS / "moe_step.wf"
    return parse_graph(path.read_text(encoding="utf-8"), source=str(path))

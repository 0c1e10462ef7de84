"""The CNN as plain data: the layer kinds the seed machine's templates cover.

A ``Cnn`` is a batch size and an ordered tuple of layers: one or more
convolutions (each followed by a ReLU), an optional average pool, a fully
connected layer and a softmax-cross-entropy loss. ``seed_cnn_layers`` builds the
seed paper's CNN by hand; ``cnn_layers_from_graph`` reads the same from a traced
waferflow IR graph (its forward ops).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from waferflow.errors import PlanError
from waferflow.ir.graph import Graph, Op, Phase
from waferflow.ir.opkind import BOOKKEEPING, MOVEMENT, SOURCES, OpKind


@dataclass(frozen=True, slots=True)
class ConvLayer:
    """A square convolution with a ReLU after it (no bias: the seed's ALU has none)."""

    cin: int
    cout: int
    k: int
    stride: int
    pad: int
    hw_in: int
    name: str = ""

    @property
    def hw_out(self) -> int:
        return (self.hw_in + 2 * self.pad - self.k) // self.stride + 1

    @property
    def weight_floats(self) -> int:
        return self.cout * self.cin * self.k * self.k


@dataclass(frozen=True, slots=True)
class PoolLayer:
    """A square average pool over ``c`` channels."""

    k: int
    stride: int
    pad: int
    c: int
    hw_in: int
    name: str = ""

    @property
    def hw_out(self) -> int:
        return (self.hw_in + 2 * self.pad - self.k) // self.stride + 1


@dataclass(frozen=True, slots=True)
class FcLayer:
    """A fully connected layer, M inputs (the flattened C*H*W) to N outputs."""

    m: int
    n: int
    name: str = ""

    @property
    def weight_floats(self) -> int:
        return self.m * self.n


@dataclass(frozen=True, slots=True)
class LossLayer:
    """Softmax over ``classes`` logits, minus one-hot labels."""

    classes: int
    name: str = "loss"


Layer = ConvLayer | PoolLayer | FcLayer | LossLayer


@dataclass(frozen=True, slots=True)
class Cnn:
    """A batch size and the layers in order; checked to chain shape by shape."""

    batch: int
    layers: tuple[Layer, ...]

    def __post_init__(self) -> None:
        _check_chain(self)

    @property
    def convs(self) -> tuple[ConvLayer, ...]:
        return tuple(x for x in self.layers if isinstance(x, ConvLayer))

    @property
    def pool(self) -> PoolLayer | None:
        return next((x for x in self.layers if isinstance(x, PoolLayer)), None)

    @property
    def fc(self) -> FcLayer:
        return next(x for x in self.layers if isinstance(x, FcLayer))

    @property
    def loss(self) -> LossLayer:
        return next(x for x in self.layers if isinstance(x, LossLayer))

    @property
    def fc_input_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of what the FC layer receives (the pool's or the last conv's output)."""
        pool = self.pool
        if pool is not None:
            return (pool.c, pool.hw_out, pool.hw_out)
        last = self.convs[-1]
        return (last.cout, last.hw_out, last.hw_out)

    def layer_name(self, layer: Layer) -> str:
        """The layer's name, or its kind and position (conv1, pool, fc, loss)."""
        if layer.name:
            return layer.name
        if isinstance(layer, ConvLayer):
            return f"conv{self.convs.index(layer) + 1}"
        return {PoolLayer: "pool", FcLayer: "fc", LossLayer: "loss"}[type(layer)]


def _check_chain(cnn: Cnn) -> None:
    if cnn.batch < 1:
        raise PlanError(f"batch must be positive, got {cnn.batch}")
    kinds = [type(x) for x in cnn.layers]
    n_conv = kinds.count(ConvLayer)
    expected = [ConvLayer] * n_conv + ([PoolLayer] if PoolLayer in kinds else [])
    expected += [FcLayer, LossLayer]
    if n_conv == 0 or kinds != expected:
        names = " -> ".join(k.__name__ for k in kinds) or "nothing"
        raise PlanError(
            f"the seed machine's templates need conv(+ReLU)... [-> avg pool] -> fc -> loss; "
            f"got {names}"
        )
    convs = [x for x in cnn.layers if isinstance(x, ConvLayer)]
    for a, b in itertools.pairwise(convs):
        if b.cin != a.cout or b.hw_in != a.hw_out:
            raise PlanError(
                f"conv layers do not chain: {a.cout}x{a.hw_out}x{a.hw_out} out, "
                f"{b.cin}x{b.hw_in}x{b.hw_in} in"
            )
    pool = next((x for x in cnn.layers if isinstance(x, PoolLayer)), None)
    last = convs[-1]
    if pool is not None and (pool.c != last.cout or pool.hw_in != last.hw_out):
        raise PlanError(
            f"pool input {pool.c}x{pool.hw_in}x{pool.hw_in} does not match the last conv's "
            f"output {last.cout}x{last.hw_out}x{last.hw_out}"
        )
    fc = next(x for x in cnn.layers if isinstance(x, FcLayer))
    c, h, w = (pool.c, pool.hw_out, pool.hw_out) if pool else (last.cout,) + (last.hw_out,) * 2
    if fc.m != c * h * w:
        raise PlanError(f"fc expects {fc.m} inputs but receives {c}*{h}*{w} = {c * h * w}")
    loss = next(x for x in cnn.layers if isinstance(x, LossLayer))
    if loss.classes != fc.n:
        raise PlanError(f"loss over {loss.classes} classes after an fc with {fc.n} outputs")


def seed_cnn_layers(batch: int = 32) -> Cnn:
    """The seed paper's CNN, by hand: input 16x56x56; conv1 16->16 3x3 s1 p1; conv2
    16->32 3x3 s2 p1; conv3 32->32 3x3 s1 p1 (ReLU after each); 7x7 average pool,
    stride 7 (28 -> 4); FC 512 -> 16; softmax loss."""
    return Cnn(
        batch,
        (
            ConvLayer(16, 16, 3, 1, 1, 56, "conv1"),
            ConvLayer(16, 32, 3, 2, 1, 56, "conv2"),
            ConvLayer(32, 32, 3, 1, 1, 28, "conv3"),
            PoolLayer(7, 7, 0, 32, 28, "pool"),
            FcLayer(512, 16, "fc"),
            LossLayer(16, "loss"),
        ),
    )


# -- from a traced graph -----------------------------------------------------------------

_IGNORED = SOURCES | MOVEMENT | BOOKKEEPING | {OpKind.FILL, OpKind.DROPOUT}
_LOSS_KINDS = {OpKind.LOG_SOFTMAX, OpKind.SOFTMAX, OpKind.NLL_LOSS}


def _pair(op: Op, key: str, default: int) -> int:
    value = op.attrs.get(key, None)
    if value is None:
        return default
    if isinstance(value, tuple):
        if len(set(value)) != 1:
            raise PlanError(
                f"{op.kind.value} {key}={list(value)} is not square; the seed needs k x k"
            )
        value = value[0]
    if not isinstance(value, int):
        raise PlanError(f"{op.kind.value} {key}={value!r} is not an integer")
    return value


def _square_nchw(op: Op) -> tuple[int, int, int]:
    shape = op.operands[0].type.shape
    if len(shape) != 4 or shape[2] != shape[3]:
        raise PlanError(f"{op.kind.value} input {list(shape)} is not a square NCHW image")
    return int(shape[0]), int(shape[1]), int(shape[2])


def cnn_layers_from_graph(graph: Graph) -> Cnn:
    """The CNN of a traced graph (inference or training; only forward ops are read).

    Accepts the seed templates' layer kinds: convolution (groups 1, no dilation),
    each followed by a ReLU, an optional average pool, one fully connected layer,
    and a softmax / cross-entropy loss. Anything else raises ``PlanError``."""
    layers: list[Layer] = []
    batch: int | None = None
    pending_relu: ConvLayer | None = None
    fwd = [op for op in graph.ops if op.phase is Phase.FWD and op.kind not in _IGNORED]
    for op in fwd:
        where = f"{op.kind.value} ({op.prov.module or op.prov.aten or 'unnamed'})"
        if op.kind is OpKind.CONV:
            if pending_relu is not None:
                raise PlanError(f"conv {pending_relu.name} is not followed by a ReLU")
            if op.attrs.get("transposed", False) or op.attrs.get("groups", 1) != 1:
                raise PlanError(f"{where}: only plain convolutions (groups=1) map to the seed")
            if _pair(op, "dilation", 1) != 1:
                raise PlanError(f"{where}: dilated convolutions do not map to the seed")
            b, cin, hw = _square_nchw(op)
            w = op.operands[1].type.shape
            if len(w) != 4 or w[2] != w[3]:
                raise PlanError(f"{where}: weight {list(w)} is not Cout x Cin x k x k")
            batch = b if batch is None else batch
            name = op.prov.module or f"conv{len(layers) + 1}"
            pending_relu = ConvLayer(
                cin, int(w[0]), int(w[2]), _pair(op, "stride", 1), _pair(op, "padding", 0), hw, name
            )
        elif op.kind is OpKind.RELU:
            if pending_relu is None:
                raise PlanError(f"{where}: a ReLU that does not follow a convolution")
            layers.append(pending_relu)
            pending_relu = None
        elif pending_relu is not None:
            raise PlanError(f"conv {pending_relu.name} is followed by {where}, not a ReLU")
        elif op.kind is OpKind.AVG_POOL:
            b, c, hw = _square_nchw(op)
            k = _pair(op, "kernel_size", 1)
            name = op.prov.module or "pool"
            layers.append(
                PoolLayer(k, _pair(op, "stride", k), _pair(op, "padding", 0), c, hw, name)
            )
        elif op.kind in (OpKind.ADDMM, OpKind.MATMUL):
            x = op.operands[1] if op.kind is OpKind.ADDMM else op.operands[0]
            y = op.results[0]
            if len(x.type.shape) != 2 or len(y.type.shape) != 2:
                raise PlanError(f"{where}: only a 2-D fully connected layer maps to the seed")
            name = op.prov.module or "fc"
            layers.append(FcLayer(int(x.type.shape[1]), int(y.type.shape[1]), name))
        elif op.kind in _LOSS_KINDS:
            if not any(isinstance(x, LossLayer) for x in layers):
                classes = int(op.operands[0].type.shape[-1])
                layers.append(LossLayer(classes, "loss"))
        else:
            raise PlanError(
                f"{where} has no seed-machine template (conv+ReLU, avg pool, fc, softmax loss)"
            )
    if pending_relu is not None:
        raise PlanError(f"conv {pending_relu.name} is not followed by a ReLU")
    if not any(isinstance(x, LossLayer) for x in layers) and layers:
        fc = next((x for x in layers if isinstance(x, FcLayer)), None)
        if fc is not None:  # an inference trace: the loss the seed always trains with
            layers.append(LossLayer(fc.n, "loss"))
    if batch is None:
        raise PlanError(f"graph @{graph.name} has no convolution")
    return Cnn(batch, tuple(layers))

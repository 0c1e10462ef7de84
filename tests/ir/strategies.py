"""Hypothesis strategies for random *valid* IR graphs, and a structural fingerprint
for comparing two graphs (NaN-safe, and telling 1, 1.0 and True apart)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, AttrValue, Cost, Graph, Phase, Provenance, Value
from waferflow.ir.opkind import OpKind

K = OpKind

# Small dimensions so that random pairs often broadcast.
dims = st.sampled_from([1, 1, 2, 3, 4])
shapes = st.lists(dims, min_size=0, max_size=3).map(tuple)
dtypes = st.sampled_from(list(DType))
tensor_types = st.builds(TensorType, shapes, dtypes)

# Value-name hints: Graph.fresh_name sanitises and uniquifies them.
value_hints = st.none() | st.text(alphabet="abxyz019_.éλ中²", min_size=1, max_size=6)
graph_names = st.text(alphabet="abcgXYZ019_-.:/é", min_size=0, max_size=10)
# Arbitrary text, plus strings that stress the escaping in the text form.
texts = st.text(max_size=12) | st.sampled_from(
    ['"', "\\", "\n\t", "a # not a comment", "}", "%x", "é中\U0001f600", "\x00\x1f", ""]
)
attr_keys = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True) | st.sampled_from(
    ["größe", "λ", "_", "loc", "cost", "name2", "fwd"]
)
attr_scalars: st.SearchStrategy[AttrValue] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-05, 1e16, 5e-324, math.inf, -math.inf, math.nan]),
    texts,
)
attr_values: st.SearchStrategy[AttrValue] = st.recursive(
    attr_scalars, lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=8
)
attr_dicts = st.dictionaries(attr_keys, attr_values, max_size=4)
costs = st.builds(
    Cost,
    st.integers(min_value=0, max_value=10**15),
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=0, max_value=10**12),
)
phases = st.sampled_from(list(Phase))
provenances = st.just(Provenance()) | st.builds(Provenance, texts, texts)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + a
    pb = (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y) if 1 in (x, y) else x)
    return tuple(out)


class _Builder:
    """Appends random ops of a few kinds to a graph, keeping it valid."""

    def __init__(self, draw: Callable[..., Any], graph: Graph) -> None:
        self.draw = draw
        self.g = graph
        self.values: list[Value] = []

    def common(self) -> dict[str, Any]:
        d = self.draw
        return {
            "cost": d(st.just(Cost()) | costs),
            "phase": d(phases),
            "prov": d(provenances),
        }

    def add(
        self,
        kind: OpKind,
        operands: list[Value],
        types: list[TensorType],
        attrs: dict[str, AttrValue] | None = None,
    ) -> list[Value]:
        merged = self.draw(attr_dicts)
        merged.pop("transpose_a", None)
        merged.pop("transpose_b", None)
        merged.update(attrs or {})
        op = self.g.add_op(
            kind,
            operands,
            types,
            attrs=Attrs.of(merged),
            names=[self.draw(value_hints) for _ in types],
            **self.common(),
        )
        self.values.extend(op.results)
        return list(op.results)

    def source(self, ty: TensorType | None = None) -> Value:
        kind = self.draw(st.sampled_from([K.INPUT, K.PARAM, K.BUFFER, K.CONSTANT]))
        ty = ty if ty is not None else self.draw(tensor_types)
        return self.add(kind, [], [ty], {"name": self.draw(texts)})[0]

    def pick(self) -> Value:
        return self.draw(st.sampled_from(self.values))

    def unary(self) -> None:
        a = self.pick()
        kind = self.draw(st.sampled_from([K.RELU, K.EXP, K.NEG, K.CAST, K.DROPOUT]))
        ty = a.type if kind != K.CAST else TensorType(a.type.shape, self.draw(dtypes))
        self.add(kind, [a], [ty])

    def binary(self) -> None:
        a = self.pick()
        partners = [v for v in self.values if _broadcast(a.type.shape, v.type.shape) is not None]
        b = self.draw(st.sampled_from(partners))
        shape = _broadcast(a.type.shape, b.type.shape)
        assert shape is not None
        kind = self.draw(st.sampled_from([K.ADD, K.MUL, K.SUB, K.MAXIMUM, K.WHERE]))
        self.add(kind, [a, b], [a.type.with_shape(shape)])

    def matmul(self) -> None:
        m, k, n = (self.draw(st.integers(1, 5)) for _ in range(3))
        ta, tb = self.draw(st.booleans()), self.draw(st.booleans())
        a = self.source(TensorType((k, m) if ta else (m, k), DType.F32))
        b = self.source(TensorType((n, k) if tb else (k, n), DType.F32))
        flags: dict[str, AttrValue] = {}
        if ta or self.draw(st.booleans()):
            flags["transpose_a"] = ta
        if tb or self.draw(st.booleans()):
            flags["transpose_b"] = tb
        self.add(K.MATMUL, [a, b], [TensorType((m, n), DType.F32)], flags)

    def view(self) -> None:
        a = self.pick()
        shape = self.draw(
            st.sampled_from([(a.type.numel,), a.type.shape[::-1], (1, *a.type.shape)])
        )
        kind = (
            K.VIEW
            if shape != a.type.shape[::-1]
            else self.draw(st.sampled_from([K.VIEW, K.PERMUTE]))
        )
        self.add(kind, [a], [a.type.with_shape(shape)])

    def opaque(self) -> None:
        # Anything goes: 0-3 operands, 0-3 results of any type (multi- and zero-result ops).
        operands = self.draw(st.lists(st.sampled_from(self.values), max_size=3))
        types = self.draw(st.lists(tensor_types, max_size=3))
        kind = self.draw(st.sampled_from([K.OPAQUE, K.SPLIT, K.ALL_REDUCE, K.SEND]))
        self.add(kind, operands, types)

    def assertion(self) -> None:
        self.add(K.ASSERT, [self.pick()], [])


@st.composite
def graphs(draw: Callable[..., Any], max_ops: int = 10) -> Graph:
    """A random graph that verifies: sources first, then random ops, 1-3 outputs."""
    b = _Builder(draw, Graph(draw(graph_names)))
    for _ in range(draw(st.integers(1, 3))):
        b.source()
    steps = [b.unary, b.binary, b.matmul, b.view, b.opaque, b.assertion]
    for _ in range(draw(st.integers(0, max_ops))):
        draw(st.sampled_from(steps))()
    b.g.set_outputs(draw(st.lists(st.sampled_from(b.values), min_size=1, max_size=3)))
    return b.g


def attr_fingerprint(value: AttrValue) -> object:
    """An attribute value as a comparable object: NaN equals NaN, -0.0 differs from
    0.0, and 1, 1.0 and True all differ."""
    if isinstance(value, tuple):
        return ("tuple", tuple(attr_fingerprint(v) for v in value))
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def fingerprint(graph: Graph) -> object:
    """Everything a graph says, by value names, as nested tuples."""
    ops = tuple(
        (
            op.kind,
            tuple(v.name for v in op.operands),
            tuple((v.name, v.type) for v in op.results),
            tuple((k, attr_fingerprint(v)) for k, v in op.attrs),
            op.cost,
            op.phase,
            op.prov,
        )
        for op in graph.ops
    )
    return (graph.name, ops, tuple(v.name for v in graph.outputs))

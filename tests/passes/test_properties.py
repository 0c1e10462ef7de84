"""Hypothesis properties of canonicalize, dce and fuse-elementwise on random graphs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.ir import Attrs, Cost, Graph, OpKind, Phase, Value
from waferflow.ir.verifier import verify_graph
from waferflow.passes import PassContext, PassManager

from .graphs import Builder, f32

K = OpKind
UNARY = [K.RELU, K.EXP, K.NEG, K.TANH, K.SIGMOID, K.ABS]
BINARY = [K.ADD, K.MUL, K.SUB, K.MAXIMUM]
NO_OPS = [K.VIEW, K.DETACH, K.ALIAS, K.CLONE, K.EXPAND, K.TRANSPOSE, K.COPY, K.ASSERT]
SPECIAL = [K.MATMUL, K.SPLIT]  # SPLIT: a reshape away and back, through two views
CHOICES = UNARY + BINARY + NO_OPS + SPECIAL
S = (4, 8)


@dataclass
class Case:
    graph: Graph
    costed: bool


@st.composite
def graphs(draw: st.DrawFn) -> Case:
    """Random DAGs over [4,8] tensors mixing elementwise ops, no-op views and
    copies, asserts, reshapes and matmuls, in random phases, with dead code."""
    costed = draw(st.booleans())
    b = Builder("rand")
    vals: list[Value] = [
        b.src(K.INPUT, "x0", f32(*S)),
        b.src(K.INPUT, "x1", f32(*S)),
        b.src(K.PARAM, "s", f32(S[1])),  # broadcast along rows
    ]
    w = b.src(K.PARAM, "w", f32(S[1], S[1]))
    tensors = [v for v in vals if v.type.shape == S]
    flats: list[Value] = []  # [32] reshapes: may be returned, not computed on
    n = draw(st.integers(1, 24))
    for _ in range(n):
        kind = draw(st.sampled_from(CHOICES))
        phase = draw(st.sampled_from(Phase))
        cost = Cost(draw(st.integers(1, 10**6)), 8, 8) if costed else None
        pick = st.sampled_from(tensors)
        a = draw(pick)
        if kind in UNARY:
            v = b.op(kind, a, phase=phase, cost=cost)
        elif kind in BINARY:
            other = draw(st.sampled_from([*tensors, vals[2]]))
            v = b.op(kind, a, other, phase=phase, cost=cost)
        elif kind is K.MATMUL:
            v = b.op(K.MATMUL, a, w, phase=phase, cost=cost)
        elif kind is K.SPLIT:
            flat = b.op(K.VIEW, a, ty=f32(32), phase=phase, cost=cost, shape=(32,))
            flats.append(flat)
            v = b.op(K.VIEW, flat, ty=f32(*S), phase=phase, cost=cost, shape=S)
        elif kind is K.TRANSPOSE:
            v = b.op(K.TRANSPOSE, a, phase=phase, cost=cost, dim0=0, dim1=-2)
        elif kind is K.COPY:
            v = b.op(K.COPY, draw(pick), a, phase=phase, cost=cost)
        elif kind is K.ASSERT:
            op = b.g.add_op(K.ASSERT, [a], [a.type] if draw(st.booleans()) else [], cost=cost)
            if not op.results:
                continue
            v = op.result
        else:
            attrs = {"shape": S} if kind in (K.VIEW, K.EXPAND) else {}
            v = b.op(kind, a, phase=phase, cost=cost, **attrs)
        tensors.append(v)
    outs = draw(st.lists(st.sampled_from(tensors + flats), min_size=1, max_size=4))
    return Case(b.done(*outs), costed)


def evaluate(g: Graph, seed: int) -> list[np.ndarray]:
    """A numpy interpreter for the ops the generator makes."""
    rng = np.random.default_rng(seed)
    env: dict[int, np.ndarray] = {}
    for op in g.ops:
        args = [env[id(v)] for v in op.operands]
        if op.is_source:
            out = rng.standard_normal(op.result.type.shape)
        elif not op.results:
            continue
        else:
            out = _compute(op.kind, op.attrs, args, op.result.type.shape)
        env[id(op.result)] = out
    return [env[id(v)] for v in g.outputs]


def _compute(
    kind: OpKind, attrs: Attrs, args: list[np.ndarray], shape: tuple[int, ...]
) -> np.ndarray:
    with np.errstate(all="ignore"):
        unary = {
            K.RELU: lambda a: np.maximum(a, 0),
            K.EXP: np.exp,
            K.NEG: np.negative,
            K.TANH: np.tanh,
            K.SIGMOID: lambda a: 1 / (1 + np.exp(-a)),
            K.ABS: np.abs,
        }
        binary = {K.ADD: np.add, K.MUL: np.multiply, K.SUB: np.subtract, K.MAXIMUM: np.maximum}
        if kind in unary:
            return unary[kind](args[0])
        if kind in binary:
            return binary[kind](args[0], args[1])
        if kind is K.MATMUL:
            return args[0] @ args[1]
        if kind in (K.VIEW, K.EXPAND):
            return np.broadcast_to(args[0], shape) if kind is K.EXPAND else args[0].reshape(shape)
        if kind is K.TRANSPOSE:
            return np.swapaxes(args[0], int(attrs.get("dim0")), int(attrs.get("dim1")))  # type: ignore[arg-type]
        if kind in (K.DETACH, K.ALIAS, K.CLONE, K.ASSERT):
            return args[0].copy()
        if kind is K.COPY:
            return np.broadcast_to(args[-1], shape).copy()
    raise AssertionError(f"no rule for {kind}")


def _run(pipeline: str, g: Graph) -> Graph:
    return PassManager(pipeline, verify_each=True).run(g, PassContext())


@settings(deadline=None, max_examples=150)
@given(graphs())
def test_pipeline_keeps_output_types_and_never_adds_flops(case: Case) -> None:
    g = case.graph
    verify_graph(g)
    types = [v.type for v in g.outputs]
    if not case.costed:
        # uncosted ops are counted as annotate-cost counts them, before and after
        g = _run("annotate-cost", g)
    flops = g.total_cost().flops
    out = _run("canonicalize,dce,fuse-elementwise,annotate-cost", g)
    assert [v.type for v in out.outputs] == types
    assert out.total_cost().flops <= flops


@settings(deadline=None, max_examples=150)
@given(graphs(), st.integers(0, 2**32 - 1))
def test_canonicalize_and_dce_preserve_the_outputs_values(case: Case, seed: int) -> None:
    expected = evaluate(case.graph, seed)
    g = _run("canonicalize,dce", case.graph)
    got = evaluate(g, seed)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    # nothing the rules remove is left behind
    assert not any(op.kind in (K.DETACH, K.ALIAS, K.CLONE, K.ASSERT) for op in g.ops)


@settings(deadline=None, max_examples=100)
@given(graphs())
def test_fuse_hides_only_single_group_intermediates(case: Case) -> None:
    """Every value that survives fusion keeps its producer's results; every value
    used by a surviving op or returned is still defined in the graph."""
    g = _run("canonicalize,dce,fuse-elementwise", case.graph)
    defined = {id(v) for v in g.values()}
    assert all(id(v) in defined for op in g.ops for v in op.operands)
    assert all(id(v) in defined for v in g.outputs)
    for op in g.ops:
        if op.kind is K.FUSED:
            kinds = op.attrs.get("ops")
            assert isinstance(kinds, tuple) and 2 <= len(kinds) <= 16
            assert op.cost.bytes_read == sum(
                v.type.nbytes for v in {id(v): v for v in op.operands}.values()
            )

"""Properties of lowered plans over random small models and random dp x tp x pp x
micro-batch plans: the verifier finds no partial sum left unreduced (nor any other
broken annotation) in the IR, and the gradients each rank ends with cover every
parameter exactly once per replica.

Few examples, derandomized: each model is traced once (cached), so the cost is a few
plans per model."""

from __future__ import annotations

import functools
import itertools

import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch import nn

from waferflow.frontend import trace, zoo_hf
from waferflow.ir.graph import Graph, Op, Phase
from waferflow.ir.opkind import OpKind
from waferflow.ir.parallel import MbMode, root_value
from waferflow.ir.sharding import MeshAxis, Partial
from waferflow.ir.target import get_wafer
from waferflow.ir.verifier import graph_problems
from waferflow.parallel.driver import clone_graph, insert, lower, parallelize, schedule

WAFER = get_wafer("mesh4x4")  # 16 cores: the largest plan below uses all of them
PROFILE = settings(max_examples=6, deadline=None, derandomize=True, database=None)


class MLP(nn.Module):
    def __init__(self, sizes: tuple[int, ...]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x


@functools.cache
def mlp(sizes: tuple[int, ...], batch: int) -> Graph:
    return trace(MLP(sizes), (torch.randn(batch, sizes[0]),), mode="train", name="mlp")


@functools.cache
def gpt2(layers: int, width: int, heads: int, batch: int) -> Graph:
    config = (("n_layer", layers), ("n_embd", width), ("n_head", heads), ("n_positions", 32),
              ("vocab_size", 64), ("bos_token_id", 0), ("eos_token_id", 0), ("pad_token_id", 0))  # fmt: skip
    spec = zoo_hf.HFSpec("gpt2", config, batch, 16, "random small GPT-2")
    model, cfg = zoo_hf.build(spec)
    inputs = zoo_hf.example_inputs(spec, cfg, batch, 16)
    return trace(model, inputs, mode="train", loss_fn=zoo_hf.LOSSES["gpt2"], name="gpt2")


mlps = st.tuples(st.sampled_from([(16, 32, 8), (8, 16, 16, 4)]), st.sampled_from([8, 16]))
transformers = st.tuples(st.sampled_from([1, 2]), st.sampled_from([(32, 2), (32, 4)]))
plans = st.tuples(
    st.sampled_from([1, 2]),  # dp
    st.sampled_from([1, 2]),  # tp
    st.sampled_from([1, 2]),  # pp
    st.sampled_from([1, 2]),  # micro-batches
)


def _updates(graph: Graph) -> list[tuple[Op, int, int]]:
    """Each parameter's update (an OPT op returned by the step): (op, index of the
    parameter operand, index of the gradient operand)."""
    outputs = {id(v) for v in graph.outputs}
    found = []
    for op in graph.ops:
        if op.phase is not Phase.OPT or not any(id(r) in outputs for r in op.results):
            continue
        params = [i for i, v in enumerate(op.operands)
                  if (p := root_value(v).producer) is not None and p.kind is OpKind.PARAM]  # fmt: skip
        grads = [i for i, v in enumerate(op.operands)
                 if (p := root_value(v).producer) is not None and p.phase is Phase.BWD]  # fmt: skip
        if len(params) == 1 and len(grads) == 1:
            found.append((op, params[0], grads[0]))
    return found


def check_plan(graph: Graph, spec: str) -> None:
    g = clone_graph(graph)
    n_params = len(g.sources(OpKind.PARAM))
    state = parallelize(g, WAFER, spec)
    insert(g, state)
    schedule(g, state)
    lower(state)
    # the lowered IR breaks no rule: no partial sum is left unreduced before a
    # reduction or an output, every conversion is a collective, stages and modes hold
    assert graph_problems(g) == [], spec
    updates = _updates(g)
    assert len(updates) == n_params  # every parameter is updated, once
    prog = state.program
    assert prog is not None
    ranks = state.plan.ranks_per_stage
    for op, ip, ig in updates:
        assert op.par is not None
        need_p, need_g = op.par.inputs[ip], op.par.inputs[ig]
        grad = op.operands[ig]
        # the gradient the update reads is whole: reduced along dp and tp (by a
        # collective) and accumulated over the micro-batches (read after the last one)
        for axis in MeshAxis:
            assert not isinstance(need_g.get(axis), Partial), (spec, grad.name, axis)
        for axis in (MeshAxis.DP, MeshAxis.TP):
            assert not isinstance(grad.sharding.get(axis), Partial), (spec, grad.name)
        if isinstance(grad.sharding.get(MeshAxis.MB), Partial):
            assert op.par.mode is not MbMode.PER_MB
        # ... and holds exactly the elements of the parameter the rank holds: each
        # element of every parameter once per tensor-parallel group, i.e. per replica
        assert op.operands[ip].type.shape == grad.type.shape
        assert need_g.get(MeshAxis.TP) == need_p.get(MeshAxis.TP), (spec, grad.name)
        assert need_g.get(MeshAxis.DP) == need_p.get(MeshAxis.DP), (spec, grad.name)
        # every rank of the parameter's stage runs the update exactly once per step
        runs = [a.rank for a in prog.actors if op in a.group.ops]
        assert sorted(runs) == list(range(ranks)), (spec, op.results[0].name, runs)


@PROFILE
@given(mlps, plans)
@example(((8, 16, 16, 4), 16), (2, 2, 2, 2))
def test_random_mlp_plans(
    model: tuple[tuple[int, ...], int], plan: tuple[int, int, int, int]
) -> None:
    sizes, batch = model
    dp, tp, pp, mb = plan
    check_plan(mlp(sizes, batch), f"dp={dp},tp={tp},pp={pp},microbatches={mb},span=1")


@PROFILE
@given(transformers, plans)
@example((2, (32, 4)), (2, 2, 2, 2))  # every axis at once
def test_random_transformer_plans(
    model: tuple[int, tuple[int, int]], plan: tuple[int, int, int, int]
) -> None:
    layers, (width, heads) = model
    dp, tp, pp, mb = plan
    check_plan(gpt2(layers, width, heads, 8), f"dp={dp},tp={tp},pp={pp},microbatches={mb},span=1")

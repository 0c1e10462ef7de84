"""The AMCoDA seed CNN traced as a training step: structure, phases, names and
hand-computed FLOPs and bytes."""

from __future__ import annotations

import pytest

from waferflow.frontend import load_model, trace
from waferflow.ir import Graph, OpKind, Phase, print_graph
from waferflow.ir.opkind import MATMUL_LIKE, OPTIMIZER, VIEWS
from waferflow.ir.verifier import verify_graph

K = OpKind
B = 32  # the seed CNN's batch
LAYERS = ("conv1", "conv2", "conv3", "fc")


@pytest.fixture(scope="module")
def train_sgd() -> Graph:
    bundle = load_model("cnn:amcoda")
    return trace(
        bundle.module, bundle.example_inputs, mode="train", loss_fn=bundle.loss_fn, name="amcoda"
    )


@pytest.fixture(scope="module")
def train_adamw() -> Graph:
    bundle = load_model("cnn:amcoda")
    return trace(
        bundle.module,
        bundle.example_inputs,
        mode="train",
        optimizer="adamw",
        loss_fn=bundle.loss_fn,
        name="amcoda",
    )


def _ops(g: Graph, kind: OpKind, module: str, phase: Phase) -> list:
    return [
        op for op in g.ops if op.kind == kind and op.prov.module == module and op.phase == phase
    ]


def test_every_layer_has_forward_backward_and_update(train_sgd: Graph) -> None:
    fwd_kind = {"conv1": K.CONV, "conv2": K.CONV, "conv3": K.CONV, "fc": K.MATMUL}
    bwd_kind = {"conv1": K.CONV_BACKWARD, "conv2": K.CONV_BACKWARD, "conv3": K.CONV_BACKWARD, "fc": K.MATMUL}  # fmt: skip
    for layer in LAYERS:
        fwd = _ops(train_sgd, fwd_kind[layer], layer, Phase.FWD)
        bwd = _ops(train_sgd, bwd_kind[layer], layer, Phase.BWD)
        upd = [op for op in train_sgd.ops if op.prov.module == layer and op.phase == Phase.OPT]
        assert len(fwd) == 1, layer
        assert bwd, layer
        # SGD: one add per parameter (the seed CNN has weights only, no biases)
        assert [op.kind for op in upd] == [K.ADD], layer
        for op in (*fwd, *bwd):
            assert op.cost.flops > 0
            assert op.kind in MATMUL_LIKE


def test_conv_and_fc_flops_match_closed_forms(train_sgd: Graph) -> None:
    conv_fwd = {
        "conv1": 2 * B * 16 * 16 * 56 * 56 * 9,
        "conv2": 2 * B * 32 * 16 * 28 * 28 * 9,
        "conv3": 2 * B * 32 * 32 * 28 * 28 * 9,
    }
    assert conv_fwd["conv1"] == 462_422_016
    for layer, flops in conv_fwd.items():
        (fwd,) = _ops(train_sgd, K.CONV, layer, Phase.FWD)
        assert fwd.cost.flops == flops
        (bwd,) = _ops(train_sgd, K.CONV_BACKWARD, layer, Phase.BWD)
        # conv1's input is the data, which needs no gradient: weight gradient only
        assert bwd.cost.flops == (flops if layer == "conv1" else 2 * flops)
    (fc,) = _ops(train_sgd, K.MATMUL, "fc", Phase.FWD)
    assert fc.cost.flops == 2 * B * 512 * 16
    fc_bwd = _ops(train_sgd, K.MATMUL, "fc", Phase.BWD)
    assert sorted(op.cost.flops for op in fc_bwd) == [2 * B * 512 * 16] * 2


def test_conv1_bytes_and_conv_attributes(train_sgd: Graph) -> None:
    (conv1,) = _ops(train_sgd, K.CONV, "conv1", Phase.FWD)
    x_bytes = B * 16 * 56 * 56 * 4
    assert conv1.cost.bytes_read == x_bytes + 16 * 16 * 9 * 4  # input and weight, no bias
    assert conv1.cost.bytes_written == B * 16 * 56 * 56 * 4
    attrs = conv1.attrs.as_dict()
    assert attrs["stride"] == (1, 1) and attrs["padding"] == (1, 1) and attrs["groups"] == 1
    (conv2,) = _ops(train_sgd, K.CONV, "conv2", Phase.FWD)
    assert conv2.attrs.get("stride") == (2, 2)
    assert [str(v.type) for v in conv2.results] == [f"f32[{B},32,28,28]"]


def test_pool_and_elementwise_rules(train_sgd: Graph) -> None:
    (pool,) = [op for op in train_sgd.ops if op.kind == K.AVG_POOL]
    assert pool.attrs.get("kernel_size") == (7, 7)
    assert pool.cost.flops == B * 32 * 28 * 28  # 1 FLOP per input element
    for op in train_sgd.ops:
        if op.kind == K.RELU:
            assert op.cost.flops == op.result.type.numel
        if op.kind in VIEWS:
            assert op.cost.flops == op.cost.bytes_read == op.cost.bytes_written == 0


def test_conv_backward_has_one_result_per_requested_gradient(train_sgd: Graph) -> None:
    (bwd1,) = _ops(train_sgd, K.CONV_BACKWARD, "conv1", Phase.BWD)
    assert bwd1.attrs.get("output_mask") == (False, True, False)
    assert [v.name for v in bwd1.results] == ["conv1.weight.grad"]
    (bwd2,) = _ops(train_sgd, K.CONV_BACKWARD, "conv2", Phase.BWD)
    assert len(bwd2.results) == 2
    assert not any(op.kind == K.GETITEM for op in train_sgd.ops)


def test_phases_run_forward_then_backward_then_update(train_sgd: Graph) -> None:
    order = {Phase.FWD: 0, Phase.BWD: 1, Phase.OPT: 2}
    phases = [order[op.phase] for op in train_sgd.ops if not op.is_source]
    assert phases == sorted(phases)
    assert set(phases) == {0, 1, 2}
    assert all(op.phase == Phase.FWD for op in train_sgd.sources())


def test_sources_outputs_and_names(train_sgd: Graph) -> None:
    params = [op.attrs.get("name") for op in train_sgd.sources(K.PARAM)]
    assert params == [f"{layer}.weight" for layer in LAYERS]
    (x,) = train_sgd.sources(K.INPUT)
    assert x.attrs.get("name") == "x" and str(x.result.type) == f"f32[{B},16,56,56]"
    names = [v.name for v in train_sgd.outputs]
    assert names == ["loss", *(f"{p}.new" for p in params)]
    assert train_sgd.outputs[0].type.shape == ()
    text = print_graph(train_sgd)
    assert '%conv1.weight = param "conv1.weight" : f32[16,16,3,3] fwd' in text
    verify_graph(train_sgd)


def test_adamw_state_and_update(train_adamw: Graph) -> None:
    verify_graph(train_adamw)
    params = [op.attrs.get("name") for op in train_adamw.sources(K.PARAM)]
    state = [op.attrs.get("name") for op in train_adamw.sources(K.BUFFER)]
    assert state == [f"adamw.{s}.{p}" for s in ("m", "v") for p in params]
    outs = [v.name for v in train_adamw.outputs]
    assert outs == [
        "loss",
        *(f"{p}.new" for p in params),
        *(f"adamw.{s}.{p}.new" for s in ("m", "v") for p in params),
    ]
    opt_ops = [op for op in train_adamw.ops if op.phase == Phase.OPT]
    for kind in (K.LERP, K.ADDCMUL, K.ADDCDIV):
        assert sum(op.kind == kind for op in opt_ops) == len(params)
    # the update of conv1.weight costs a handful of FLOPs per element
    numel = 16 * 16 * 9
    conv1_update = [op for op in opt_ops if op.prov.module == "conv1" and op.result.type.numel == numel]  # fmt: skip
    assert len(conv1_update) == 8
    assert sum(op.cost.flops for op in conv1_update) == 8 * numel
    assert not any(op.kind in OPTIMIZER for op in train_adamw.ops)


def test_infer_graph_is_forward_only() -> None:
    bundle = load_model("cnn:amcoda", batch=4)
    g = trace(bundle.module, bundle.example_inputs)
    verify_graph(g)
    assert g.name == "amcoda_cnn_infer"
    assert {op.phase for op in g.ops} == {Phase.FWD}
    assert [v.name for v in g.outputs] == ["out"]
    assert str(g.outputs[0].type) == "f32[4,16]"
    assert not any(op.kind in (K.CONV_BACKWARD, K.NLL_LOSS) for op in g.ops)


def test_trace_is_deterministic(train_sgd: Graph) -> None:
    bundle = load_model("cnn:amcoda")
    again = trace(
        bundle.module, bundle.example_inputs, mode="train", loss_fn=bundle.loss_fn, name="amcoda"
    )
    assert print_graph(again) == print_graph(train_sgd)

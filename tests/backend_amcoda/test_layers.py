"""The CNN as data: the hand-built seed CNN and the one read from a traced graph."""

from __future__ import annotations

import pytest

from waferflow.backend_amcoda import (
    Cnn,
    ConvLayer,
    FcLayer,
    LossLayer,
    PoolLayer,
    cnn_layers_from_graph,
    seed_cnn_layers,
)
from waferflow.errors import PlanError


def test_seed_cnn_shapes() -> None:
    cnn = seed_cnn_layers()
    assert cnn.batch == 32
    assert [c.hw_out for c in cnn.convs] == [56, 28, 28]
    assert cnn.pool is not None and cnn.pool.hw_out == 4
    assert cnn.fc_input_shape == (32, 4, 4)
    assert (cnn.fc.m, cnn.fc.n, cnn.loss.classes) == (512, 16, 16)
    assert [cnn.layer_name(x) for x in cnn.layers] == [
        "conv1", "conv2", "conv3", "pool", "fc", "loss",
    ]  # fmt: skip


def test_chain_checks() -> None:
    with pytest.raises(PlanError, match="do not chain"):
        Cnn(
            8,
            (
                ConvLayer(4, 8, 3, 1, 1, 8),
                ConvLayer(4, 8, 3, 1, 1, 8),
                FcLayer(512, 2),
                LossLayer(2),
            ),
        )
    with pytest.raises(PlanError, match="fc expects"):
        Cnn(8, (ConvLayer(4, 8, 3, 1, 1, 8), FcLayer(100, 2), LossLayer(2)))
    with pytest.raises(PlanError, match="templates need"):
        Cnn(8, (FcLayer(4, 2), LossLayer(2)))
    with pytest.raises(PlanError, match="classes"):
        Cnn(8, (ConvLayer(4, 8, 3, 1, 1, 8), PoolLayer(8, 8, 0, 8, 8), FcLayer(8, 2), LossLayer(3)))


@pytest.fixture(scope="module")
def traced():
    frontend = pytest.importorskip("waferflow.frontend")
    b = frontend.load_model("cnn:amcoda")
    train = frontend.trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn)
    small = frontend.load_model("cnn:amcoda", batch=8)
    infer = frontend.trace(small.module, small.example_inputs)
    return frontend, train, infer


def test_graph_and_hand_built_cnn_agree(traced) -> None:
    _, train, infer = traced
    assert cnn_layers_from_graph(train) == seed_cnn_layers()
    # an inference trace has no loss; the seed always trains with softmax loss
    assert cnn_layers_from_graph(infer) == seed_cnn_layers(batch=8)


def test_graph_with_no_template_is_refused(traced) -> None:
    frontend, _, _ = traced
    b = frontend.load_model("cnn:resnet-tiny")
    g = frontend.trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn)
    with pytest.raises(PlanError, match="stem"):
        cnn_layers_from_graph(g)

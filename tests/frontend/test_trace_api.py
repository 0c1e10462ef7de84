"""``trace`` on hand-written modules: options, errors, unknown ops, real weights."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from waferflow.errors import ConfigError, TraceError
from waferflow.frontend import UnknownOpWarning, trace
from waferflow.ir import OpKind, Phase
from waferflow.ir.verifier import verify_graph

K = OpKind


@torch.library.custom_op("wftest::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _twice_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("wftest::halve", mutates_args=())
def halve(x: torch.Tensor) -> torch.Tensor:
    return x / 2


@halve.register_fake
def _halve_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class CustomOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return halve(twice(twice(self.lin(x))))


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.lin(x)
        raise ValueError("bad shapes in inner\nsecond line of detail")


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        return y if y.sum() > 0 else -y


def test_unknown_ops_warn_once_each_and_trace_as_opaque() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = trace(CustomOps(), (torch.randn(3, 8),))
    unknown = [str(w.message) for w in caught if issubclass(w.category, UnknownOpWarning)]
    assert len(unknown) == 2
    assert "wftest.twice.default" in unknown[0] and "wftest.halve.default" in unknown[1]
    verify_graph(g)
    opaque = [op for op in g.ops if op.kind == K.OPAQUE]
    assert [op.prov.aten for op in opaque] == [
        "wftest.twice.default",
        "wftest.twice.default",
        "wftest.halve.default",
    ]
    assert all(op.cost.flops == 3 * 8 and op.cost.bytes_read == 3 * 8 * 4 for op in opaque)


def test_model_that_raises_names_module_and_cause() -> None:
    with pytest.raises(TraceError) as info:
        trace(Outer(), (torch.randn(2, 4),), mode="train")
    msg = str(info.value)
    assert "in module 'block'" in msg
    assert "ValueError: bad shapes in inner." in msg
    assert "second line" not in msg and "\n" not in msg
    assert "--mode infer" in msg


def test_data_dependent_control_flow_is_explained() -> None:
    with pytest.raises(TraceError, match="data-dependent control flow"):
        trace(Branchy(), (torch.randn(2, 4),))
    # the forward branches the same way in inference: no hint to try it
    with pytest.raises(TraceError, match="data-dependent control flow") as info:
        trace(Branchy(), (torch.randn(2, 4),), mode="train")
    assert "--mode infer" not in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"mode": "eval"}, ConfigError, "unknown mode 'eval'; choose one of 'infer', 'train'"),
        ({"mode": "train", "optimizer": "lion"}, ConfigError, "unknown optimizer 'lion'"),
        ({"mode": "train", "loss_fn": lambda out, x: out}, TraceError, "floating-point scalar"),
        ({"mode": "train", "loss_fn": lambda out, x: 3.0}, TraceError, "must return a tensor"),
        (
            {"mode": "train", "loss_fn": lambda out, x: x.sum()},
            TraceError,
            "does not depend on any trainable parameter",
        ),
    ],
)
def test_bad_options(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        trace(nn.Linear(4, 2), (torch.randn(3, 4),), **kwargs)


def test_bad_models() -> None:
    with pytest.raises(TraceError, match=r"needs a torch\.nn\.Module"):
        trace(lambda x: x, (torch.randn(2),))  # type: ignore[arg-type]
    with pytest.raises(TraceError, match="no parameter that requires grad"):
        trace(nn.ReLU(), (torch.randn(2),), mode="train")


def test_real_weights_are_left_untouched() -> None:
    model = nn.Sequential(nn.Linear(8, 4), nn.Dropout(0.5), nn.ReLU())
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    g = trace(model, (torch.randn(5, 8),), mode="infer")
    verify_graph(g)
    assert model.training and all(m.training for m in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.device.type == "cpu" and p.grad is None for p in model.parameters())
    assert not any(op.kind == K.DROPOUT for op in g.ops)  # eval mode for inference
    assert [op.attrs.get("name") for op in g.sources(K.PARAM)] == ["0.weight", "0.bias"]
    model.eval()
    g = trace(model, torch.randn(5, 8), mode="train")
    assert not model.training
    assert any(op.kind == K.DROPOUT for op in g.ops)  # train mode for the step


def test_frozen_parameters_get_no_update_and_multiple_outputs_are_named() -> None:
    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.head = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            h = self.body(x)
            return {"feat": h, "logits": self.head(h)}

    model = TwoHeads()
    model.body.requires_grad_(False)
    infer = trace(model, (torch.randn(3, 4),))
    assert [v.name for v in infer.outputs] == ["feat", "logits"]
    train = trace(model, (torch.randn(3, 4),), mode="train", loss_fn=lambda out, x: out["logits"].sum())  # fmt: skip
    assert [v.name for v in train.outputs] == ["loss", "head.weight.new", "head.bias.new"]
    updated = {op.prov.module for op in train.ops if op.phase == Phase.OPT}
    assert updated == {"head"}


def test_bf16_model_and_casts() -> None:
    class Mixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4).to(torch.bfloat16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x.to(torch.bfloat16)).float()

    g = trace(Mixed(), (torch.randn(2, 4),))
    verify_graph(g)
    casts = [op for op in g.ops if op.kind == K.CAST]
    assert [op.attrs.get("dtype") for op in casts] == ["bf16", "f32"]
    assert str(g.sources(K.PARAM)[0].result.type) == "bf16[4,4]"


def test_tensor_constants_become_constant_ops() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.scale = torch.arange(4.0)  # a plain attribute, not a buffer

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * self.scale

    g = trace(Scaled(), (torch.randn(2, 4),))
    verify_graph(g)
    (const,) = g.sources(K.CONSTANT)
    assert str(const.result.type) == "f32[4]"
    (mul,) = [op for op in g.ops if op.kind == K.MUL]
    assert mul.operands[1] is const.result


def test_inputs_on_another_device_follow_the_model() -> None:
    meta_input = torch.empty(3, 4, device="meta")
    g = trace(nn.Linear(4, 2), (meta_input,))  # real CPU weights, a meta input
    assert str(g.outputs[0].type) == "f32[3,2]"
    with torch.device("meta"):
        model = nn.Linear(4, 2)
    g = trace(model, (torch.randn(3, 4),), mode="train")  # meta weights, a real input
    assert g.outputs[0].name == "loss"

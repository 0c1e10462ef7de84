"""Every zoo model at tiny size traces in both modes into a graph that verifies;
``load_model`` specs, sizes and its errors."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from waferflow.errors import ConfigError, TraceError
from waferflow.frontend import ModelBundle, list_models, load_model, trace
from waferflow.ir import OpKind, Phase, print_graph
from waferflow.ir.parser import parse_graph
from waferflow.ir.verifier import verify_graph

K = OpKind
TINY = ("hf:gpt2-tiny", "hf:llama-tiny", "hf:bert-tiny", "hf:vit-tiny", "cnn:amcoda", "cnn:resnet-tiny")  # fmt: skip


def test_list_models_names_every_spec() -> None:
    specs = [spec for spec, _ in list_models()]
    for spec in (*TINY, "hf:gpt2", "hf:gpt2-medium", "hf:llama-7b", "hf:bert-base", "hf:vit-base"):
        assert spec in specs
    assert all(desc for _, desc in list_models())


@pytest.mark.parametrize("spec", TINY)
def test_tiny_models_trace_in_both_modes(spec: str) -> None:
    bundle = load_model(spec, batch=2)
    assert isinstance(bundle, ModelBundle)
    assert all(x.device.type == "meta" for x in bundle.example_inputs)
    assert all(p.device.type == "meta" for p in bundle.module.parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # llama's rotary cos/sin are opaque
        infer = trace(bundle.module, bundle.example_inputs, mode="infer", name=spec)
        train = trace(
            bundle.module, bundle.example_inputs, mode="train", loss_fn=bundle.loss_fn, name=spec
        )
    for g in (infer, train):
        verify_graph(g)
        assert print_graph(parse_graph(print_graph(g))) == print_graph(g)
    assert {op.phase for op in infer.ops} == {Phase.FWD}
    assert {op.phase for op in train.ops} == {Phase.FWD, Phase.BWD, Phase.OPT}
    n_params = len(train.sources(K.PARAM))
    assert len(train.outputs) == 1 + n_params  # the loss, then every updated parameter
    assert infer.outputs[0].type.shape[0] == 2  # batch first


def test_default_sizes_and_overrides() -> None:
    (ids,) = load_model("hf:gpt2-tiny").example_inputs
    assert ids.shape == (8, 32) and ids.dtype == torch.long
    (ids,) = load_model("hf:gpt2-tiny", batch=3, seq=16).example_inputs
    assert ids.shape == (3, 16)
    (x,) = load_model("cnn:amcoda").example_inputs
    assert x.shape == (32, 16, 56, 56)
    (img,) = load_model("hf:vit-tiny", batch=5).example_inputs
    assert img.shape == (5, 3, 32, 32)


def test_large_configs_have_the_published_shapes() -> None:
    llama = load_model("hf:llama-7b")
    n = sum(p.numel() for p in llama.module.parameters())
    assert 6.7e9 < n < 6.8e9
    assert llama.example_inputs[0].shape == (1, 2048)
    gpt2 = load_model("hf:gpt2")
    assert sum(p.numel() for p in gpt2.module.parameters()) == 124_439_808
    assert gpt2.example_inputs[0].shape == (8, 1024)


@pytest.mark.parametrize(
    ("spec", "params", "seq"),
    [
        ("hf:llama-13b", 13_015_864_320, 2048),  # LLaMA 13B
        ("hf:llama-70b", 68_976_648_192, 4096),  # Llama 2 70B (grouped-query attention)
        ("hf:gpt3-175b", 174_604_259_328, 2048),  # GPT-3 175B's shape, dense attention
    ],
)
def test_big_models_by_name_have_the_published_sizes(spec: str, params: int, seq: int) -> None:
    bundle = load_model(spec)  # on meta: nothing is allocated
    assert sum(p.numel() for p in bundle.module.parameters()) == params
    assert all(p.device.type == "meta" for p in bundle.module.parameters())
    assert bundle.example_inputs[0].shape == (1, seq)


@pytest.mark.parametrize(
    ("spec", "kwargs", "error", "match"),
    [
        ("hf:gpt3", {}, TraceError, "hf:gpt2"),
        ("cnn:lenet", {}, TraceError, "cnn:amcoda"),
        ("gpt2", {}, TraceError, "path/to/file.py:factory"),
        ("hf:vit-tiny", {"seq": 8}, ConfigError, "image model"),
        ("cnn:amcoda", {"seq": 8}, ConfigError, "image model"),
        ("hf:gpt2-tiny", {"seq": 4096}, ConfigError, "128 positions"),
        ("hf:gpt2-tiny", {"batch": 0}, ConfigError, "batch must be a positive integer"),
    ],
)
def test_bad_specs(spec: str, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        load_model(spec, **kwargs)


# -- models from files ------------------------------------------------------------------

MODEL_FILE = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, 2)

    def forward(self, x):
        return self.fc(x)

def make(batch=4):
    return Net(8), (torch.randn(batch, 8),)

def bare():
    return Net(8)

def example_inputs(batch=4):
    return torch.randn(batch, 8)

def broken():
    raise RuntimeError("cannot build")

def needs_two(a, b):
    return Net(8)

def not_a_model():
    return 42

def fixed():
    return Net(8), (torch.randn(4, 8),)

HELPER_CONSTANT = 3
"""


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "mymodel.py"
    path.write_text(textwrap.dedent(MODEL_FILE))
    return path


def test_file_factory_returning_module_and_inputs(model_file: Path) -> None:
    bundle = load_model(f"{model_file}:make", batch=6)
    assert bundle.name == f"{model_file}:make"
    (x,) = bundle.example_inputs
    assert x.device.type == "meta" and x.shape == (6, 8)
    assert next(bundle.module.parameters()).device.type == "meta"  # built under meta
    g = trace(bundle.module, bundle.example_inputs, mode="train", loss_fn=bundle.loss_fn)
    verify_graph(g)
    assert [op.attrs.get("name") for op in g.sources(K.PARAM)] == ["fc.weight", "fc.bias"]


def test_file_factory_bare_module_uses_example_inputs(model_file: Path) -> None:
    bundle = load_model(f"{model_file}:bare", batch=3)
    assert bundle.example_inputs[0].shape == (3, 8)


def test_file_errors(model_file: Path, tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"does not exist"):
        load_model(f"{tmp_path / 'nope.py'}:make")
    with pytest.raises(TraceError, match=r"no callable 'missing'.*bare, broken, example_inputs, fixed, make, needs_two, not_a_model"):  # fmt: skip
        load_model(f"{model_file}:missing")
    with pytest.raises(TraceError, match=r"mymodel.py:broken failed: RuntimeError: cannot build"):
        load_model(f"{model_file}:broken")
    with pytest.raises(TraceError, match=r"returned int"):
        load_model(f"{model_file}:not_a_model")
    with pytest.raises(ConfigError, match=r"mymodel.py:fixed takes no 'batch' argument"):
        load_model(f"{model_file}:fixed", batch=2)
    with pytest.raises(TraceError, match=r"needs_two failed: TypeError: .*missing 2 required"):
        load_model(f"{model_file}:needs_two")
    syntax = tmp_path / "bad.py"
    syntax.write_text("def f(:\n")
    with pytest.raises(TraceError, match=r"importing .*bad.py.* failed: SyntaxError"):
        load_model(f"{syntax}:f")
    lonely = tmp_path / "lonely.py"
    lonely.write_text("from torch import nn\ndef make():\n    return nn.Linear(2, 2)\n")
    with pytest.raises(TraceError, match=r"defines no example_inputs"):
        load_model(f"{lonely}:make")


def test_dtype_casts_parameters_and_floating_inputs_only() -> None:
    from waferflow.ir.dtypes import DType

    text = load_model("hf:gpt2-tiny", dtype="bf16")
    assert all(p.dtype is torch.bfloat16 for p in text.module.parameters())
    assert text.example_inputs[0].dtype is torch.long  # token ids stay integers
    g = trace(text.module, text.example_inputs, mode="train", loss_fn=text.loss_fn)
    params = [op for op in g.ops if op.kind is K.PARAM]
    assert params and all(op.results[0].type.dtype is DType.BF16 for op in params)
    b = load_model("hf:gpt2-tiny")
    f32 = trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn)
    assert g.total_cost().flops == f32.total_cost().flops  # the same work, fewer bytes
    assert g.total_cost().bytes_read < f32.total_cost().bytes_read
    image = load_model("cnn:amcoda", batch=2, dtype="f16")
    assert image.example_inputs[0].dtype is torch.float16
    with pytest.raises(ConfigError, match="dtype 'int8': use one of f32, bf16, f16"):
        load_model("hf:gpt2-tiny", dtype="int8")

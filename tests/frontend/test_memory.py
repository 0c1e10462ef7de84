"""Tracing on meta / fake tensors allocates no parameter memory: LLaMA-7B's 27 GB
of fp32 weights would not even fit this machine."""

from __future__ import annotations

import resource
import warnings

import pytest
import torch

from waferflow.frontend import load_model, trace
from waferflow.ir import OpKind

psutil = pytest.importorskip("psutil")
pytest.importorskip("transformers")

GB = 1 << 30


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def test_llama_7b_traces_without_allocating_its_weights() -> None:
    proc = psutil.Process()
    rss_before = proc.memory_info().rss
    peak_before = _peak_rss()
    bundle = load_model("hf:llama-7b", batch=1, seq=128)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rotary cos/sin are opaque
        g = trace(bundle.module, bundle.example_inputs, mode="infer", loss_fn=bundle.loss_fn)
    param_bytes = sum(op.result.type.nbytes for op in g.sources(OpKind.PARAM))
    assert param_bytes > 25 * GB  # the graph describes the full model...
    assert proc.memory_info().rss - rss_before < 1 * GB  # ...that never lived in memory
    assert _peak_rss() - peak_before < 1 * GB
    assert g.outputs[0].type.shape == (1, 128, 32000)


def test_real_weights_are_not_copied_and_adamw_state_is_not_allocated() -> None:
    from torch import nn

    model = nn.Linear(4096, 4096)  # 64 MiB of real fp32 weights
    x = torch.randn(2, 4096)
    proc = psutil.Process()
    rss_before = proc.memory_info().rss
    peak_before = _peak_rss()
    g = trace(model, (x,), mode="train", optimizer="adamw")
    # a copy of the weight plus AdamW's m and v would be 192 MiB
    assert proc.memory_info().rss - rss_before < 48 * (1 << 20)
    assert _peak_rss() - peak_before < 48 * (1 << 20)
    assert [op.attrs.get("name") for op in g.sources(OpKind.BUFFER)] == [
        "adamw.m.weight",
        "adamw.m.bias",
        "adamw.v.weight",
        "adamw.v.bias",
    ]

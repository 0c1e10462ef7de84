"""A traced tiny GPT-2 training step, shared by the placement tests (traced once)."""

from __future__ import annotations

import pytest

from waferflow.ir.graph import Graph


@pytest.fixture(scope="session")
def gpt2_tiny() -> Graph:
    from waferflow.frontend import load_model, trace

    b = load_model("hf:gpt2-tiny", batch=8, seq=32)
    return trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn, name=b.name)

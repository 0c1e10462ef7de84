"""Traced tiny models, shared by the parallel tests (traced once per session)."""

from __future__ import annotations

import pytest

from waferflow.ir.graph import Graph


def _trace(spec: str, **sizes: int) -> Graph:
    from waferflow.frontend import load_model, trace

    b = load_model(spec, **sizes)
    return trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn, name=b.name)


@pytest.fixture(scope="session")
def gpt2_tiny() -> Graph:
    return _trace("hf:gpt2-tiny", batch=8, seq=32)


@pytest.fixture(scope="session")
def llama_tiny() -> Graph:
    return _trace("hf:llama-tiny", batch=4, seq=32)


@pytest.fixture(scope="session")
def amcoda_cnn() -> Graph:
    return _trace("cnn:amcoda")

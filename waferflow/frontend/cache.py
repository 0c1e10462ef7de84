"""Zoo models traced once per process: ``trace_model``.

A sweep or a notebook compiles the same model many times (other wafers, plans, pass
pipelines); tracing it is the slow part of the front end (seconds for GPT-2, more for
the large configs). Graphs of ``hf:`` and ``cnn:`` models, whose configs live in code,
are kept by everything that shapes the trace: (spec, mode, optimizer, batch, seq,
dtype, name, moe_skew). Each call hands out a copy, since passes rewrite graphs in place. Models
from files (``path.py:factory``) are traced every time: the file may have changed.
"""

from __future__ import annotations

from waferflow.frontend.tracer import trace
from waferflow.frontend.zoo import load_model
from waferflow.ir.graph import Graph

_Key = tuple[str, str, str, int | None, int | None, str | None, str | None, float]
_TRACED: dict[_Key, Graph] = {}
CACHE_SIZE = 8  # graphs kept (the oldest is dropped first)


def trace_model(
    spec: str,
    *,
    mode: str = "infer",
    optimizer: str = "sgd",
    batch: int | None = None,
    seq: int | None = None,
    dtype: str | None = None,
    name: str | None = None,
    moe_skew: float = 1.0,
) -> Graph:
    """``trace(load_model(spec, ...))`` with the bundle's loss; cached for zoo models."""
    key = (spec, mode, optimizer, batch, seq, dtype, name, moe_skew)
    cached = _TRACED.get(key)
    if cached is not None:
        return cached.clone()
    bundle = load_model(spec, batch=batch, seq=seq, dtype=dtype)
    graph = trace(
        bundle.module,
        bundle.example_inputs,
        mode=mode,
        optimizer=optimizer,
        loss_fn=bundle.loss_fn,
        name=name or bundle.name,
        moe_skew=moe_skew,
    )
    if spec.partition(":")[0] in ("hf", "cnn"):
        if len(_TRACED) >= CACHE_SIZE:
            del _TRACED[next(iter(_TRACED))]
        _TRACED[key] = graph.clone()
    return graph


def clear_trace_cache() -> None:
    """Forget every cached graph."""
    _TRACED.clear()


__all__ = ["CACHE_SIZE", "clear_trace_cache", "trace_model"]

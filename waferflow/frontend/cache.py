"""Zoo models traced once: ``trace_model``.

A sweep or a notebook compiles the same model many times (other wafers, plans, pass
pipelines); tracing it is the slow part of the front end (seconds for GPT-2, more for
the large configs). Graphs of ``hf:`` and ``cnn:`` models, whose configs live in code,
are kept by everything that shapes the trace: (spec, mode, optimizer, batch, seq,
dtype, name, moe_skew). They are kept in this process (``CACHE_SIZE`` graphs; each call
hands out a copy, since passes rewrite graphs in place) and on disk for the next
process (``disk_cache``: a hit there imports neither torch nor transformers). Models
from files (``path.py:factory``) are traced every time: the file may have changed.
"""

from __future__ import annotations

from waferflow.frontend import disk_cache
from waferflow.frontend.catalog import canonical_model
from waferflow.frontend.disk_cache import TraceKey
from waferflow.frontend.options import check_dtype, check_name, check_size, check_trace_options
from waferflow.ir.graph import Graph

_TRACED: dict[TraceKey, Graph] = {}
CACHE_SIZE = 8  # graphs kept in this process (the oldest is dropped first)


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
    spec = canonical_model(spec)  # HF:GPT2 is hf:gpt2; a typo fails here, without torch
    # an option the trace would ignore is refused before any cache entry answers for it
    check_trace_options(spec, mode=mode, optimizer=optimizer, moe_skew=moe_skew)
    # and before the key is made: batch=8.0 (equal to 8) was answered from the cache,
    # and a torch dtype failed to serialise for the disk cache
    check_size("batch", batch)
    check_size("seq", seq)
    check_dtype(dtype)
    check_name(name)
    key = TraceKey(spec, mode, optimizer, batch, seq, dtype, name, moe_skew)
    zoo = spec.partition(":")[0] in ("hf", "cnn")
    cached = _TRACED.get(key) if zoo else None
    if cached is None and zoo:
        cached = disk_cache.load(key)
        if cached is not None:
            _remember(key, cached)
    if cached is not None:
        return cached.clone()
    # torch only now: a cache hit never imports it
    from waferflow.frontend.tracer import trace
    from waferflow.frontend.zoo import load_model

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
    if zoo:
        _remember(key, graph.clone())
        disk_cache.store(key, graph)
    return graph


def _remember(key: TraceKey, graph: Graph) -> None:
    if len(_TRACED) >= CACHE_SIZE:
        del _TRACED[next(iter(_TRACED))]
    _TRACED[key] = graph


def clear_trace_cache() -> None:
    """Forget every graph kept in this process (the disk cache stays: see
    ``disk_cache``; ``WAFERFLOW_CACHE_DIR=off`` bypasses it)."""
    _TRACED.clear()


__all__ = ["CACHE_SIZE", "clear_trace_cache", "trace_model"]

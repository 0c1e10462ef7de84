"""nn.Module -> waferflow IR. The only package that imports torch.

- ``trace(model, example_inputs, mode=..., optimizer=..., loss_fn=..., name=...)``
  turns a module into an IR ``Graph``: inference, or a whole training step
  (forward, loss, backward, optimizer update), traced on fake tensors.
- ``load_model(spec, batch=..., seq=...)`` builds a zoo model (``hf:gpt2``,
  ``hf:llama-7b``, ``cnn:amcoda``, ..., or ``path/to/file.py:factory``) as a
  ``ModelBundle`` on the meta device; ``list_models()`` names them.
- ``trace_model(spec, mode=..., batch=..., ...)`` loads and traces a zoo model, once
  per process for ``hf:`` / ``cnn:`` models (each call gets its own copy).
- ``UnknownOpWarning`` is issued once per ATen op without an op kind.

Modules: ``tracer`` (trace), ``scopes`` (phase and module tags), ``convert`` (fx ->
IR), ``optable`` (ATen -> OpKind), ``cost`` (FLOPs and bytes), ``optim`` (the
traced updates), ``zoo`` / ``zoo_hf`` / ``zoo_cnn`` (the models), ``catalog`` (the
zoo's names and parameter counts, without torch).

The names below are imported on first use: ``waferflow models`` and the checks of a
model name (``catalog``) run without importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "UnknownOpWarning": "waferflow.frontend.convert",
    "trace": "waferflow.frontend.tracer",
    "ModelBundle": "waferflow.frontend.zoo",
    "load_model": "waferflow.frontend.zoo",
    "list_models": "waferflow.frontend.catalog",
    "trace_model": "waferflow.frontend.cache",
    "clear_trace_cache": "waferflow.frontend.cache",
}

if TYPE_CHECKING:
    from waferflow.frontend.cache import clear_trace_cache, trace_model
    from waferflow.frontend.catalog import list_models
    from waferflow.frontend.convert import UnknownOpWarning
    from waferflow.frontend.tracer import trace
    from waferflow.frontend.zoo import ModelBundle, load_model


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'waferflow.frontend' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ModelBundle",
    "UnknownOpWarning",
    "clear_trace_cache",
    "list_models",
    "load_model",
    "trace",
    "trace_model",
]

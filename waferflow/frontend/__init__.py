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
traced updates), ``zoo`` / ``zoo_hf`` / ``zoo_cnn`` (the models).
"""

from waferflow.frontend.cache import clear_trace_cache, trace_model
from waferflow.frontend.convert import UnknownOpWarning
from waferflow.frontend.tracer import trace
from waferflow.frontend.zoo import ModelBundle, list_models, load_model

__all__ = [
    "ModelBundle",
    "UnknownOpWarning",
    "clear_trace_cache",
    "list_models",
    "load_model",
    "trace",
    "trace_model",
]

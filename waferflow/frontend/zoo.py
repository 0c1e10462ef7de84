"""Models by name, built on the meta device without downloading anything.

Specs:

- ``hf:<name>``: a Hugging Face transformer from a config in code (``zoo_hf``):
  gpt2, gpt2-medium, gpt2-tiny, gpt3-175b, gpt3-4l, t17b-4l, llama-7b, llama-13b,
  llama-70b, llama-tiny, mixtral-8x7b, mixtral-tiny, bert-base, bert-tiny, vit-base,
  vit-tiny.
- ``cnn:amcoda`` (the AMCoDA seed CNN), ``cnn:amcoda4`` (a 4-conv CNN for the seed
  machine) and ``cnn:resnet-tiny`` (``zoo_cnn``).
- ``path/to/file.py:factory``: the file is imported by path and ``factory``
  called under ``torch.device("meta")`` (with ``batch=`` / ``seq=`` if given and
  if it takes them). It returns a ``ModelBundle``; or ``(module, example_inputs)``
  or ``(module, example_inputs, loss_fn)``; or a bare module, in which case the
  file must define ``example_inputs(...)`` (called the same way). A file-level
  ``loss_fn(output, *inputs)`` is used when the factory gives none; otherwise the
  loss is the mean of the first floating output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from waferflow.errors import ConfigError, TraceError, WaferflowError
from waferflow.frontend import zoo_cnn, zoo_hf
from waferflow.frontend.catalog import CNNS, SPECS, canonical_model
from waferflow.frontend.options import check_dtype, check_size
from waferflow.frontend.tracer import default_loss

LossFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class ModelBundle:
    """A model ready to trace: the module (parameters on meta), example inputs
    (meta tensors), the training loss ``loss_fn(output, *inputs)``, a description."""

    name: str
    module: nn.Module
    example_inputs: tuple[Any, ...]
    loss_fn: LossFn
    description: str


# the CNN zoo's modules (names, sizes and descriptions: ``catalog.CNNS``)
_CNN_FACTORIES: dict[str, Callable[[], nn.Module]] = {
    "amcoda": zoo_cnn.AmcodaCNN,
    "amcoda4": zoo_cnn.AmcodaCNN4,
    "resnet-tiny": zoo_cnn.ResNetTiny,
}


DTYPES: dict[str, torch.dtype] = {"f32": torch.float32, "bf16": torch.bfloat16,
                                  "f16": torch.float16}  # fmt: skip


def load_model(
    spec: str, *, batch: int | None = None, seq: int | None = None, dtype: str | None = None
) -> ModelBundle:
    """Build the model ``spec`` names (see the module docstring) on the meta device;
    ``dtype`` (``f32``, ``bf16``, ``f16``) casts its parameters and floating inputs."""
    check_size("batch", batch)
    check_size("seq", seq)
    check_dtype(dtype)  # the names of DTYPES
    spec = canonical_model(spec)  # case-insensitive; a TraceError with a did-you-mean
    prefix, _, rest = spec.partition(":")
    if prefix == "hf" and rest:
        bundle = _load_hf(spec, rest, batch, seq)
    elif prefix == "cnn" and rest:
        bundle = _load_cnn(spec, rest, batch, seq)
    else:
        path, _, factory = spec.rpartition(":")
        bundle = _load_file(Path(path), factory, batch, seq)
    return bundle if dtype is None else _cast(bundle, DTYPES[dtype])


def _cast(bundle: ModelBundle, dtype: torch.dtype) -> ModelBundle:
    """Parameters, buffers and floating inputs in ``dtype`` (integer inputs stay)."""
    bundle.module.to(dtype)
    inputs = tuple(
        x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
        for x in bundle.example_inputs
    )
    return dataclasses.replace(bundle, example_inputs=inputs)


def _unknown(spec: str, table: dict[str, Any], prefix: str) -> TraceError:
    known = ", ".join(f"{prefix}:{k}" for k in table)
    return TraceError(f"unknown model {spec!r}; the {prefix}: models are {known}")


def _load_hf(spec: str, key: str, batch: int | None, seq: int | None) -> ModelBundle:
    entry = SPECS.get(key)
    if entry is None:
        raise _unknown(spec, SPECS, "hf")
    if entry.seq is None and seq is not None:
        raise ConfigError(f"{spec} is an image model; it takes no seq (got seq={seq})")
    model, config = zoo_hf.build(entry)
    b = batch or entry.batch
    s = seq or entry.seq
    limit = zoo_hf.max_seq(entry, config)
    if s is not None and limit is not None and s > limit:
        raise ConfigError(f"seq={s} exceeds the {limit} positions that {spec} supports")
    inputs = zoo_hf.example_inputs(entry, config, b, s)
    return ModelBundle(spec, model, inputs, zoo_hf.LOSSES[entry.family], entry.description)


def _load_cnn(spec: str, key: str, batch: int | None, seq: int | None) -> ModelBundle:
    entry = CNNS.get(key)
    if entry is None:
        raise _unknown(spec, CNNS, "cnn")
    if seq is not None:
        raise ConfigError(f"{spec} is an image model; it takes no seq (got seq={seq})")
    with torch.device("meta"):
        model = _CNN_FACTORIES[key]()
    x = torch.empty(batch or entry.batch, *entry.input_shape, device="meta")
    return ModelBundle(spec, model, (x,), zoo_cnn.classification_loss, entry.description)


# -- models from a Python file ------------------------------------------------------------


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise TraceError(f"model file {str(path)!r} does not exist")
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    mod_name = f"waferflow_user_{resolved.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, resolved)
    if spec is None or spec.loader is None:
        raise TraceError(f"cannot import model file {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    # registered so that dataclasses and pickling inside the file can find it
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        del sys.modules[mod_name]
        raise TraceError(
            f"importing {str(path)!r} called sys.exit({exc.code!r}); a model file defines "
            'its factory: put script code under `if __name__ == "__main__":`'
        ) from None
    except Exception as exc:
        del sys.modules[mod_name]
        raise TraceError(f"importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _own_callables(module: ModuleType) -> list[str]:
    return sorted(
        name
        for name, obj in vars(module).items()
        if callable(obj)
        and not name.startswith("_")
        and getattr(obj, "__module__", None) == module.__name__
    )


def _sizes(batch: int | None, seq: int | None) -> dict[str, int]:
    return {k: v for k, v in (("batch", batch), ("seq", seq)) if v is not None}


def _accepted(fn: Callable[..., Any], sizes: dict[str, int]) -> dict[str, int]:
    """The sizes ``fn`` takes as keyword arguments (none when its signature cannot be
    read, e.g. a C extension's function)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(sizes)
    return {k: v for k, v in sizes.items() if k in params}


def _refuse_unused(where: str, sizes: dict[str, int], used: dict[str, int]) -> None:
    for key in sizes:
        if key not in used:
            raise ConfigError(f"{where} takes no {key!r} argument, so {key}= cannot be set")


def _call_meta(fn: Callable[..., Any], kwargs: dict[str, int], where: str) -> Any:
    """``fn(**kwargs)`` on the meta device; its failure (or ``sys.exit``) is a
    ``TraceError`` naming ``where``."""
    try:
        with torch.device("meta"):
            return fn(**kwargs)
    except SystemExit as exc:
        raise TraceError(f"{where} called sys.exit({exc.code!r}); it must return") from None
    except WaferflowError:
        raise
    except Exception as exc:
        raise TraceError(f"{where} failed: {type(exc).__name__}: {exc}") from exc


def _to_meta(inputs: Any) -> tuple[Any, ...]:
    items = inputs if isinstance(inputs, tuple | list) else (inputs,)
    return tuple(x.detach().to("meta") if isinstance(x, torch.Tensor) else x for x in items)


def _load_file(path: Path, factory_name: str, batch: int | None, seq: int | None) -> ModelBundle:
    module = _import_file(path)
    factory = getattr(module, factory_name, None) if factory_name else None
    if not callable(factory) or inspect.isbuiltin(factory):
        defined = ", ".join(_own_callables(module)) or "none"
        what = (
            f": {factory_name!r} is the Python builtin {factory.__name__}, not a model factory"
            if callable(factory)
            else f" defines no callable {factory_name!r}"
        )
        raise TraceError(f"{str(path)!r}{what}; callables it defines: {defined}")
    where = f"{path}:{factory_name}"
    sizes = _sizes(batch, seq)
    used = _accepted(factory, sizes)
    made = _call_meta(factory, used, where)
    file_loss = getattr(module, "loss_fn", None)
    loss: LossFn = file_loss if callable(file_loss) else default_loss
    if isinstance(made, ModelBundle):
        _refuse_unused(where, sizes, used)
        return made
    if isinstance(made, nn.Module):
        make_inputs = getattr(module, "example_inputs", None)
        if not callable(make_inputs):
            raise TraceError(
                f"{where} returned a bare module and {str(path)!r} defines no "
                "example_inputs(); return (module, example_inputs) from the factory instead"
            )
        input_sizes = _accepted(make_inputs, sizes)
        _refuse_unused(f"{where} (with {path}:example_inputs)", sizes, used | input_sizes)
        inputs = _call_meta(make_inputs, input_sizes, f"{path}:example_inputs")
        return ModelBundle(where, made, _to_meta(inputs), loss, f"{type(made).__name__} from {path}")  # fmt: skip
    if isinstance(made, tuple) and len(made) in (2, 3) and isinstance(made[0], nn.Module):
        _refuse_unused(where, sizes, used)
        if len(made) == 3:
            if not callable(made[2]):
                raise TraceError(f"{where} returned a loss_fn that is not callable")
            loss = made[2]
        desc = f"{type(made[0]).__name__} from {path}"
        return ModelBundle(where, made[0], _to_meta(made[1]), loss, desc)
    raise TraceError(
        f"{where} returned {type(made).__name__}; return an nn.Module, "
        "(module, example_inputs), (module, example_inputs, loss_fn) or a ModelBundle"
    )

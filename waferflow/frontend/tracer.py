"""``trace``: an ``nn.Module`` and example inputs -> a waferflow IR ``Graph``.

How it traces
-------------
Both modes use ``make_fx(tracing_mode="fake")`` over a function of flat tensors
(parameters, buffers, optimizer state, inputs) that runs the model through
``torch.func.functional_call``. This gives one uniform ATen-level graph for plain
modules and Hugging Face models alike, and for training the whole step (forward,
loss, ``torch.autograd.grad``, optimizer update) as one graph.

No parameter memory is ever allocated: parameters, buffers, optimizer state and
inputs enter the trace as fake tensors (``FakeTensorMode``: shapes, dtypes and
devices, no data). Faking a tensor copies nothing, so a user's module with real
weights costs no more memory than a zoo model built on the ``meta`` device, and
the user's module is left untouched. The trace runs on the model's own device
(usually ``meta`` or ``cpu``) so that tensor constants captured from Python stay
on the same device; inputs on another device get a fake twin on the model's.
Fake rather than bare meta tensors also because fake mode reports data-dependent
control flow as an error instead of guessing.

Phases come from ``torch.fx.traceback.annotate`` around each stage; module paths
from forward hooks (and autograd-node hooks for the backward), see ``scopes``.
Sources: parameters are PARAM, buffers BUFFER, optimizer state BUFFER (named
``adamw.m.<param>``), tensor inputs INPUT (named after ``forward``'s arguments).
Outputs: infer mode returns the model's output tensors (named after their place
in the output, e.g. ``logits``); train mode returns the loss, then each updated
parameter (``<param>.new``), then the new optimizer state.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

import torch
import torch.fx.traceback as fx_traceback
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils import _pytree as pytree

from waferflow.errors import ConfigError, TraceError, WaferflowError
from waferflow.frontend.convert import OutputSpec, SourceSpec, convert
from waferflow.frontend.moe import count_experts, static_experts
from waferflow.frontend.optim import (
    AdamWConfig,
    Optimizer,
    SGDConfig,
    adamw_update,
    sgd_update,
    state_name,
)
from waferflow.frontend.options import (
    check_loss_fn,
    check_moe_skew,
    check_name,
    check_not_class,
    check_optimizer,
)
from waferflow.frontend.scopes import ModuleScopes, module_scope, phase
from waferflow.ir.graph import Graph
from waferflow.ir.opkind import OpKind

LossFn = Callable[..., torch.Tensor]


class Mode(Enum):
    INFER = "infer"
    TRAIN = "train"


E = TypeVar("E", bound=Enum)


def _choice(enum: type[E], value: str | E, what: str) -> E:
    if isinstance(value, enum):
        return value
    try:
        return enum(value)
    except ValueError:
        known = ", ".join(repr(e.value) for e in enum)
        raise ConfigError(f"unknown {what} {value!r}; choose one of {known}") from None


@dataclass
class _Layout:
    """How the flat tensor list that make_fx sees splits into its parts."""

    params: list[str]
    buffers: list[str]
    state: list[tuple[str, str]]  # (slot, param)
    inputs: tuple[Any, ...]  # example inputs; tensors are replaced by placeholders
    tensor_positions: list[int]
    outputs: list[OutputSpec] = field(default_factory=list)

    def split(self, flat: Sequence[torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict[tuple[str, str], torch.Tensor], tuple[Any, ...]]:  # fmt: skip
        it = iter(flat)
        params = {n: next(it) for n in self.params}
        buffers = {n: next(it) for n in self.buffers}
        state = {k: next(it) for k in self.state}
        inputs = list(self.inputs)
        for pos in self.tensor_positions:
            inputs[pos] = next(it)
        return params, buffers, state, tuple(inputs)


def _differentiable(t: torch.Tensor) -> bool:
    """Whether autograd can give ``t`` a gradient: floating and complex dtypes."""
    return t.is_floating_point() or t.is_complex()


class _Fakes:
    """Fake tensors for one trace, made without copying or allocating any data."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.mode = FakeTensorMode(
            allow_non_fake_inputs=True, shape_env=ShapeEnv(), static_shapes=True
        )

    def of(self, t: torch.Tensor, requires_grad: bool = False) -> torch.Tensor:
        """A fake twin of ``t`` on the trace's device (metadata only, no data)."""
        if t.device != self.device:
            with self.mode:
                return torch.empty_strided(
                    t.shape, t.stride(), dtype=t.dtype, device=self.device
                ).requires_grad_(requires_grad and _differentiable(t))
        src = t.detach()
        if _differentiable(src):
            src.requires_grad_(requires_grad)
        return self.mode.from_tensor(src)

    def like(self, t: torch.Tensor) -> torch.Tensor:
        with self.mode:
            return torch.empty_like(t)


def _home_device(model: nn.Module, inputs: Sequence[Any]) -> torch.device:
    """Where the trace runs: the device of the model's first tensor (else of the
    first input tensor, else meta). Inputs elsewhere get a fake twin there."""
    for t in (*model.parameters(), *model.buffers(), *inputs):
        if isinstance(t, torch.Tensor):
            return t.device
    return torch.device("meta")


def _input_names(model: nn.Module, count: int) -> list[str]:
    try:
        sig = inspect.signature(model.forward)
    except (TypeError, ValueError):
        sig = None
    names: list[str] = []
    if sig is not None:
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        names = [p.name for p in sig.parameters.values() if p.kind in kinds]
    return [names[i] if i < len(names) else f"input{i}" for i in range(count)]


def _path_name(path: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for key in path:
        if isinstance(key, pytree.MappingKey):
            parts.append(str(key.key))
        elif isinstance(key, pytree.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, pytree.GetAttrKey):
            parts.append(key.name)
        else:
            parts.append(str(key))
    return ".".join(parts) if parts else "out"


def default_loss(output: Any, *inputs: Any) -> torch.Tensor:
    """Mean of the first floating-point output tensor: every output element gets a gradient."""
    for leaf in pytree.tree_leaves(output):
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
            return leaf if leaf.dim() == 0 else leaf.mean()
    raise TraceError("the model returns no floating-point tensor to build a default loss from")


@contextmanager
def _module_mode(model: nn.Module, training: bool) -> Iterator[None]:
    """Switch the model to train()/eval() for the trace and restore every flag after."""
    saved = [(m, m.training) for m in model.modules()]
    model.train(training)
    try:
        yield
    finally:
        for m, flag in saved:
            m.training = flag


def _owner(param: str) -> str:
    return param.rsplit(".", 1)[0] if "." in param else ""


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _advice(exc: BaseException, train: bool) -> str:
    text = f"{type(exc).__name__} {exc}".lower()
    if "datadependent" in text.replace("_", "").replace(" ", "") or "data-dependent" in text:
        # not "try --mode infer": the forward pass branches the same way there
        return (
            "The model branches on tensor values (data-dependent control flow), which a "
            "trace cannot follow; make the branch static or use torch.cond."
        )
    head = "Check that torch.export.export(model, example_inputs) accepts the model; it traces with fake tensors the same way."  # fmt: skip
    return head + (" Try mode='infer' (--mode infer) to trace the forward pass alone." if train else "")  # fmt: skip


def _default_name(model: nn.Module, mode: Mode) -> str:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", type(model).__name__).lower()
    return f"{snake}_{mode.value}"


def trace(
    model: nn.Module,
    example_inputs: Any,
    *,
    mode: str | Mode = "infer",
    optimizer: str | Optimizer = "sgd",
    loss_fn: LossFn | None = None,
    name: str | None = None,
    moe_skew: float = 1.0,
) -> Graph:
    """Trace ``model`` called on ``example_inputs`` (a tuple of positional
    arguments, or one tensor) into an IR graph.

    ``mode="infer"`` traces the forward pass in eval mode; ``mode="train"`` traces
    a whole training step in train mode: forward, ``loss_fn(output, *inputs)``
    (default: the mean of the first floating output), the gradients of every
    parameter that requires grad, and an ``optimizer`` update ("sgd" or "adamw").
    Mixture-of-experts layers (Hugging Face experts modules, e.g. Mixtral's) run on a
    fixed capacity per expert under the load assumption ``moe_skew`` (1: uniform
    routing; s > 1: the busiest expert gets s times the mean), with routing as the
    typed ops ``moe_dispatch`` / ``moe_combine`` (``waferflow.frontend.moe``).
    Raises ``TraceError`` with a one-line cause if the model cannot be traced.
    """
    mode_ = _choice(Mode, mode, "mode")
    check_moe_skew(moe_skew, "", None)  # a number >= 1; the experts are counted below
    opt = _choice(Optimizer, optimizer, "optimizer")
    check_optimizer(mode_.value, opt.value)  # an optimizer would be ignored in inference
    check_loss_fn(loss_fn)
    check_name(name)
    check_not_class(model)
    if not isinstance(model, nn.Module):
        raise TraceError(f"trace() needs a torch.nn.Module, got {type(model).__name__}")
    train = mode_ is Mode.TRAIN
    inputs = tuple(example_inputs) if isinstance(example_inputs, tuple | list) else (example_inputs,)  # fmt: skip
    graph_name = name or _default_name(model, mode_)
    check_moe_skew(moe_skew, graph_name, count_experts(model))

    fakes = _Fakes(_home_device(model, inputs))
    params = {n: fakes.of(p, train and p.requires_grad) for n, p in model.named_parameters()}
    buffers = {n: fakes.of(b) for n, b in model.named_buffers()}
    trainable = [n for n, p in params.items() if p.requires_grad]
    if train and not trainable:
        raise TraceError(
            f"{graph_name}: the model has no parameter that requires grad, so there is "
            "no training step to trace; use mode='infer' (--mode infer)"
        )
    slots = opt.state_names if train else ()
    state = {(slot, n): fakes.like(params[n]) for slot in slots for n in trainable}
    positions = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    in_names = _input_names(model, len(inputs))
    layout = _Layout(list(params), list(buffers), list(state), inputs, positions)
    flat = [
        *params.values(),
        *buffers.values(),
        *state.values(),
        *(fakes.of(inputs[i]) for i in positions),
    ]
    sources = [
        *(SourceSpec(OpKind.PARAM, n) for n in params),
        *(SourceSpec(OpKind.BUFFER, n) for n in buffers),
        *(SourceSpec(OpKind.BUFFER, state_name(opt, slot, n)) for slot, n in state),
        *(SourceSpec(OpKind.INPUT, in_names[i]) for i in positions),
    ]

    with (
        fx_traceback.preserve_node_meta(),
        ModuleScopes(model) as scopes,
        _module_mode(model, train),
        static_experts(model, moe_skew),
    ):
        if train:
            step = _train_step(model, layout, scopes, opt, loss_fn or default_loss)
        else:
            step = _infer_step(model, layout)
        try:
            gm = make_fx(step, tracing_mode="fake", _allow_non_fake_inputs=True)(*flat)
        except WaferflowError:
            raise
        except SystemExit as exc:
            raise TraceError(
                f"could not trace {graph_name}: the model called sys.exit({exc.code!r}) "
                "while running; a model's forward (and loss_fn) must return, not exit"
            ) from None
        except Exception as exc:
            module = scopes.failed_module(exc)
            where = f" in module '{module}'" if module else ""
            raise TraceError(
                f"could not trace {graph_name} ({type(model).__name__}, {mode_.value} mode)"
                f"{where}: {_one_line(exc)}. {_advice(exc, train)}"
            ) from exc
    return convert(gm, graph_name, sources, layout.outputs)


def _forward(model: nn.Module, layout: _Layout, flat: Sequence[torch.Tensor]) -> tuple[Any, tuple[Any, ...], dict[str, torch.Tensor], dict[tuple[str, str], torch.Tensor]]:  # fmt: skip
    params, buffers, state, inputs = layout.split(flat)
    out = torch.func.functional_call(model, (params, buffers), inputs, strict=False)
    return out, inputs, params, state


def _infer_step(model: nn.Module, layout: _Layout) -> Callable[..., list[torch.Tensor]]:
    def step(*flat: torch.Tensor) -> list[torch.Tensor]:
        # parameters do not require grad here, so autograd records nothing; no_grad()
        # would only slow fake tensor dispatch down
        with phase("fwd"):
            out, _, _, _ = _forward(model, layout, flat)
        leaves = [
            (path, leaf)
            for path, leaf in pytree.tree_flatten_with_path(out)[0]
            if isinstance(leaf, torch.Tensor)
        ]
        if not leaves:
            raise TraceError("the model returned no tensor")
        layout.outputs = [OutputSpec(_path_name(path)) for path, _ in leaves]
        return [leaf for _, leaf in leaves]

    return step


def _train_step(
    model: nn.Module,
    layout: _Layout,
    scopes: ModuleScopes,
    opt: Optimizer,
    loss_fn: LossFn,
) -> Callable[..., list[torch.Tensor]]:
    def step(*flat: torch.Tensor) -> list[torch.Tensor]:
        with phase("fwd"):
            out, inputs, params, state = _forward(model, layout, flat)
            loss = loss_fn(out, *inputs)
        _check_loss(loss)
        scopes.tag_backward(loss)
        names = [n for n, p in params.items() if p.requires_grad]
        with phase("bwd"):
            grads = torch.autograd.grad(loss, [params[n] for n in names], allow_unused=True)
        has_grad = [(n, g) for n, g in zip(names, grads, strict=True) if g is not None]
        new_params: list[torch.Tensor] = []
        new_state: dict[tuple[str, str], torch.Tensor] = {}
        with phase("opt"):
            for n, g in has_grad:
                with module_scope(_owner(n)):
                    if opt is Optimizer.SGD:
                        new_params.append(sgd_update(params[n], g, SGDConfig()))
                    else:
                        p_new, m_new, v_new = adamw_update(
                            params[n], g, state[("m", n)], state[("v", n)], AdamWConfig()
                        )
                        new_params.append(p_new)
                        new_state[("m", n)] = m_new
                        new_state[("v", n)] = v_new
        state_keys = [(slot, n) for slot in opt.state_names for n, _ in has_grad]
        layout.outputs = [
            OutputSpec("loss"),
            *(OutputSpec(f"{n}.grad", is_output=False) for n, _ in has_grad),
            *(OutputSpec(f"{n}.new") for n, _ in has_grad),
            *(OutputSpec(f"{state_name(opt, s, n)}.new") for s, n in state_keys),
        ]
        return [
            loss,
            *(g for _, g in has_grad),
            *new_params,
            *(new_state[k] for k in state_keys),
        ]

    return step


def _check_loss(loss: Any) -> None:
    if not isinstance(loss, torch.Tensor):
        raise TraceError(f"loss_fn must return a tensor, got {type(loss).__name__}")
    if loss.numel() != 1 or not loss.is_floating_point():
        raise TraceError(
            f"loss_fn must return a floating-point scalar, got {loss.dtype} of shape "
            f"{tuple(loss.shape)}"
        )
    if not loss.requires_grad:
        raise TraceError(
            "the loss does not depend on any trainable parameter; check loss_fn, "
            "or trace with mode='infer'"
        )

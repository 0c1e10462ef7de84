"""fx GraphModule (ATen level, from make_fx) -> waferflow IR ``Graph``.

Placeholders become INPUT / PARAM / BUFFER ops named by ``sources``; ``get_attr``
tensors become CONSTANT ops. Every other node becomes one op whose kind comes
from ``optable``; a node with a tuple result becomes one op with several results
and the ``getitem`` nodes that pick them apart are resolved to those results (no
GETITEM ops). Non-tensor arguments become frozen attributes named after the
ATen schema's arguments. Phase and module path come from ``node.meta["custom"]``
("phase", "module"), which the tracer sets with ``torch.fx.traceback.annotate``.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from waferflow.errors import TraceError
from waferflow.frontend.cost import flop_formula, op_cost
from waferflow.frontend.optable import lookup
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, AttrValue, Graph, Phase, Provenance, Value
from waferflow.ir.opkind import OpKind

_DTYPES: dict[torch.dtype, DType] = {
    torch.float64: DType.F64,
    torch.float32: DType.F32,
    torch.float16: DType.F16,
    torch.bfloat16: DType.BF16,
    torch.int64: DType.I64,
    torch.int32: DType.I32,
    torch.int16: DType.I16,
    torch.int8: DType.I8,
    torch.uint8: DType.U8,
    torch.bool: DType.BOOL,
    torch.complex64: DType.C64,
}

# arguments that say nothing about the computation on a wafer
_IGNORED_ARG_TYPES = (torch.device, torch.layout, torch.memory_format)
_IGNORED_ARG_NAMES = frozenset({"device", "layout", "memory_format", "pin_memory", "non_blocking"})


class UnknownOpWarning(UserWarning):
    """An ATen op without an op kind; it was traced as ``opaque``."""


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """What a placeholder is: its kind (INPUT, PARAM or BUFFER) and its name."""

    kind: OpKind
    name: str


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """A returned fx value: a name hint for it and whether it is a graph output."""

    name: str | None
    is_output: bool = True


class _Skip:
    """Marker for arguments that do not become attributes."""


_SKIP = _Skip()


def dtype_of(dtype: torch.dtype) -> DType:
    try:
        return _DTYPES[dtype]
    except KeyError:
        known = ", ".join(str(d) for d in _DTYPES)
        raise TraceError(
            f"tensor dtype {dtype} is not supported by the waferflow IR; use one of {known}"
        ) from None


class DataDependentShape(TraceError):
    """A traced tensor whose shape depends on tensor values (``x[x > 0]``, ``nonzero``)."""


def _static_dim(d: Any) -> int | None:
    """A dimension as an int, or None when it is a symbol (data-dependent)."""
    if isinstance(d, torch.SymInt):
        return d.node.maybe_as_int()
    return int(d)


def tensor_type(val: Any) -> TensorType:
    """The IR type of a traced value (a fake tensor, or a Python scalar)."""
    if isinstance(val, torch.Tensor):
        dims = [_static_dim(d) for d in val.shape]
        if None in dims:
            shape = ",".join("?" if d is None else str(d) for d in dims)
            raise DataDependentShape(f"it gives a tensor of shape [{shape}]")
        return TensorType(tuple(dims), dtype_of(val.dtype))  # type: ignore[arg-type]
    if isinstance(val, bool | torch.SymBool):
        return TensorType((), DType.BOOL)
    if isinstance(val, int | torch.SymInt):
        return TensorType((), DType.I64)
    if isinstance(val, float | torch.SymFloat):
        return TensorType((), DType.F64)
    raise TraceError(f"traced value of type {type(val).__name__} has no IR type")


def _attr_value(x: Any) -> AttrValue | _Skip:
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if isinstance(x, torch.dtype):
        return _DTYPES[x].value if x in _DTYPES else str(x).removeprefix("torch.")
    if isinstance(x, _IGNORED_ARG_TYPES):
        return _SKIP
    if isinstance(x, torch.SymInt | torch.SymFloat | torch.SymBool):
        return _attr_value(x.node.pytype(x))
    if isinstance(x, list | tuple | torch.Size):
        items = [_attr_value(v) for v in x]
        if any(isinstance(v, _Skip) for v in items):
            return _SKIP
        return tuple(items)  # type: ignore[arg-type]
    return str(x)


def _has_node(x: Any) -> bool:
    if isinstance(x, torch.fx.Node):
        return True
    if isinstance(x, list | tuple):
        return any(_has_node(v) for v in x)
    return False


def _fake(x: Any) -> Any:
    """An fx argument with nodes replaced by their traced values."""
    if isinstance(x, torch.fx.Node):
        return x.meta.get("val")
    if isinstance(x, list | tuple):
        return type(x)(_fake(v) for v in x)
    return x


def _named_args(node: torch.fx.Node) -> list[tuple[str, Any, bool]]:
    """(argument name, value, is an optional tensor) for each argument given."""
    schema = getattr(node.target, "_schema", None)
    out: list[tuple[str, Any, bool]] = []
    if schema is None:
        out.extend((f"arg{i}", a, False) for i, a in enumerate(node.args))
        out.extend((k, v, False) for k, v in node.kwargs.items())
        return out
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            value = node.args[i]
        elif arg.name in node.kwargs:
            value = node.kwargs[arg.name]
        else:
            continue
        out.append((arg.name, value, "Tensor" in str(arg.type)))
    return out


class _Converter:
    def __init__(self, gm: torch.fx.GraphModule, name: str) -> None:
        self.gm = gm
        self.graph = Graph(name)
        # a node's value, or its results when it returns a tuple (None: absent)
        self.env: dict[torch.fx.Node, Value | tuple[Value | None, ...]] = {}
        self.hints: dict[tuple[torch.fx.Node, int], str] = {}
        self.warned: set[str] = set()
        self.phase = Phase.FWD

    # -- helpers ------------------------------------------------------------------
    def value(self, node: torch.fx.Node) -> Value:
        got = self.env[node]
        if isinstance(got, Value):
            return got
        present = [v for v in got if v is not None]
        if len(present) != 1:
            raise TraceError(f"fx node {node.name} is a tuple used as one tensor")
        return present[0]

    def operands(self, x: Any) -> list[Value]:
        if isinstance(x, torch.fx.Node):
            got = self.env[x]
            if isinstance(got, Value):
                return [got]
            return [v for v in got if v is not None]
        if isinstance(x, list | tuple):
            return [v for item in x for v in self.operands(item)]
        return []

    def resolve(self, node: torch.fx.Node) -> tuple[torch.fx.Node, int]:
        """The (tuple-producing node, index) a getitem chain refers to, or (node, 0)."""
        if node.op == "call_function" and node.target is operator.getitem:
            base = node.args[0]
            if isinstance(base, torch.fx.Node) and isinstance(node.args[1], int):
                return base, node.args[1]
        return node, 0

    def node_phase(self, node: torch.fx.Node) -> Phase:
        # make_fx appends nodes in execution order and the stages run one after
        # another, so a node without an annotation belongs to the stage before it
        custom = node.meta.get("custom") or {}
        phase = custom.get("phase")
        if phase is not None:
            self.phase = Phase(phase)
        return self.phase

    def operands_and_attrs(
        self, node: torch.fx.Node, fixed: tuple[tuple[str, AttrValue], ...]
    ) -> tuple[list[Value], dict[str, AttrValue]]:
        """Tensor arguments become operands, the rest attributes named as in the schema."""
        attrs: dict[str, AttrValue] = dict(fixed)
        operands: list[Value] = []
        for arg_name, value, optional_tensor in _named_args(node):
            if arg_name in _IGNORED_ARG_NAMES:
                continue
            if _has_node(value):
                operands.extend(self.operands(value))
                continue
            if optional_tensor and value is None:
                attrs[arg_name] = None  # an absent optional operand, e.g. bias=none
                continue
            converted = _attr_value(value)
            if not isinstance(converted, _Skip):
                attrs[arg_name] = converted
        return operands, attrs

    # -- conversion ---------------------------------------------------------------
    def source(self, node: torch.fx.Node, spec: SourceSpec) -> None:
        ty = tensor_type(node.meta["val"])
        op = self.graph.add_op(
            spec.kind,
            (),
            (ty,),
            attrs=Attrs.of(name=spec.name),
            names=(spec.name,),
        )
        self.env[node] = op.result

    def constant(self, node: torch.fx.Node) -> None:
        target = str(node.target)
        val = node.meta.get("val")
        if val is None:
            val = getattr(self.gm, target)
        if not isinstance(val, torch.Tensor):
            raise TraceError(
                f"the traced graph holds a {type(val).__name__} attribute {target!r}; "
                "control-flow operators such as torch.cond are not supported"
            )
        op = self.graph.add_op(
            OpKind.CONSTANT,
            (),
            (tensor_type(val),),
            attrs=Attrs.of(name=target),
            names=(target,),
        )
        self.env[node] = op.result

    def call(self, node: torch.fx.Node) -> None:
        target = node.target
        if target is operator.getitem:
            base, index = self.resolve(node)
            got = self.env[base]
            if isinstance(got, tuple):
                # an absent result (e.g. an input gradient nobody asked for) maps to
                # no values; it is never used
                picked = got[index]
                self.env[node] = picked if picked is not None else ()
                return
        phase = self.node_phase(node)
        custom = node.meta.get("custom") or {}
        prov = Provenance(module=str(custom.get("module", "")), aten=_target_name(target))
        packet = getattr(target, "overloadpacket", target)
        entry = lookup(packet)
        if entry is None:
            kind = OpKind.OPAQUE
            fixed: tuple[tuple[str, AttrValue], ...] = ()
            if prov.aten not in self.warned:
                self.warned.add(prov.aten)
                warnings.warn(
                    f"op {prov.aten} has no waferflow op kind; traced as 'opaque' "
                    f"with a guessed cost (FLOPs = output elements)",
                    UnknownOpWarning,
                    stacklevel=5,
                )
        else:
            kind, fixed = entry.kind, entry.attrs

        operands, attrs = self.operands_and_attrs(node, fixed)
        val = node.meta.get("val")
        multi = isinstance(val, list | tuple)
        outs = list(val) if multi else ([] if val is None else [val])
        if multi and any(v is None for v in outs) and "output_mask" not in attrs:
            attrs["output_mask"] = tuple(v is not None for v in outs)
        result_types = [tensor_type(v) for v in outs if v is not None]
        same_dtype = bool(operands and result_types) and operands[0].type.dtype == result_types[0].dtype  # fmt: skip
        if kind is OpKind.CAST and same_dtype:
            kind = OpKind.COPY
        names = [self.hints.get((node, i)) for i, v in enumerate(outs) if v is not None]

        formula = flop_formula(packet, kind)
        flops = None
        if formula is not None:
            kwargs = {k: _fake(v) for k, v in node.kwargs.items()}
            flops = int(formula(*_fake(node.args), **kwargs, out_val=val))
        cost = op_cost(kind, [v.type for v in operands], result_types, flops)
        op = self.graph.add_op(
            kind,
            operands,
            result_types,
            attrs=Attrs.of(attrs),
            cost=cost,
            phase=phase,
            prov=prov,
            names=names,
        )
        if multi:
            it = iter(op.results)
            self.env[node] = tuple(next(it) if v is not None else None for v in outs)
        else:
            self.env[node] = op.results[0] if op.results else ()

    def data_dependent(self, node: torch.fx.Node, exc: Exception) -> TraceError:
        """The error for an op whose output shape depends on tensor values."""
        module = str((node.meta.get("custom") or {}).get("module", ""))
        where = f" in module '{module}'" if module else ""
        why = str(exc) if isinstance(exc, DataDependentShape) else "its shape is a symbol"
        return TraceError(
            f"could not convert {self.graph.name}: {_target_name(node.target)}{where} has a "
            f"shape that depends on tensor values ({why}), and a dataflow graph needs "
            "static shapes. Avoid boolean-mask indexing (x[x > 0]), nonzero, unique and "
            "masked_select; keep the shape with torch.where(mask, x, 0) instead"
        )

    def run(self, sources: Sequence[SourceSpec], outputs: Sequence[OutputSpec]) -> Graph:
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(sources):
            raise AssertionError(f"{len(placeholders)} placeholders for {len(sources)} sources")
        out_node = self.gm.graph.output_node()
        returned = list(out_node.args[0]) if isinstance(out_node.args[0], list | tuple) else [out_node.args[0]]  # fmt: skip
        if len(returned) != len(outputs):
            raise AssertionError(f"{len(returned)} returned values for {len(outputs)} specs")
        for node, spec in zip(returned, outputs, strict=True):
            if isinstance(node, torch.fx.Node) and spec.name is not None:
                self.hints.setdefault(self.resolve(node), spec.name)
        specs = dict(zip(placeholders, sources, strict=True))
        for node in self.gm.graph.nodes:
            try:
                if node.op == "placeholder":
                    self.source(node, specs[node])
                elif node.op == "get_attr":
                    self.constant(node)
                elif node.op == "call_function":
                    self.call(node)
                elif node.op == "output":
                    continue
                else:
                    raise TraceError(f"unexpected fx node {node.op} {node.target}")
            except (DataDependentShape, GuardOnDataDependentSymNode) as exc:
                raise self.data_dependent(node, exc) from None
        self.graph.set_outputs(
            self.value(node)
            for node, spec in zip(returned, outputs, strict=True)
            if spec.is_output and isinstance(node, torch.fx.Node)
        )
        return self.graph


def _target_name(target: object) -> str:
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return str(target)
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
    return f"{module}.{name}" if module else name


def convert(
    gm: torch.fx.GraphModule,
    name: str,
    sources: Sequence[SourceSpec],
    outputs: Sequence[OutputSpec],
) -> Graph:
    """The IR graph of ``gm``; ``sources`` describe its placeholders in order and
    ``outputs`` the values it returns (a flat list)."""
    return _Converter(gm, name).run(sources, outputs)

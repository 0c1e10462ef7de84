"""ATen -> OpKind: the one table that names ATen ops.

The table is keyed by ATen overload packet (``torch.ops.aten.mm``), so every
overload of a packet (``add.Tensor``, ``add.Scalar``) maps to the same kind; the
exact overload stays in the op's provenance. An in-place packet (``add_``,
``bernoulli_``) maps to the kind of its functional twin: the frontend gives its
result a fresh SSA value, which is what the traced graph means (make_fx points
every later use of the mutated tensor at the in-place node).

Some entries carry fixed attributes (``act_backward {fn="relu"}``) so that one
kind can say which function it differentiates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import torch

import waferflow.frontend.moe  # noqa: F401  (registers torch.ops.waferflow.*)
from waferflow.ir.graph import AttrValue
from waferflow.ir.opkind import OpKind

K = OpKind


@dataclass(frozen=True, slots=True)
class KindEntry:
    """The kind an ATen packet maps to, with attributes it always carries."""

    kind: OpKind
    attrs: tuple[tuple[str, AttrValue], ...] = ()


# (kind, ATen packet names separated by spaces, fixed attrs). Names missing from
# this torch build are skipped, so the table works across the supported torch range.
_SPEC: tuple[tuple[OpKind, str, tuple[tuple[str, AttrValue], ...]], ...] = (
    # matmul-like
    (K.MATMUL, "mm", ()),
    (K.BMM, "bmm", ()),
    (K.ADDMM, "addmm", ()),
    (K.BADDBMM, "baddbmm", ()),
    (K.CONV, "convolution _convolution convolution_overrideable _slow_conv2d_forward", ()),
    (K.CONV_BACKWARD, "convolution_backward convolution_backward_overrideable", ()),
    (
        K.SDPA,
        "scaled_dot_product_attention _scaled_dot_product_flash_attention "
        "_scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_efficient_attention "
        "_scaled_dot_product_cudnn_attention _flash_attention_forward "
        "_efficient_attention_forward",
        (),
    ),
    (
        K.SDPA_BACKWARD,
        "_scaled_dot_product_flash_attention_backward "
        "_scaled_dot_product_flash_attention_for_cpu_backward "
        "_scaled_dot_product_efficient_attention_backward "
        "_scaled_dot_product_cudnn_attention_backward _flash_attention_backward "
        "_efficient_attention_backward",
        (),
    ),
    # elementwise
    (K.ADD, "add", ()),
    (K.SUB, "sub rsub", ()),
    (K.MUL, "mul", ()),
    (K.DIV, "div", ()),
    (K.NEG, "neg", ()),
    (K.EXP, "exp exp2 expm1", ()),
    (K.SIN, "sin", ()),
    (K.COS, "cos", ()),
    (K.LOG, "log log2 log10 log1p", ()),
    (K.SQRT, "sqrt", ()),
    (K.RSQRT, "rsqrt", ()),
    (K.POW, "pow reciprocal", ()),
    (K.TANH, "tanh", ()),
    (K.RELU, "relu leaky_relu", ()),
    (K.GELU, "gelu", ()),
    (K.SILU, "silu", ()),
    (K.SIGMOID, "sigmoid", ()),
    (K.WHERE, "where masked_fill tril triu", ()),
    (K.MAXIMUM, "maximum fmax", ()),
    (K.MINIMUM, "minimum fmin", ()),
    (K.CLAMP, "clamp clamp_min clamp_max hardtanh", ()),
    (K.ABS, "abs", ()),
    (K.COMPARE, "eq ne lt le gt ge isnan isinf isfinite", ()),
    (
        K.LOGICAL,
        "logical_and logical_or logical_not logical_xor "
        "bitwise_and bitwise_or bitwise_not bitwise_xor",
        (),
    ),
    (K.CAST, "_to_copy to type_as", ()),
    (
        K.FILL,
        "zeros ones full empty empty_strided scalar_tensor arange linspace zeros_like "
        "ones_like full_like empty_like new_zeros new_ones new_full new_empty "
        "new_empty_strided fill zero rand randn rand_like randn_like randint uniform normal",
        (),
    ),
    (K.DROPOUT, "native_dropout dropout bernoulli", ()),
    (K.ACT_BACKWARD, "threshold_backward", (("fn", "relu"),)),
    (K.ACT_BACKWARD, "leaky_relu_backward", (("fn", "leaky_relu"),)),
    (K.ACT_BACKWARD, "gelu_backward", (("fn", "gelu"),)),
    (K.ACT_BACKWARD, "silu_backward", (("fn", "silu"),)),
    (K.ACT_BACKWARD, "tanh_backward", (("fn", "tanh"),)),
    (K.ACT_BACKWARD, "sigmoid_backward", (("fn", "sigmoid"),)),
    (K.ACT_BACKWARD, "hardtanh_backward", (("fn", "hardtanh"),)),
    (K.ACT_BACKWARD, "native_dropout_backward", (("fn", "dropout"),)),
    (K.LERP, "lerp", ()),
    (K.ADDCMUL, "addcmul", ()),
    (K.ADDCDIV, "addcdiv", ()),
    # reductions (a scan counts as a sum that keeps its dimension)
    (K.SUM, "sum", ()),
    (K.SUM, "cumsum", (("scan", True),)),
    (K.MEAN, "mean", ()),
    (K.AMAX, "amax max", ()),
    (K.ARGMAX, "argmax", ()),
    (K.VAR, "var var_mean", ()),
    # normalisation
    (K.SOFTMAX, "_softmax softmax _safe_softmax", ()),
    (K.LOG_SOFTMAX, "_log_softmax log_softmax", ()),
    (K.SOFTMAX_BACKWARD, "_softmax_backward_data _log_softmax_backward_data", ()),
    (K.LAYER_NORM, "native_layer_norm layer_norm", ()),
    (K.LAYER_NORM_BACKWARD, "native_layer_norm_backward", ()),
    (
        K.BATCH_NORM,
        "native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training "
        "_native_batch_norm_legit_functional batch_norm",
        (),
    ),
    (K.BATCH_NORM_BACKWARD, "native_batch_norm_backward", ()),
    # pooling
    (K.AVG_POOL, "avg_pool1d avg_pool2d avg_pool3d", ()),
    (
        K.AVG_POOL_BACKWARD,
        "avg_pool2d_backward avg_pool3d_backward _adaptive_avg_pool2d_backward",
        (),
    ),
    (K.MAX_POOL, "max_pool2d_with_indices max_pool2d max_pool3d_with_indices", ()),
    (K.MAX_POOL_BACKWARD, "max_pool2d_with_indices_backward", ()),
    (K.ADAPTIVE_AVG_POOL, "_adaptive_avg_pool2d adaptive_avg_pool2d", ()),
    # movement: views
    (K.VIEW, "view _unsafe_view reshape _reshape_alias", ()),
    (K.PERMUTE, "permute", ()),
    (K.TRANSPOSE, "t transpose numpy_T", ()),
    (K.EXPAND, "expand", ()),
    (K.SLICE, "slice narrow", ()),
    (K.SELECT, "select", ()),
    (K.SQUEEZE, "squeeze", ()),
    (K.UNSQUEEZE, "unsqueeze", ()),
    (K.ALIAS, "alias lift_fresh", ()),
    (K.DETACH, "detach", ()),
    # movement: copies
    (K.CAT, "cat concat repeat", ()),
    (K.SPLIT, "split split_with_sizes unbind chunk", ()),
    (K.STACK, "stack", ()),
    (K.CLONE, "clone", ()),
    (K.COPY, "copy lift_fresh_copy", ()),
    (K.GATHER, "gather index_select", ()),
    (K.INDEX, "index _unsafe_index", ()),
    (
        K.SCATTER,
        "scatter scatter_add index_put _unsafe_index_put index_add slice_scatter "
        "select_scatter select_backward index_select_backward",
        (),
    ),
    (K.PAD, "constant_pad_nd pad slice_backward", ()),
    # embedding
    (K.EMBEDDING, "embedding", ()),
    (K.EMBEDDING_BACKWARD, "embedding_dense_backward embedding_backward", ()),
    # losses
    (K.NLL_LOSS, "nll_loss_forward nll_loss2d_forward", ()),
    (K.NLL_LOSS_BACKWARD, "nll_loss_backward nll_loss2d_backward", ()),
    (K.MSE_LOSS, "mse_loss", ()),
    (K.MSE_LOSS_BACKWARD, "mse_loss_backward", ()),
    # routing (the router's choice; moe_dispatch / moe_combine are ours, below)
    (K.TOPK, "topk", ()),
    # bookkeeping
    (
        K.ASSERT,
        "_assert_async _assert_scalar _assert_tensor_metadata _functional_assert_async",
        (),
    ),
    (K.METADATA, "sym_size sym_stride sym_numel sym_storage_offset", ()),
)


def _build_table() -> Mapping[object, KindEntry]:
    aten = torch.ops.aten
    table: dict[object, KindEntry] = {}
    for kind, names, attrs in _SPEC:
        for name in names.split():
            if not hasattr(aten, name):
                continue
            packet = getattr(aten, name)
            if packet in table:
                raise AssertionError(f"aten.{name} appears twice in the op table")
            table[packet] = KindEntry(kind, attrs)
    # waferflow's own ops (``frontend/moe.py``): routing with static shapes
    table[torch.ops.waferflow.moe_dispatch] = KindEntry(K.MOE_DISPATCH)
    table[torch.ops.waferflow.moe_combine] = KindEntry(K.MOE_COMBINE)
    return MappingProxyType(table)


KIND_TABLE: Mapping[object, KindEntry] = _build_table()


def lookup(packet: object) -> KindEntry | None:
    """The entry for an overload packet, following an in-place op to its functional twin."""
    entry = KIND_TABLE.get(packet)
    if entry is not None:
        return entry
    name = getattr(packet, "__name__", "")
    ns = getattr(packet, "_qualified_op_name", "").split("::")[0]
    if ns == "aten" and name.endswith("_") and not name.endswith("__"):
        base = name[:-1]
        if hasattr(torch.ops.aten, base):
            return KIND_TABLE.get(getattr(torch.ops.aten, base))
    return None

"""Typed op kinds and their groups.

Passes test membership in a group (``kind in ELEMENTWISE``), never op names.
The enum value is the mnemonic printed in the IR text.
"""

from __future__ import annotations

from enum import Enum


class OpKind(Enum):
    # sources: values that enter the step from outside
    INPUT = "input"
    PARAM = "param"
    BUFFER = "buffer"
    CONSTANT = "constant"
    # matmul-like
    MATMUL = "matmul"
    BMM = "bmm"
    ADDMM = "addmm"
    BADDBMM = "baddbmm"
    CONV = "conv"
    CONV_BACKWARD = "conv_backward"
    SDPA = "sdpa"
    SDPA_BACKWARD = "sdpa_backward"
    # elementwise
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    NEG = "neg"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    POW = "pow"
    TANH = "tanh"
    SIN = "sin"
    COS = "cos"
    RELU = "relu"
    GELU = "gelu"
    SILU = "silu"
    SIGMOID = "sigmoid"
    WHERE = "where"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    CLAMP = "clamp"
    ABS = "abs"
    COMPARE = "compare"
    LOGICAL = "logical"
    CAST = "cast"
    FILL = "fill"
    DROPOUT = "dropout"
    ACT_BACKWARD = "act_backward"
    LERP = "lerp"
    ADDCMUL = "addcmul"
    ADDCDIV = "addcdiv"
    FUSED = "fused"
    # reductions
    SUM = "sum"
    MEAN = "mean"
    AMAX = "amax"
    ARGMAX = "argmax"
    VAR = "var"
    # normalisations
    SOFTMAX = "softmax"
    LOG_SOFTMAX = "log_softmax"
    SOFTMAX_BACKWARD = "softmax_backward"
    LAYER_NORM = "layer_norm"
    LAYER_NORM_BACKWARD = "layer_norm_backward"
    BATCH_NORM = "batch_norm"
    BATCH_NORM_BACKWARD = "batch_norm_backward"
    # pooling
    AVG_POOL = "avg_pool"
    AVG_POOL_BACKWARD = "avg_pool_backward"
    MAX_POOL = "max_pool"
    MAX_POOL_BACKWARD = "max_pool_backward"
    ADAPTIVE_AVG_POOL = "adaptive_avg_pool"
    # movement / views
    VIEW = "view"
    PERMUTE = "permute"
    TRANSPOSE = "transpose"
    EXPAND = "expand"
    SLICE = "slice"
    SELECT = "select"
    SQUEEZE = "squeeze"
    UNSQUEEZE = "unsqueeze"
    CAT = "cat"
    SPLIT = "split"
    STACK = "stack"
    CLONE = "clone"
    COPY = "copy"
    GATHER = "gather"
    INDEX = "index"
    SCATTER = "scatter"
    PAD = "pad"
    ALIAS = "alias"
    DETACH = "detach"
    GETITEM = "getitem"
    # embedding
    EMBEDDING = "embedding"
    EMBEDDING_BACKWARD = "embedding_backward"
    # losses
    NLL_LOSS = "nll_loss"
    NLL_LOSS_BACKWARD = "nll_loss_backward"
    MSE_LOSS = "mse_loss"
    MSE_LOSS_BACKWARD = "mse_loss_backward"
    # routing (mixture of experts): the router's top-k choice; tokens to their experts'
    # slots on a fixed capacity and back (``frontend/moe.py``: the load assumption is
    # in their attributes ``capacity`` and ``skew``)
    TOPK = "topk"
    MOE_DISPATCH = "moe_dispatch"
    MOE_COMBINE = "moe_combine"
    # optimizer updates (fused by passes or emitted directly)
    SGD_UPDATE = "sgd_update"
    ADAM_UPDATE = "adam_update"
    # collectives
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    # point-to-point
    SEND = "send"
    RECV = "recv"
    # bookkeeping that canonicalize removes
    ASSERT = "assert"
    METADATA = "metadata"
    # anything the frontend does not know; keeps its ATen name in provenance
    OPAQUE = "opaque"

    @classmethod
    def parse(cls, text: str) -> OpKind:
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown op kind {text!r}") from None


K = OpKind

SOURCES: frozenset[OpKind] = frozenset({K.INPUT, K.PARAM, K.BUFFER, K.CONSTANT})
MATMUL_LIKE: frozenset[OpKind] = frozenset(
    {K.MATMUL, K.BMM, K.ADDMM, K.BADDBMM, K.CONV, K.CONV_BACKWARD, K.SDPA, K.SDPA_BACKWARD}
)
ELEMENTWISE: frozenset[OpKind] = frozenset(
    {
        K.ADD, K.SUB, K.MUL, K.DIV, K.NEG, K.EXP, K.LOG, K.SQRT, K.RSQRT, K.POW, K.TANH, K.SIN, K.COS,
        K.RELU, K.GELU, K.SILU, K.SIGMOID, K.WHERE, K.MAXIMUM, K.MINIMUM, K.CLAMP, K.ABS,
        K.COMPARE, K.LOGICAL, K.CAST, K.FILL, K.DROPOUT, K.ACT_BACKWARD, K.LERP, K.ADDCMUL,
        K.ADDCDIV, K.FUSED,
    }
)  # fmt: skip
REDUCTION: frozenset[OpKind] = frozenset({K.SUM, K.MEAN, K.AMAX, K.ARGMAX, K.VAR})
NORMALIZATION: frozenset[OpKind] = frozenset(
    {
        K.SOFTMAX, K.LOG_SOFTMAX, K.SOFTMAX_BACKWARD, K.LAYER_NORM, K.LAYER_NORM_BACKWARD,
        K.BATCH_NORM, K.BATCH_NORM_BACKWARD,
    }
)  # fmt: skip
POOLING: frozenset[OpKind] = frozenset(
    {K.AVG_POOL, K.AVG_POOL_BACKWARD, K.MAX_POOL, K.MAX_POOL_BACKWARD, K.ADAPTIVE_AVG_POOL}
)
MOVEMENT: frozenset[OpKind] = frozenset(
    {
        K.VIEW, K.PERMUTE, K.TRANSPOSE, K.EXPAND, K.SLICE, K.SELECT, K.SQUEEZE, K.UNSQUEEZE,
        K.CAT, K.SPLIT, K.STACK, K.CLONE, K.COPY, K.GATHER, K.INDEX, K.SCATTER, K.PAD, K.ALIAS,
        K.DETACH, K.GETITEM,
    }
)  # fmt: skip
# movement ops that never copy data: a view of their operand
VIEWS: frozenset[OpKind] = frozenset(
    {K.VIEW, K.PERMUTE, K.TRANSPOSE, K.EXPAND, K.SLICE, K.SELECT, K.SQUEEZE, K.UNSQUEEZE,
     K.ALIAS, K.DETACH, K.GETITEM}
)  # fmt: skip
EMBEDDING: frozenset[OpKind] = frozenset({K.EMBEDDING, K.EMBEDDING_BACKWARD})
LOSS: frozenset[OpKind] = frozenset(
    {K.NLL_LOSS, K.NLL_LOSS_BACKWARD, K.MSE_LOSS, K.MSE_LOSS_BACKWARD}
)
ROUTING: frozenset[OpKind] = frozenset({K.TOPK, K.MOE_DISPATCH, K.MOE_COMBINE})
OPTIMIZER: frozenset[OpKind] = frozenset({K.SGD_UPDATE, K.ADAM_UPDATE})
COLLECTIVE: frozenset[OpKind] = frozenset(
    {K.ALL_REDUCE, K.REDUCE_SCATTER, K.ALL_GATHER, K.BROADCAST, K.REDUCE, K.ALL_TO_ALL}
)
COMM: frozenset[OpKind] = frozenset({K.SEND, K.RECV})
BOOKKEEPING: frozenset[OpKind] = frozenset({K.ASSERT, K.METADATA})

GROUPS: dict[str, frozenset[OpKind]] = {
    "source": SOURCES,
    "matmul": MATMUL_LIKE,
    "elementwise": ELEMENTWISE,
    "reduction": REDUCTION,
    "normalization": NORMALIZATION,
    "pooling": POOLING,
    "movement": MOVEMENT,
    "embedding": EMBEDDING,
    "loss": LOSS,
    "routing": ROUTING,
    "optimizer": OPTIMIZER,
    "collective": COLLECTIVE,
    "comm": COMM,
    "bookkeeping": BOOKKEEPING,
}


def group_of(kind: OpKind) -> str:
    """The name of the first group holding ``kind`` (``opaque`` if none)."""
    for name, members in GROUPS.items():
        if kind in members:
            return name
    return "opaque"

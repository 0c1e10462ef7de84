"""The shared vocabulary: graph IR, tensor types, op kinds, the wafer target, the plan."""

from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, AttrValue, Cost, Graph, Op, Phase, Provenance, Value
from waferflow.ir.opkind import OpKind
from waferflow.ir.printer import print_graph

__all__ = [
    "AttrValue",
    "Attrs",
    "Cost",
    "DType",
    "Graph",
    "Op",
    "OpKind",
    "Phase",
    "Provenance",
    "TensorType",
    "Value",
    "print_graph",
]

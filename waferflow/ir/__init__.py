"""The shared vocabulary: graph IR, tensor types, op kinds, text and JSON forms, verifier.

The wafer target lives in ``waferflow.ir.target`` and the actor program in
``waferflow.ir.plan``.
"""

from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, AttrValue, Cost, Graph, Op, Phase, Provenance, Value
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.printer import print_graph
from waferflow.ir.serialize import dumps_graph, graph_from_json, graph_to_json, loads_graph
from waferflow.ir.verifier import graph_problems, verify_graph

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
    "dumps_graph",
    "graph_from_json",
    "graph_problems",
    "graph_to_json",
    "loads_graph",
    "parse_graph",
    "print_graph",
    "verify_graph",
]

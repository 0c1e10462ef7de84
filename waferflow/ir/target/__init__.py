"""The hardware target: ``Wafer`` (a grid of cores, links and dies), its TOML form and
the preset machines.

>>> from waferflow.ir.target import get_wafer
>>> w = get_wafer("amcoda")
>>> w.link.bandwidth
12800000000.0
"""

from waferflow.ir.target.catalog import list_presets
from waferflow.ir.target.parts import (
    Coord,
    CoreModel,
    Dataflow,
    FlowControl,
    Link,
    LinkSpec,
    MacArray,
    Topology,
    VectorUnit,
)
from waferflow.ir.target.toml_io import (
    dump_wafer,
    get_wafer,
    load_wafer,
    parse_wafer_toml,
    wafer_to_toml,
)
from waferflow.ir.target.wafer import SUMMARY_HEADER, Wafer

__all__ = [
    "SUMMARY_HEADER",
    "Coord",
    "CoreModel",
    "Dataflow",
    "FlowControl",
    "Link",
    "LinkSpec",
    "MacArray",
    "Topology",
    "VectorUnit",
    "Wafer",
    "dump_wafer",
    "get_wafer",
    "list_presets",
    "load_wafer",
    "parse_wafer_toml",
    "wafer_to_toml",
]

"""The ``[core]`` and ``[memory]`` tables of a wafer TOML file (see ``toml_io`` for the
schema): read into ``CoreModel`` / ``MemoryModel``, written back as plain SI numbers
(a rate of ``inf``: the op group takes no compute cycles of its own). Types and ranges
are checked by the ``Wafer`` itself (``validate``), whose errors name the field."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from waferflow.errors import ConfigError
from waferflow.ir.dtypes import DType
from waferflow.ir.target.parts import CoreModel, MacArray, MemoryModel, VectorUnit
from waferflow.ir.target.units import Kind, quantity_float, quantity_int

if TYPE_CHECKING:
    from waferflow.ir.target.wafer import Wafer


def parse_core(table: dict[str, Any], clock: float) -> CoreModel:
    if "port_bandwidth" not in table:
        raise ConfigError("missing core.port_bandwidth (bytes/s per port)")
    rates: list[tuple[str, float]] = []
    for g, v in table.get("rates", {}).items():
        inf = v == "inf" or (isinstance(v, float) and math.isinf(v) and v > 0)
        rate = math.inf if inf else quantity_float(v, Kind.FLOPS, f"core.rates.{g}", clock)
        rates.append((g, rate))
    return CoreModel(
        overlap=table.get("overlap", True),
        fixed_cycles=table.get("fixed_cycles", 0),
        read_ports=table.get("read_ports", 1),
        write_ports=table.get("write_ports", 1),
        port_bandwidth=quantity_float(
            table["port_bandwidth"], Kind.BANDWIDTH, "core.port_bandwidth", clock
        ),
        rates=tuple(rates),
        array=_array(table["array"]) if "array" in table else None,
        vector=_vector(table["vector"]) if "vector" in table else None,
        source=table.get("source", ""),
    )


def _per_dtype(table: dict[str, Any]) -> tuple[tuple[DType, Any], ...]:
    return tuple((DType(d), v) for d, v in table.items())


def _array(t: dict[str, Any]) -> MacArray:
    for key in ("rows", "cols"):
        if key not in t:
            raise ConfigError(f"missing core.array.{key} (PEs along the array's {key})")
    return MacArray(
        rows=t["rows"],
        cols=t["cols"],
        dataflow=t.get("dataflow", "weight"),
        count=t.get("count", 1),
        macs_per_pe=_per_dtype(t.get("macs_per_pe", {})),
    )


def _vector(t: dict[str, Any]) -> VectorUnit:
    if "lanes" not in t:
        raise ConfigError("missing core.vector.lanes (SIMD lanes)")
    return VectorUnit(lanes=t["lanes"], ops_per_lane=_per_dtype(t.get("ops_per_lane", {})))


def parse_memory(table: dict[str, Any], clock: float) -> MemoryModel:
    return MemoryModel(
        block_bytes=quantity_int(
            table.get("block_bytes", 0), Kind.BYTES, "memory.block_bytes", clock
        ),
        lookahead=table.get("lookahead", 0),
        first_fit=table.get("first_fit", False),
    )


def core_memory_doc(w: Wafer) -> dict[str, Any]:
    """The wafer's ``core`` and ``memory`` tables, for ``wafer_to_doc``."""
    doc: dict[str, Any] = {}
    if w.core is not None:
        c = w.core
        doc["core"] = {
            "overlap": c.overlap,
            "fixed_cycles": c.fixed_cycles,
            "read_ports": c.read_ports,
            "write_ports": c.write_ports,
            "port_bandwidth": c.port_bandwidth,
        }
        if c.rates:
            doc["core"]["rates"] = dict(c.rates)
        if c.array is not None:
            a = c.array
            doc["core"]["array"] = {
                "rows": a.rows,
                "cols": a.cols,
                "count": a.count,
                "dataflow": a.dataflow.value,
            }
            if a.macs_per_pe:
                doc["core"]["array"]["macs_per_pe"] = {d.value: r for d, r in a.macs_per_pe}
        if c.vector is not None:
            doc["core"]["vector"] = {"lanes": c.vector.lanes}
            if c.vector.ops_per_lane:
                doc["core"]["vector"]["ops_per_lane"] = {
                    d.value: r for d, r in c.vector.ops_per_lane
                }
        if c.source:
            doc["core"]["source"] = c.source
    if w.memory is not None:
        m = w.memory
        doc["memory"] = {
            "block_bytes": m.block_bytes,
            "lookahead": m.lookahead,
            "first_fit": m.first_fit,
        }
    return doc


__all__ = ["core_memory_doc", "parse_core", "parse_memory"]

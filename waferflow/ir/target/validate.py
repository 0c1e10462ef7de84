"""Normalisation and validation of a ``Wafer``, run by ``Wafer.__post_init__``.

Every message names the field by its TOML path (``dies.rows``, ``link.bandwidth``)
and, where the Python attribute is spelled differently, by that too, so the same
message serves a TOML file and a ``Wafer(...)`` call.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from waferflow.errors import ConfigError
from waferflow.fileio import short
from waferflow.ir.dtypes import DType
from waferflow.ir.target.parts import (
    CORE_RATE_GROUPS,
    Coord,
    CoreModel,
    Dataflow,
    FlowControl,
    LinkSpec,
    MacArray,
    MemoryModel,
    Topology,
    VectorUnit,
)
from waferflow.ir.target.ranges import MAX_CORES, Range, check_fields, check_value, declared

if TYPE_CHECKING:
    from waferflow.ir.target.wafer import Wafer

# Python attribute -> TOML path
TOML_PATH: dict[str, str] = {
    "name": "wafer.name",
    "rows": "wafer.rows",
    "cols": "wafer.cols",
    "topology": "wafer.topology",
    "clock_hz": "wafer.clock_hz",
    "peak_flops": "wafer.peak_flops",
    "sram_bytes": "wafer.sram_bytes",
    "sram_bandwidth": "wafer.sram_bandwidth",
    "link": "link",
    "die_rows": "dies.rows",
    "die_cols": "dies.cols",
    "d2d_link": "dies.link",
    "dead_cores": "faults.dead_cores",
    "dead_links": "faults.dead_links",
    "partial_cores": "faults.partial_cores",
    "flow": "flow",
    "core": "core",
    "memory": "memory",
    "host": "host",
    "fabric": "fabric",
    "coarsen_factor": "wafer.coarsen_factor",
    "fine_rows": "wafer.fine_rows",
    "fine_cols": "wafer.fine_cols",
    "source": "wafer.source",
}


def label(attr: str) -> str:
    """``dies.rows (die_rows)``: the TOML path, plus the attribute when it differs."""
    path = TOML_PATH[attr]
    return path if path.rsplit(".", 1)[-1] == attr else f"{path} ({attr})"


def _set(w: Wafer, attr: str, value: object) -> None:
    object.__setattr__(w, attr, value)  # normalising a frozen dataclass in __post_init__


def _int(value: object, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} must be an integer >= {minimum}, got {short(value)}")
    if value < minimum:
        raise ConfigError(f"{where} must be >= {minimum}, got {value}")
    return value


def _ranged(w: Wafer, attr: str, k: int = 1) -> int | float:
    """``w.attr`` checked against the range its field declares (``ranges.py``)."""
    return check_value(getattr(w, attr), label(attr), declared(type(w))[attr], k)


def _coord(value: object, where: str) -> Coord:
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or any(isinstance(x, bool) or not isinstance(x, int) for x in value)
    ):
        raise ConfigError(
            f"{where}: a core is written [row, col] with two integers, got {short(value)}"
        )
    return (value[0], value[1])


def _linkspec(value: object, where: str, k: int) -> LinkSpec:
    if not isinstance(value, LinkSpec):
        raise ConfigError(f"{where} must be a LinkSpec, got {type(value).__name__}")
    check_fields(value, where, k)
    return LinkSpec(float(value.bandwidth), float(value.latency))


def _peaks(value: object, k: int, rng: Range) -> tuple[tuple[DType, float], ...]:
    out = _dtype_table(value, label("peak_flops"), rng, k)
    if not out:
        raise ConfigError(
            f"{label('peak_flops')} is empty: give at least one rate, e.g. f32 = 1e12"
        )
    return out


def _dtype_table(
    value: object, where: str, rng: Range, k: int = 1
) -> tuple[tuple[DType, float], ...]:
    """A table of rates by dtype (``wafer.peak_flops``, ``core.array.macs_per_pe``,
    ``core.vector.ops_per_lane``), each in ``rng``, sorted by dtype."""
    items: Iterable[Any]
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, tuple | list):
        items = value
    else:
        raise ConfigError(f"{where} must map dtypes to {rng.unit}, got {short(value)}")
    out: dict[DType, float] = {}
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ConfigError(f"{where}: entries are (dtype, {rng.unit}) pairs, got {short(item)}")
        key, rate = item
        if isinstance(key, str):
            try:
                key = DType.parse(key)
            except ValueError as e:
                raise ConfigError(f"{where}: {e}") from None
        if not isinstance(key, DType):
            raise ConfigError(f"{where}: {short(key)} is not a dtype")
        if key in out:
            raise ConfigError(f"{where}.{key.value} is given twice")
        out[key] = float(check_value(rate, f"{where}.{key.value}", rng, k))
    order = list(DType)
    return tuple(sorted(out.items(), key=lambda kv: order.index(kv[0])))


def _flow(value: object) -> FlowControl | None:
    if value is None:
        return None
    if not isinstance(value, FlowControl):
        raise ConfigError(f"flow must be a FlowControl or None, got {type(value).__name__}")
    for f in fields(FlowControl):
        v = getattr(value, f.name)
        if isinstance(f.default, bool) and not isinstance(v, bool):
            raise ConfigError(f"flow.{f.name} must be true or false, got {short(v)}")
    check_fields(value, "flow")
    return value


def _core(value: object, k: int) -> CoreModel | None:
    if value is None:
        return None
    if not isinstance(value, CoreModel):
        raise ConfigError(f"core must be a CoreModel or None, got {type(value).__name__}")
    if not isinstance(value.overlap, bool):
        raise ConfigError(f"core.overlap must be true or false, got {short(value.overlap)}")
    if not isinstance(value.source, str):
        raise ConfigError(f"core.source must be a string, got {short(value.source)}")
    rates: dict[str, float] = {}
    items = value.rates.items() if isinstance(value.rates, Mapping) else value.rates
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ConfigError(
                f"core.rates: entries are (op group, FLOP/s) pairs, got {short(item)}"
            )
        group, rate = item
        if group not in CORE_RATE_GROUPS:
            raise ConfigError(
                f"core.rates.{short(group)}: unknown op group; use one of {', '.join(CORE_RATE_GROUPS)}"
            )
        if group in rates:
            raise ConfigError(f"core.rates.{group} is given twice")
        rates[group] = rate
    array = _array(value.array)
    if array is not None and "matmul" in rates:
        raise ConfigError(
            "core.rates.matmul and core.array both time matmuls: give one (the array times "
            "them from their shape; a rate ignores it)"
        )
    core = dataclasses.replace(
        value, rates=tuple(sorted(rates.items())), array=array, vector=_vector(value.vector)
    )
    check_fields(core, "core", k)  # ranges (ranges.py); a rate may be inf: no compute cycles
    return dataclasses.replace(
        core,
        port_bandwidth=float(core.port_bandwidth),
        rates=tuple((g, float(r)) for g, r in core.rates),
    )


def _dtype_rates(value: object, where: str, rng: Range) -> tuple[tuple[DType, float], ...]:
    """A unit's rates by dtype: at least one positive when any is given."""
    out = _dtype_table(value, where, rng)
    if out and not any(r > 0 for _, r in out):
        raise ConfigError(f"{where}: every rate is 0; give at least one dtype a positive rate")
    return out


def _array(value: object) -> MacArray | None:
    if value is None:
        return None
    if not isinstance(value, MacArray):
        raise ConfigError(f"core.array must be a MacArray or None, got {type(value).__name__}")
    flow = value.dataflow
    if isinstance(flow, str):
        try:
            flow = Dataflow(flow)
        except ValueError:
            choices = ", ".join(d.value for d in Dataflow)
            raise ConfigError(
                f"core.array.dataflow = {flow!r} is unknown; choose one of {choices} "
                "(what stays in the PEs: weight, output or input stationary)"
            ) from None
    if not isinstance(flow, Dataflow):
        raise ConfigError(f"core.array.dataflow must be a Dataflow, got {flow!r}")
    rates = _dtype_rates(
        value.macs_per_pe, "core.array.macs_per_pe", declared(MacArray)["macs_per_pe"]
    )
    array = MacArray(value.rows, value.cols, flow, value.count, rates)
    check_fields(array, "core.array")  # per fine core on every view
    return array


def _vector(value: object) -> VectorUnit | None:
    if value is None:
        return None
    if not isinstance(value, VectorUnit):
        raise ConfigError(f"core.vector must be a VectorUnit or None, got {type(value).__name__}")
    rates = _dtype_rates(
        value.ops_per_lane, "core.vector.ops_per_lane", declared(VectorUnit)["ops_per_lane"]
    )
    vector = VectorUnit(value.lanes, rates)
    check_fields(vector, "core.vector")
    return vector


def _memory(value: object) -> MemoryModel | None:
    if value is None:
        return None
    if not isinstance(value, MemoryModel):
        raise ConfigError(f"memory must be a MemoryModel or None, got {type(value).__name__}")
    if not isinstance(value.first_fit, bool):
        raise ConfigError(f"memory.first_fit must be true or false, got {short(value.first_fit)}")
    check_fields(value, "memory")
    if value.first_fit and value.block_bytes == 0:
        raise ConfigError("memory.first_fit places buffers in blocks: give memory.block_bytes too")
    return value


def _fabric(w: Wafer) -> None:
    """A ``tree`` wafer's switch levels (``fabric.py``): fan-outs multiplying to the
    cores, links of positive bandwidth, the cores' ports equal to ``[link]``."""
    from waferflow.ir.target.fabric import FabricLevel

    if w.topology is not Topology.TREE:
        if w.fabric:
            raise ConfigError(
                f"fabric is given but wafer.topology = {w.topology.value!r}; the switch levels "
                'belong to topology = "tree"'
            )
        return
    levels = list(w.fabric)
    if not levels:
        raise ConfigError(
            'wafer.topology = "tree" needs its switches: [fabric] fanout = [...], '
            "bandwidth = [...], latency = [...], one entry per level, bottom first"
        )
    out = []
    for k, lv in enumerate(levels):
        if not isinstance(lv, FabricLevel):
            raise ConfigError(f"fabric level {k} must be a FabricLevel, got {lv!r}")
        rng = declared(FabricLevel)
        fan = check_value(lv.fanout, f"fabric.fanout[{k}]", rng["fanout"])
        bw = check_value(lv.bandwidth, f"fabric.bandwidth[{k}]", rng["bandwidth"])
        lat = check_value(lv.latency, f"fabric.latency[{k}]", rng["latency"])
        out.append(FabricLevel(int(fan), float(bw), float(lat)))
    _set(w, "fabric", tuple(out))
    total = math.prod(lv.fanout for lv in out)
    if total != w.rows * w.cols:
        raise ConfigError(
            f"fabric.fanout = {[lv.fanout for lv in out]} puts {total} cores under the top "
            f"switch, but the grid has wafer.rows x wafer.cols = {w.rows * w.cols}: make the "
            "fan-outs multiply to the cores"
        )
    first = LinkSpec(out[0].bandwidth, out[0].latency)
    if w.link != first:
        raise ConfigError(
            f"link = {w.link} differs from the cores' ports fabric.bandwidth[0] / "
            f"fabric.latency[0] = {first}: on a tree the link is the cores' port (omit [link])"
        )
    for attr, bad in (("die_rows", w.die_rows != 1), ("die_cols", w.die_cols != 1),
                      ("coarsen_factor", w.coarsen_factor != 1),
                      ("dead_cores", bool(w.dead_cores)), ("dead_links", bool(w.dead_links))):  # fmt: skip
        if bad:
            raise ConfigError(f"{label(attr)}: a switched fabric (topology tree) has none yet")


def normalize_and_validate(w: Wafer) -> None:
    """Bring ``w``'s fields to canonical types (floats, frozensets, sorted tuples) and
    check every invariant; raise ``ConfigError`` naming the first bad field."""
    if not isinstance(w.name, str) or not w.name.strip():
        raise ConfigError(f"wafer.name must be a non-empty string, got {short(w.name)}")
    if not isinstance(w.source, str):
        raise ConfigError(f"wafer.source must be a string, got {short(w.source)}")
    k = int(_ranged(w, "coarsen_factor"))
    rows, cols = int(_ranged(w, "rows")), int(_ranged(w, "cols"))
    if isinstance(w.topology, str):
        try:
            _set(w, "topology", Topology(w.topology))
        except ValueError:
            choices = ", ".join(t.value for t in Topology)
            raise ConfigError(
                f"wafer.topology = {short(w.topology)} is unknown; choose one of {choices}"
            ) from None
    if not isinstance(w.topology, Topology):
        raise ConfigError(f"wafer.topology must be a Topology, got {short(w.topology)}")
    _fine_shape(w)
    fine_rows, fine_cols = w.fine_shape
    if fine_rows * fine_cols > MAX_CORES:
        grid = f"{rows:,} x {cols:,} grid" + (f" of {k} x {k}-core nodes" if k > 1 else "")
        raise ConfigError(
            f"wafer.rows x wafer.cols: a {grid} has {fine_rows * fine_cols:,} cores; "
            f"waferflow models up to {MAX_CORES:,} (describe a bigger machine by its coarse "
            "view: wafer.coarsen_factor)"
        )
    _set(w, "clock_hz", float(_ranged(w, "clock_hz")))
    _set(w, "peak_flops", _peaks(w.peak_flops, k, declared(type(w))["peak_flops"]))
    _ranged(w, "sram_bytes", k)
    _set(w, "sram_bandwidth", float(_ranged(w, "sram_bandwidth", k)))
    _set(w, "link", _linkspec(w.link, "link", k))

    # --- dies ---
    _ranged(w, "die_rows")
    _ranged(w, "die_cols")
    if w.rows % w.die_rows:
        raise ConfigError(
            f"{label('die_rows')} = {w.die_rows} does not divide wafer.rows = {w.rows}: "
            f"the grid is cut into equal dies; choose one of {divisors(w.rows)}"
        )
    if w.cols % w.die_cols:
        raise ConfigError(
            f"{label('die_cols')} = {w.die_cols} does not divide wafer.cols = {w.cols}: "
            f"the grid is cut into equal dies; choose one of {divisors(w.cols)}"
        )
    if w.d2d_link is not None:
        _set(w, "d2d_link", _linkspec(w.d2d_link, "dies.link", k))
    _set(w, "flow", _flow(w.flow))
    _set(w, "core", _core(w.core, k))
    _set(w, "memory", _memory(w.memory))
    if w.memory is not None and w.memory.block_bytes > w.sram_bytes:
        raise ConfigError(
            f"memory.block_bytes = {w.memory.block_bytes} is larger than a core's SRAM "
            f"(wafer.sram_bytes = {w.sram_bytes})"
        )
    if w.host is not None:
        _set(w, "host", _linkspec(w.host, "host", 1))  # one link per core, on any view

    _fabric(w)

    # --- faults ---
    dead = frozenset(_coord(c, label("dead_cores")) for c in _iterable(w.dead_cores, "dead_cores"))
    for r, c in sorted(dead):
        if not (0 <= r < w.rows and 0 <= c < w.cols):
            raise ConfigError(
                f"{label('dead_cores')}: core [{r}, {c}] is outside the {w.rows} x {w.cols} grid "
                f"(rows 0..{w.rows - 1}, cols 0..{w.cols - 1})"
            )
    if len(dead) >= w.rows * w.cols:
        raise ConfigError(
            f"{label('dead_cores')}: all {w.rows * w.cols} cores are dead; keep at least one alive"
        )
    _set(w, "dead_cores", dead)

    links: set[tuple[Coord, Coord]] = set()
    for pair in _iterable(w.dead_links, "dead_links"):
        where = label("dead_links")
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ConfigError(f"{where}: a link is written [[r, c], [r, c]], got {short(pair)}")
        a, b = _coord(pair[0], where), _coord(pair[1], where)
        for r, c in (a, b):
            if not (0 <= r < w.rows and 0 <= c < w.cols):
                raise ConfigError(
                    f"{where}: link {list(a)}-{list(b)} leaves the {w.rows} x {w.cols} grid"
                )
        if a == b:
            raise ConfigError(f"{where}: link {list(a)}-{list(b)} joins a core to itself")
        if not w.is_adjacent(a, b):
            raise ConfigError(
                f"{where}: cores {list(a)} and {list(b)} are not neighbours in a {w.topology.value}, "
                "so there is no link between them to kill"
            )
        links.add((min(a, b), max(a, b)))
    _set(w, "dead_links", frozenset(links))

    _set(w, "partial_cores", _partials(w, dead))


def _iterable(value: object, attr: str) -> Iterable[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigError(f"{label(attr)} must be a list, got {short(value)}")
    return value


def _fine_shape(w: Wafer) -> None:
    """``fine_rows`` / ``fine_cols`` of a ragged coarse view: the last row (column) of
    nodes holds 1..k fine rows (columns). Normalised to 0 when k divides them."""
    k = w.coarsen_factor
    for attr, n, grid in (("fine_rows", w.rows, "wafer.rows"), ("fine_cols", w.cols, "wafer.cols")):
        fine = int(_ranged(w, attr))
        if fine == n * k:
            _set(w, attr, 0)  # not ragged: one spelling only
        elif fine and not (n - 1) * k < fine <= n * k:
            raise ConfigError(
                f"{label(attr)} = {fine} does not fit {grid} = {n} nodes of a {k} x {k} coarse "
                f"view (wafer.coarsen_factor = {k}): the fine grid has {(n - 1) * k + 1}.."
                f"{n * k} {attr[5:]} (0 when it has exactly {n * k})"
            )


def _partials(w: Wafer, dead: frozenset[Coord]) -> tuple[tuple[Coord, int], ...]:
    where = label("partial_cores")
    full = w.coarsen_factor**2
    ragged = bool(w.fine_rows or w.fine_cols)
    out: dict[Coord, int] = {}
    for item in _iterable(w.partial_cores, "partial_cores"):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ConfigError(
                f"{where}: entries are ((row, col), alive fine cores), got {short(item)}"
            )
        coord = _coord(item[0], where)
        if not (0 <= coord[0] < w.rows and 0 <= coord[1] < w.cols):
            raise ConfigError(
                f"{where}: node {list(coord)} is outside the {w.rows} x {w.cols} grid"
            )
        if coord in dead or coord in out:
            raise ConfigError(f"{where}: node {list(coord)} is listed twice or is also dead")
        if full == 1:
            raise ConfigError(
                f"{where}: only a coarse view (wafer.coarsen_factor > 1) has partly dead nodes"
            )
        out[coord] = _int(item[1], f"{where} {list(coord)}", 1)
        if out[coord] >= full:
            raise ConfigError(
                f"{where}: node {list(coord)} has {out[coord]} alive fine cores; a partly dead "
                f"node of a {w.coarsen_factor} x {w.coarsen_factor} coarse view has 1..{full - 1}"
            )
        if ragged:
            h, c = w.node_shape(coord)
            if out[coord] > h * c:
                raise ConfigError(
                    f"{where}: node {list(coord)} has {out[coord]} alive fine cores but covers "
                    f"only {h} x {c} = {h * c} on the ragged edge of the grid (wafer.fine_rows "
                    f"= {w.fine_shape[0]}, wafer.fine_cols = {w.fine_shape[1]}); give 1..{h * c}"
                )
    if ragged:  # a healthy ragged node still holds fewer than k**2 fine cores: list it
        rows = range(w.rows) if w.fine_cols else ()
        cols = range(w.cols) if w.fine_rows else ()
        edge = {(r, w.cols - 1) for r in rows} | {(w.rows - 1, c) for c in cols}
        for node in edge - dead - out.keys():
            h, c = w.node_shape(node)
            out[node] = h * c
    return tuple(sorted(out.items()))


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))

"""Normalisation and validation of a ``Wafer``, run by ``Wafer.__post_init__``.

Every message names the field by its TOML path (``dies.rows``, ``link.bandwidth``)
and, where the Python attribute is spelled differently, by that too, so the same
message serves a TOML file and a ``Wafer(...)`` call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from waferflow.errors import ConfigError
from waferflow.ir.dtypes import DType
from waferflow.ir.target.parts import (
    CORE_RATE_GROUPS,
    Coord,
    CoreModel,
    FlowControl,
    LinkSpec,
    MemoryModel,
    Topology,
)

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
        raise ConfigError(f"{where} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{where} must be >= {minimum}, got {value}")
    return value


def _number(value: object, where: str, *, positive: bool, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where} must be a number in {unit}, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ConfigError(f"{where} must be finite, got {value!r}")
    if positive and v <= 0:
        raise ConfigError(f"{where} must be positive (in {unit}), got {value!r}")
    if not positive and v < 0:
        raise ConfigError(f"{where} must be >= 0 (in {unit}), got {value!r}")
    return v


def _coord(value: object, where: str) -> Coord:
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or any(isinstance(x, bool) or not isinstance(x, int) for x in value)
    ):
        raise ConfigError(f"{where}: a core is written [row, col] with two integers, got {value!r}")
    return (value[0], value[1])


def _linkspec(value: object, where: str) -> LinkSpec:
    if not isinstance(value, LinkSpec):
        raise ConfigError(f"{where} must be a LinkSpec, got {type(value).__name__}")
    bw = _number(value.bandwidth, f"{where}.bandwidth", positive=True, unit="bytes/s")
    lat = _number(value.latency, f"{where}.latency", positive=False, unit="seconds")
    return LinkSpec(bw, lat)


def _peaks(value: object) -> tuple[tuple[DType, float], ...]:
    where = label("peak_flops")
    items: Iterable[Any]
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, tuple | list):
        items = value
    else:
        raise ConfigError(f"{where} must map dtypes to FLOP/s, got {value!r}")
    out: dict[DType, float] = {}
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ConfigError(f"{where}: entries are (dtype, FLOP/s) pairs, got {item!r}")
        key, rate = item
        if isinstance(key, str):
            try:
                key = DType.parse(key)
            except ValueError as e:
                raise ConfigError(f"{where}: {e}") from None
        if not isinstance(key, DType):
            raise ConfigError(f"{where}: {key!r} is not a dtype")
        if key in out:
            raise ConfigError(f"{where}.{key.value} is given twice")
        out[key] = _number(rate, f"{where}.{key.value}", positive=True, unit="FLOP/s")
    if not out:
        raise ConfigError(f"{where} is empty: give at least one rate, e.g. f32 = 1e12")
    order = list(DType)
    return tuple(sorted(out.items(), key=lambda kv: order.index(kv[0])))


def _flow(value: object) -> FlowControl | None:
    if value is None:
        return None
    if not isinstance(value, FlowControl):
        raise ConfigError(f"flow must be a FlowControl or None, got {type(value).__name__}")
    minimum = {
        "packet_bytes": 1,
        "header_packets": 0,
        "buffers_per_core": 0,
        "retry_cycles": 0,
        "max_streams": 0,
    }
    for f in fields(FlowControl):
        v = getattr(value, f.name)
        if f.name == "handshake":
            if not isinstance(v, bool):
                raise ConfigError(f"flow.handshake must be true or false, got {v!r}")
        else:
            _int(v, f"flow.{f.name}", minimum[f.name])
    return value


def _core(value: object) -> CoreModel | None:
    if value is None:
        return None
    if not isinstance(value, CoreModel):
        raise ConfigError(f"core must be a CoreModel or None, got {type(value).__name__}")
    if not isinstance(value.overlap, bool):
        raise ConfigError(f"core.overlap must be true or false, got {value.overlap!r}")
    _int(value.fixed_cycles, "core.fixed_cycles", 0)
    _int(value.read_ports, "core.read_ports", 1)
    _int(value.write_ports, "core.write_ports", 1)
    bw = _number(value.port_bandwidth, "core.port_bandwidth", positive=True, unit="bytes/s")
    rates: dict[str, float] = {}
    items = value.rates.items() if isinstance(value.rates, Mapping) else value.rates
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ConfigError(f"core.rates: entries are (op group, FLOP/s) pairs, got {item!r}")
        group, rate = item
        if group not in CORE_RATE_GROUPS:
            raise ConfigError(
                f"core.rates.{group}: unknown op group; use one of {', '.join(CORE_RATE_GROUPS)}"
            )
        if group in rates:
            raise ConfigError(f"core.rates.{group} is given twice")
        if isinstance(rate, int | float) and not isinstance(rate, bool) and math.isinf(rate):
            if rate < 0:
                raise ConfigError(f"core.rates.{group} must be positive, got {rate!r}")
            rates[group] = math.inf  # no compute cycles of its own
        else:
            rates[group] = _number(rate, f"core.rates.{group}", positive=True, unit="FLOP/s")
    return CoreModel(
        value.overlap, value.fixed_cycles, value.read_ports, value.write_ports, bw,
        tuple(sorted(rates.items())),
    )  # fmt: skip


def _memory(value: object) -> MemoryModel | None:
    if value is None:
        return None
    if not isinstance(value, MemoryModel):
        raise ConfigError(f"memory must be a MemoryModel or None, got {type(value).__name__}")
    _int(value.block_bytes, "memory.block_bytes", 0)
    _int(value.lookahead, "memory.lookahead", 0)
    if not isinstance(value.first_fit, bool):
        raise ConfigError(f"memory.first_fit must be true or false, got {value.first_fit!r}")
    if value.first_fit and value.block_bytes == 0:
        raise ConfigError("memory.first_fit places buffers in blocks: give memory.block_bytes too")
    return value


def normalize_and_validate(w: Wafer) -> None:
    """Bring ``w``'s fields to canonical types (floats, frozensets, sorted tuples) and
    check every invariant; raise ``ConfigError`` naming the first bad field."""
    if not isinstance(w.name, str) or not w.name.strip():
        raise ConfigError(f"wafer.name must be a non-empty string, got {w.name!r}")
    if not isinstance(w.source, str):
        raise ConfigError(f"wafer.source must be a string, got {w.source!r}")
    _int(w.rows, "wafer.rows", 1)
    _int(w.cols, "wafer.cols", 1)
    if isinstance(w.topology, str):
        try:
            _set(w, "topology", Topology(w.topology))
        except ValueError:
            choices = ", ".join(t.value for t in Topology)
            raise ConfigError(
                f"wafer.topology = {w.topology!r} is unknown; choose one of {choices}"
            ) from None
    if not isinstance(w.topology, Topology):
        raise ConfigError(f"wafer.topology must be a Topology, got {w.topology!r}")
    _set(w, "clock_hz", _number(w.clock_hz, "wafer.clock_hz", positive=True, unit="Hz"))
    _set(w, "peak_flops", _peaks(w.peak_flops))
    _int(w.sram_bytes, "wafer.sram_bytes", 1)
    _set(
        w,
        "sram_bandwidth",
        _number(w.sram_bandwidth, "wafer.sram_bandwidth", positive=True, unit="bytes/s"),
    )
    _set(w, "link", _linkspec(w.link, "link"))
    _int(w.coarsen_factor, label("coarsen_factor"), 1)
    _fine_shape(w)

    # --- dies ---
    _int(w.die_rows, label("die_rows"), 1)
    _int(w.die_cols, label("die_cols"), 1)
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
        _set(w, "d2d_link", _linkspec(w.d2d_link, "dies.link"))
    _set(w, "flow", _flow(w.flow))
    _set(w, "core", _core(w.core))
    _set(w, "memory", _memory(w.memory))
    if w.memory is not None and w.memory.block_bytes > w.sram_bytes:
        raise ConfigError(
            f"memory.block_bytes = {w.memory.block_bytes} is larger than a core's SRAM "
            f"(wafer.sram_bytes = {w.sram_bytes})"
        )
    if w.host is not None:
        _set(w, "host", _linkspec(w.host, "host"))

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
            raise ConfigError(f"{where}: a link is written [[r, c], [r, c]], got {pair!r}")
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
        raise ConfigError(f"{label(attr)} must be a list, got {value!r}")
    return value


def _fine_shape(w: Wafer) -> None:
    """``fine_rows`` / ``fine_cols`` of a ragged coarse view: the last row (column) of
    nodes holds 1..k fine rows (columns). Normalised to 0 when k divides them."""
    k = w.coarsen_factor
    for attr, n, grid in (("fine_rows", w.rows, "wafer.rows"), ("fine_cols", w.cols, "wafer.cols")):
        fine = _int(getattr(w, attr), label(attr), 0)
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
            raise ConfigError(f"{where}: entries are ((row, col), alive fine cores), got {item!r}")
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

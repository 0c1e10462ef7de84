"""Wafers as TOML files: ``load_wafer``, ``wafer_to_toml``, ``dump_wafer``, ``get_wafer``.

Schema (every table and key; ``presets/example.toml`` is a commented example)::

    preset = "wse2"          # optional: start from a preset (or a .toml path, relative
                             # to this file) and override only the keys given below

    [wafer]
    name = "my-wafer"        # default: the file's name without .toml
    rows = 64                # cores per column of the grid
    cols = 64                # cores per row
    topology = "mesh"        # mesh | torus | crossbar | tree (a tree of switches)
    clock_hz = 1e9           # Hz
    sram_bytes = 1048576     # bytes per core (an integer)
    sram_bandwidth = 1e12    # bytes/s per core
    coarsen_factor = 1       # k when the file describes a k x k coarse view
    fine_rows = 0            # coarse views whose k does not divide the fine grid: its
    fine_cols = 0            #   rows / cols (0 = rows * k, cols * k)
    source = "..."           # where the figures come from

    [wafer.peak_flops]       # FLOP/s per core, by dtype (f32, bf16, f16, f64, i8, ...)
    f32 = 1e12
    bf16 = 4e12

    [link]                   # one direction of an on-die link
    bandwidth = 1e11         # bytes/s
    latency = 1e-9           # seconds per hop

    [dies]                   # the grid is cut into rows x cols equal dies
    rows = 4                 # must divide wafer.rows (default 1)
    cols = 4                 # must divide wafer.cols (default 1)

    [dies.link]              # links crossing a die boundary (default: same as [link])
    bandwidth = 5e10
    latency = 5e-9

    [faults]
    dead_cores = [[0, 1], [5, 7]]           # [row, col]
    dead_links = [[[0, 0], [0, 1]]]         # undirected, between neighbouring cores
    dead_cores_each_die = [[0, 0]]          # [row, col] inside a die, dead in every die
    random_dead_fraction = 0.01             # then kill cores at random up to this
    seed = 0                                #   fraction of all cores, with this seed
    partial_cores = [[2, 3, 12]]            # coarse views: [row, col, alive fine cores]

    [flow]                   # packetisation / handshake (omit the table for none)
    packet_bytes = 128
    header_packets = 1
    buffers_per_core = 0     # 0 = unbounded
    handshake = true         # req / ack before data (AMCoDA)
    retry_cycles = 5
    max_streams = 4          # 0 = unlimited

    [core]                   # how a core times an op (omit the table for the roofline)
    overlap = false          # reads, compute, writes in turn (sum) or overlapped (max)
    fixed_cycles = 2         # per op pass
    read_ports = 4           # operands read at once
    write_ports = 1          # results written at once
    port_bandwidth = 1.28e10 # bytes/s per port
    source = "..."           # where its figures come from, or that they are assumptions

    [core.rates]             # FLOP/s per op group (inf: no compute cycles of its own);
    pooling = 1.024e11       #   groups not listed use the array / vector unit below,
    elementwise = inf        #   else wafer.peak_flops

    [core.array]             # a MAC array: matmuls and convolutions from their shape
    rows = 32                #   (not with core.rates.matmul)
    cols = 32
    count = 1                # arrays per core
    dataflow = "weight"      # weight | output | input (what stays in the PEs)

    [core.array.macs_per_pe] # MACs per PE per cycle by dtype (0: not on the array)
    bf16 = 1

    [core.vector]            # a vector unit: the other op groups
    lanes = 32

    [core.vector.ops_per_lane]  # element ops per lane per cycle by dtype (an FMA is one)
    bf16 = 1

    [memory]                 # how SRAM is handed out (omit for exact bytes, reported only)
    block_bytes = 262144     # buffers take whole blocks
    lookahead = 5            # actors whose buffers a core allocates ahead (0: at start)
    first_fit = true         # contiguous first-fit blocks; an actor waits until they fit

    [host]                   # the host's own link to every core (omit for no host)
    bandwidth = 1.28e10
    latency = 1e-8

    [fabric]                 # topology "tree" only: the switch levels, bottom first
    fanout = [4, 4, 4]       # cores per level-1 switch, level-1 switches per level-2, ...
    bandwidth = [1e12, 2e12, 4e12]   # each link below a switch of that level (bytes/s)
    latency = [5e-9, 5e-9, 5e-9]     # seconds per hop ([link] is level 0's: omit it)

Units: plain numbers are SI base units (bytes, bytes/s, seconds, Hz, FLOP/s). Any
quantity may instead be a string with a unit, e.g. ``"12.8 GB/s"``, ``"10 ns"``,
``"1 cycle"``, ``"48 KiB"``, ``"100 MHz"``, ``"125 PFLOP/s"``, ``"2048 FLOP/cycle"``
(see ``units.py``; cycles use ``wafer.clock_hz``). Files that waferflow writes use
plain SI numbers, with the readable figure in a comment.

With ``preset``, tables merge key by key into the preset (``[wafer.peak_flops]``
per dtype too); a list such as ``faults.dead_cores`` replaces the preset's list.

Every error is a ``ConfigError`` naming the file and the field's TOML path: unknown
keys (with a did-you-mean), wrong types, bad values, malformed TOML (with the line
and column).
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from pathlib import Path
from typing import Any

from waferflow.errors import ConfigError, FormatError
from waferflow.fileio import decode_text, os_error_text, read_limited, short, write_text
from waferflow.ir.dtypes import DType
from waferflow.ir.target import catalog
from waferflow.ir.target.fabric import FabricLevel
from waferflow.ir.target.parts import CORE_RATE_GROUPS, Coord, FlowControl, LinkSpec, Topology
from waferflow.ir.target.ranges import MAX_CORES, check_value, declared
from waferflow.ir.target.toml_core import core_memory_doc, parse_core, parse_memory
from waferflow.ir.target.units import Kind, fmt_bytes, fmt_si, quantity_float, quantity_int
from waferflow.ir.target.wafer import Wafer

__all__ = [
    "dump_wafer",
    "get_wafer",
    "load_wafer",
    "loads_toml",
    "parse_wafer_toml",
    "wafer_from_doc",
    "wafer_to_doc",
    "wafer_to_toml",
]

_LINK = {"bandwidth": None, "latency": None}
_SCHEMA: dict[str, Any] = {
    "preset": None,
    "wafer": {
        "name": None,
        "rows": None,
        "cols": None,
        "topology": None,
        "clock_hz": None,
        "sram_bytes": None,
        "sram_bandwidth": None,
        "coarsen_factor": None,
        "fine_rows": None,
        "fine_cols": None,
        "source": None,
        "peak_flops": "dtypes",
    },
    "link": _LINK,
    "dies": {"rows": None, "cols": None, "link": _LINK},
    "faults": {
        "dead_cores": None,
        "dead_links": None,
        "dead_cores_each_die": None,
        "random_dead_fraction": None,
        "seed": None,
        "partial_cores": None,
    },
    "flow": {
        "packet_bytes": None,
        "header_packets": None,
        "buffers_per_core": None,
        "handshake": None,
        "retry_cycles": None,
        "max_streams": None,
    },
    "core": {
        "overlap": None,
        "fixed_cycles": None,
        "read_ports": None,
        "write_ports": None,
        "port_bandwidth": None,
        "rates": "rates",
        "array": {
            "rows": None,
            "cols": None,
            "count": None,
            "dataflow": None,
            "macs_per_pe": "dtypes",
        },
        "vector": {"lanes": None, "ops_per_lane": "dtypes"},
        "source": None,
    },
    "memory": {"block_bytes": None, "lookahead": None, "first_fit": None},
    "host": _LINK,
    "fabric": {"fanout": None, "bandwidth": None, "latency": None},
}


# --- reading ---------------------------------------------------------------------------


def load_wafer(path: str | Path) -> Wafer:
    """Read a wafer TOML file (see the module docstring for the schema)."""
    return _load(Path(path), ())


def parse_wafer_toml(text: str, origin: str = "<string>", base_dir: Path | None = None) -> Wafer:
    """Read a wafer from TOML text; ``origin`` names it in errors and is the default
    name; ``base_dir`` resolves a relative ``preset = "x.toml"`` (default: cwd)."""
    default = "wafer" if origin.startswith("<") else Path(origin).stem
    return _parse(text, origin, base_dir or Path.cwd(), (), default_name=default)


def get_wafer(name_or_path: str | Path | Wafer) -> Wafer:
    """A ``Wafer`` from a preset name (see ``list_presets``), a ``.toml`` path, or a Wafer;
    ``NAME@Kx`` is the K x K coarse view of either (``wse2@16x``)."""
    if isinstance(name_or_path, Wafer):
        return name_or_path
    if isinstance(name_or_path, Path):
        return load_wafer(name_or_path)
    if isinstance(name_or_path, str):
        text = name_or_path.strip()
        base, factor = catalog.split_view(text)
        if factor is not None:  # a view: wse2@16x
            return get_wafer(base).coarsen(factor)
        if text.endswith(".toml") or "/" in text or os.sep in text:
            return load_wafer(text)
        return _load(catalog.preset_path(text), ())
    raise ConfigError(
        f"a wafer is a preset name, a .toml path or a Wafer, got {type(name_or_path).__name__}"
    )


def _load(path: Path, stack: tuple[Path, ...]) -> Wafer:
    try:
        data = read_limited(path, "wafer file")
    except FileNotFoundError:
        raise ConfigError(f"wafer file {path} does not exist") from None
    except OSError as e:  # a folder, no permission: in words, naming the file
        raise ConfigError(f"cannot read the wafer file: {os_error_text(e)}") from None
    try:
        text = decode_text(data, str(path))
    except FormatError as e:
        raise ConfigError(str(e)) from None
    return _parse(text, str(path), path.parent, (*stack, path.resolve()), default_name=path.stem)


def _parse(
    text: str, origin: str, base_dir: Path, stack: tuple[Path, ...], default_name: str
) -> Wafer:
    return _from_doc(loads_toml(text, origin), origin, base_dir, stack, default_name)


def loads_toml(text: str, origin: str) -> dict[str, Any]:
    """``text`` parsed as TOML; a ``ConfigError`` naming ``origin`` for any malformed
    input (bad syntax, an integer past Python's digit limit, nesting too deep)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{origin}: malformed TOML: {e}") from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise ConfigError(f"{origin}: malformed TOML: {short(str(e), 100)}") from None
    except RecursionError:
        raise ConfigError(f"{origin}: malformed TOML: arrays or tables nested too deeply") from None


def wafer_from_doc(
    doc: dict[str, Any], origin: str, base_dir: Path | None = None, default_name: str = "wafer"
) -> Wafer:
    """A wafer from a TOML document already read (nested dicts, as ``tomllib`` gives),
    validated exactly as a wafer file: e.g. ``{"preset": "wse2", "dies": {"link":
    {"bandwidth": "2 B/cycle"}}}``. ``origin`` prefixes every error."""
    return _from_doc(doc, origin, base_dir or Path.cwd(), (), default_name)


def _from_doc(
    doc: dict[str, Any], origin: str, base_dir: Path, stack: tuple[Path, ...], default_name: str
) -> Wafer:
    try:
        _check_keys(doc, _SCHEMA, "")
        user = dict(doc)
        preset = user.pop("preset", None)
        base: Wafer | None = None
        if preset is not None:
            base = _resolve_preset(preset, base_dir, stack)
            merged = _merge(wafer_to_doc(base), user)
        else:
            merged = user
        return _build(merged, user, base, origin, default_name)
    except ConfigError as e:
        raise ConfigError(f"{origin}: {e}") from None


def _resolve_preset(preset: object, base_dir: Path, stack: tuple[Path, ...]) -> Wafer:
    if not isinstance(preset, str):
        raise ConfigError(f"preset must be a preset name or a .toml path, got {short(preset)}")
    if preset.endswith(".toml") or "/" in preset:
        path = base_dir / preset
    else:
        path = catalog.preset_path(preset)
    if path.resolve() in stack:
        chain = " -> ".join(p.name for p in (*stack, path))
        raise ConfigError(f"preset = {short(preset)} refers back to itself ({chain})")
    return _load(path, stack)


def _suggest(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key[:100], known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_keys(table: dict[str, Any], schema: dict[str, Any], prefix: str) -> None:
    for key, value in table.items():
        path = f"{prefix}{key}"
        if key not in schema:
            known = sorted(schema)
            where = f"[{prefix[:-1]}]" if prefix else "the top level"
            raise ConfigError(
                f"unknown key {short(path)}{_suggest(key, known)}. Keys allowed in {where}: {', '.join(known)}"
            )
        sub = schema[key]
        if sub is None:
            if isinstance(value, dict):
                raise ConfigError(f"{path} is a value, not a table")
        elif not isinstance(value, dict):
            raise ConfigError(f"{path} must be a table ([{path}]), got {short(value)}")
        elif sub == "rates":
            for g, rate in value.items():
                if g not in CORE_RATE_GROUPS:
                    raise ConfigError(
                        f"unknown op group {path}.{short(g)}{_suggest(g, list(CORE_RATE_GROUPS))}. "
                        f"Groups: {', '.join(CORE_RATE_GROUPS)}"
                    )
                if isinstance(rate, dict):
                    raise ConfigError(f"{path}.{g} is a value, not a table")
        elif sub == "dtypes":
            names = [d.value for d in DType]
            for d, rate in value.items():
                if d not in names:
                    raise ConfigError(
                        f"unknown dtype {path}.{d}{_suggest(d, names)}. Known dtypes: {', '.join(names)}"
                    )
                if isinstance(rate, dict):
                    raise ConfigError(f"{path}.{d} is a value, not a table")
        else:
            _check_keys(value, sub, f"{path}.")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _leaf_paths(table: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _leaf_paths(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def _table(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return doc.get(name, {})


def _required(table: dict[str, Any], path: str, what: str) -> Any:
    key = path.rsplit(".", 1)[-1]
    if key not in table:
        raise ConfigError(f"missing {path} ({what})")
    return table[key]


def _int(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{path} must be an integer, got {type(value).__name__} {short(value)}")
    return value


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{path} must be a string, got {type(value).__name__} {short(value)}")
    return value


def _list(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(f"{path} must be a list, got {type(value).__name__} {short(value)}")
    return value


def _pair(value: object, path: str) -> Coord:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or any(isinstance(x, bool) or not isinstance(x, int) for x in value)
    ):
        raise ConfigError(
            f"{path}: a core is written [row, col] with two integers, got {short(value)}"
        )
    return (value[0], value[1])


def _link(table: dict[str, Any], path: str, clock: float) -> LinkSpec:
    bw = _required(table, f"{path}.bandwidth", "bytes/s per direction")
    lat = _required(table, f"{path}.latency", "seconds per hop")
    return LinkSpec(
        quantity_float(bw, Kind.BANDWIDTH, f"{path}.bandwidth", clock),
        quantity_float(lat, Kind.TIME, f"{path}.latency", clock),
    )


def _fabric(table: dict[str, Any], clock: float) -> tuple[FabricLevel, ...]:
    """``[fabric]``: ``fanout``, ``bandwidth`` and ``latency``, one entry per level."""
    fans = _list(_required(table, "fabric.fanout", "children per switch, bottom level first"),
                 "fabric.fanout")  # fmt: skip
    cols = {}
    for key, kind in (("bandwidth", Kind.BANDWIDTH), ("latency", Kind.TIME)):
        items = _list(_required(table, f"fabric.{key}", f"one {key} per level"), f"fabric.{key}")
        if len(items) != len(fans):
            raise ConfigError(
                f"fabric.{key} has {len(items)} entries for {len(fans)} levels (fabric.fanout)"
            )
        cols[key] = [quantity_float(v, kind, f"fabric.{key}[{i}]", clock)
                     for i, v in enumerate(items)]  # fmt: skip
    return tuple(
        FabricLevel(_int(f, f"fabric.fanout[{i}]"), cols["bandwidth"][i], cols["latency"][i])
        for i, f in enumerate(fans)
    )


def _build(
    doc: dict[str, Any], user: dict[str, Any], base: Wafer | None, origin: str, default_name: str
) -> Wafer:
    wt = _table(doc, "wafer")
    clock = quantity_float(_required(wt, "wafer.clock_hz", "Hz"), Kind.FREQUENCY, "wafer.clock_hz")
    # checked now: "N cycles" and "N B/cycle" below are converted with it
    check_value(clock, "wafer.clock_hz", declared(Wafer)["clock_hz"])
    topo_name = _str(_required(wt, "wafer.topology", "mesh, torus or crossbar"), "wafer.topology")
    choices = [t.value for t in Topology]
    if topo_name not in choices:
        raise ConfigError(
            f"wafer.topology = {short(topo_name)} is unknown{_suggest(topo_name, choices)}. "
            f"Choose one of {', '.join(choices)}"
        )
    peaks_table = _required(wt, "wafer.peak_flops", "a table of FLOP/s per core by dtype")
    peaks = tuple(
        (DType(d), quantity_float(v, Kind.FLOPS, f"wafer.peak_flops.{d}", clock))
        for d, v in peaks_table.items()
    )
    rows = _int(_required(wt, "wafer.rows", "cores per column"), "wafer.rows")
    cols = _int(_required(wt, "wafer.cols", "cores per row"), "wafer.cols")

    dies = _table(doc, "dies")
    die_rows = _int(dies.get("rows", 1), "dies.rows")
    die_cols = _int(dies.get("cols", 1), "dies.cols")
    d2d = _link(dies["link"], "dies.link", clock) if "link" in dies else None

    faults = _table(doc, "faults")
    dead: set[Coord] = {
        _pair(c, "faults.dead_cores")
        for c in _list(faults.get("dead_cores", []), "faults.dead_cores")
    }
    if "dead_cores_each_die" in faults:
        dead |= _each_die(faults["dead_cores_each_die"], rows, cols, die_rows, die_cols)
    dead_links = []
    for item in _list(faults.get("dead_links", []), "faults.dead_links"):
        if not isinstance(item, list) or len(item) != 2:
            raise ConfigError(
                f"faults.dead_links: a link is written [[r, c], [r, c]], got {short(item)}"
            )
        dead_links.append(
            (_pair(item[0], "faults.dead_links"), _pair(item[1], "faults.dead_links"))
        )
    partial = []
    for item in _list(faults.get("partial_cores", []), "faults.partial_cores"):
        if not isinstance(item, list) or len(item) != 3:
            raise ConfigError(
                f"faults.partial_cores: entries are [row, col, alive fine cores], got {short(item)}"
            )
        partial.append(
            (_pair(item[:2], "faults.partial_cores"), _int(item[2], "faults.partial_cores"))
        )

    flow = None
    if "flow" in doc:
        ft = doc["flow"]
        kwargs: dict[str, Any] = {}
        for key, value in ft.items():
            path = f"flow.{key}"
            if key == "handshake":
                if not isinstance(value, bool):
                    raise ConfigError(f"{path} must be true or false, got {short(value)}")
                kwargs[key] = value
            elif key == "packet_bytes":
                kwargs[key] = quantity_int(value, Kind.BYTES, path, clock)
            else:
                kwargs[key] = _int(value, path)
        flow = FlowControl(**kwargs)

    core = parse_core(doc["core"], clock) if "core" in doc else None
    memory = parse_memory(doc["memory"], clock) if "memory" in doc else None
    host = _link(doc["host"], "host", clock) if "host" in doc else None
    fabric = _fabric(doc["fabric"], clock) if "fabric" in doc else ()
    if "link" in doc or not fabric:
        link = _link(_required(doc, "link", "the on-die link table [link]"), "link", clock)
    else:  # a tree's link is its cores' port, the first level's
        link = LinkSpec(fabric[0].bandwidth, fabric[0].latency)

    name = wt.get("name") if "name" in _table(user, "wafer") or base is None else None
    source = wt.get("source", "")
    if base is not None and "source" not in _table(user, "wafer"):
        changed = ", ".join(_leaf_paths(user)) or "none"
        source = f"preset {base.name} with overrides from {Path(origin).name} ({changed}); preset source: {base.source}"
    wafer = Wafer(
        name=_str(name if name is not None else default_name, "wafer.name"),
        rows=rows,
        cols=cols,
        topology=Topology(topo_name),
        clock_hz=clock,
        peak_flops=peaks,
        sram_bytes=quantity_int(
            _required(wt, "wafer.sram_bytes", "bytes per core"), Kind.BYTES, "wafer.sram_bytes"
        ),
        sram_bandwidth=quantity_float(
            _required(wt, "wafer.sram_bandwidth", "bytes/s per core"),
            Kind.BANDWIDTH,
            "wafer.sram_bandwidth",
            clock,
        ),
        link=link,
        fabric=fabric,
        die_rows=die_rows,
        die_cols=die_cols,
        d2d_link=d2d,
        dead_cores=frozenset(dead),
        dead_links=frozenset(dead_links),
        flow=flow,
        core=core,
        memory=memory,
        host=host,
        coarsen_factor=_int(wt.get("coarsen_factor", 1), "wafer.coarsen_factor"),
        fine_rows=_int(wt.get("fine_rows", 0), "wafer.fine_rows"),
        fine_cols=_int(wt.get("fine_cols", 0), "wafer.fine_cols"),
        source=_str(source, "wafer.source"),
        partial_cores=tuple(partial),
    )
    if "random_dead_fraction" in faults:
        fraction = faults["random_dead_fraction"]
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ConfigError(
                f"faults.random_dead_fraction must be a number in [0, 1), got {short(fraction)}"
            )
        wafer = wafer.with_dead_cores(float(fraction), _int(faults.get("seed", 0), "faults.seed"))
    elif "seed" in faults:
        raise ConfigError("faults.seed is given without faults.random_dead_fraction")
    return wafer


def _each_die(value: object, rows: int, cols: int, die_rows: int, die_cols: int) -> set[Coord]:
    path = "faults.dead_cores_each_die"
    if die_rows < 1 or die_cols < 1 or rows % die_rows or cols % die_cols:
        return set()  # the Wafer reports the bad die grid itself
    if rows * cols > MAX_CORES:
        return set()  # and a grid too big to model, before anything is enumerated
    h, w = rows // die_rows, cols // die_cols
    each: set[Coord] = set()
    for item in _list(value, path):
        r, c = _pair(item, path)
        if not (0 <= r < h and 0 <= c < w):
            raise ConfigError(f"{path}: core [{r}, {c}] is outside a {h} x {w} die")
        each.add((r, c))
    return {
        (i * h + r, j * w + c) for r, c in each for i in range(die_rows) for j in range(die_cols)
    }


# --- writing ---------------------------------------------------------------------------


def wafer_to_doc(w: Wafer) -> dict[str, Any]:
    """The wafer as a TOML document (nested dicts, SI numbers), as ``wafer_to_toml``
    writes it and as a ``preset =`` file is merged onto."""
    wafer: dict[str, Any] = {
        "name": w.name,
        "rows": w.rows,
        "cols": w.cols,
        "topology": w.topology.value,
        "clock_hz": w.clock_hz,
        "sram_bytes": w.sram_bytes,
        "sram_bandwidth": w.sram_bandwidth,
    }
    if w.coarsen_factor != 1:
        wafer["coarsen_factor"] = w.coarsen_factor
    if w.fine_rows:
        wafer["fine_rows"] = w.fine_rows
    if w.fine_cols:
        wafer["fine_cols"] = w.fine_cols
    wafer["source"] = w.source
    wafer["peak_flops"] = {d.value: rate for d, rate in w.peak_flops}
    doc: dict[str, Any] = {
        "wafer": wafer,
        "link": {"bandwidth": w.link.bandwidth, "latency": w.link.latency},
        "dies": {"rows": w.die_rows, "cols": w.die_cols},
    }
    if w.d2d_link is not None:
        doc["dies"]["link"] = {"bandwidth": w.d2d_link.bandwidth, "latency": w.d2d_link.latency}
    faults: dict[str, Any] = {}
    if w.dead_cores:
        faults["dead_cores"] = [list(c) for c in sorted(w.dead_cores)]
    if w.dead_links:
        faults["dead_links"] = [[list(a), list(b)] for a, b in sorted(w.dead_links)]
    if w.partial_cores:
        faults["partial_cores"] = [[c[0], c[1], n] for c, n in w.partial_cores]
    if faults:
        doc["faults"] = faults
    if w.flow is not None:
        f = w.flow
        doc["flow"] = {
            "packet_bytes": f.packet_bytes,
            "header_packets": f.header_packets,
            "buffers_per_core": f.buffers_per_core,
            "handshake": f.handshake,
            "retry_cycles": f.retry_cycles,
            "max_streams": f.max_streams,
        }
    doc.update(core_memory_doc(w))
    if w.host is not None:
        doc["host"] = {"bandwidth": w.host.bandwidth, "latency": w.host.latency}
    if w.fabric:
        doc["fabric"] = {
            "fanout": [lv.fanout for lv in w.fabric],
            "bandwidth": [lv.bandwidth for lv in w.fabric],
            "latency": [lv.latency for lv in w.fabric],
        }
    return doc


def _toml_str(s: str) -> str:
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)  # shortest round-tripping form; always has '.' or 'e'
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, list):
        items = [_toml_value(x) for x in v]
        if len(items) <= 8:
            return "[" + ", ".join(items) + "]"
        lines = [", ".join(items[i : i + 8]) for i in range(0, len(items), 8)]
        return "[\n  " + ",\n  ".join(lines) + ",\n]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _comment(path: str, v: Any) -> str:
    """The readable figure beside an SI number."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return ""
    leaf = path.rsplit(".", 1)[-1]
    if path == "wafer.clock_hz":
        return fmt_si(v, "Hz", 4)
    if path in ("wafer.sram_bytes", "memory.block_bytes"):
        return fmt_bytes(v)
    if leaf in ("bandwidth", "sram_bandwidth", "port_bandwidth"):
        return fmt_si(v, "B/s", 4)
    if leaf == "latency":
        return fmt_si(v, "s", 4)
    if path.startswith(("wafer.peak_flops.", "core.rates.")) and not math.isinf(v):
        return fmt_si(v, "FLOP/s", 4)
    return ""


def _write_table(lines: list[str], name: str, table: dict[str, Any]) -> None:
    lines.append(f"[{name}]")
    for key, value in table.items():
        if isinstance(value, dict):
            continue
        comment = _comment(f"{name}.{key}", value)
        lines.append(f"{key} = {_toml_value(value)}" + (f"  # {comment}" if comment else ""))
    for key, value in table.items():
        if isinstance(value, dict):
            lines.append("")
            _write_table(lines, f"{name}.{key}", value)


def wafer_to_toml(w: Wafer) -> str:
    """The wafer as TOML text that ``load_wafer`` reads back to an equal Wafer."""
    lines = [
        f"# Wafer {_toml_str(w.name)}, written by waferflow.",
        "# Plain numbers are SI units: bytes, bytes/s, seconds, Hz, FLOP/s.",
    ]
    for name, table in wafer_to_doc(w).items():
        lines.append("")
        _write_table(lines, name, table)
    return "\n".join(lines) + "\n"


def dump_wafer(w: Wafer, path: str | Path) -> None:
    """Write ``wafer_to_toml(w)`` to ``path`` (atomically)."""
    write_text(path, wafer_to_toml(w))

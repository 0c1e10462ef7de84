"""Wafer TOML files: round trips, units, field-level errors, presets and overrides."""

from __future__ import annotations

import dataclasses
import tomllib
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.errors import ConfigError
from waferflow.ir.dtypes import DType
from waferflow.ir.target import (
    FlowControl,
    LinkSpec,
    Topology,
    Wafer,
    dump_wafer,
    get_wafer,
    list_presets,
    load_wafer,
    parse_wafer_toml,
    wafer_to_toml,
)
from waferflow.ir.target.catalog import PRESET_DIR
from waferflow.ir.target.units import Kind, fmt_bytes, fmt_si, parse_quantity

MESH4 = (PRESET_DIR / "mesh4x4.toml").read_text()
MESH4_ROOFLINE = MESH4[: MESH4.index("[core]")]  # the test mesh without its core tables


def parse(text: str) -> Wafer:
    return parse_wafer_toml(text, origin="w.toml")


def error(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse(text)
    return str(e.value)


# --- round trips -------------------------------------------------------------------------


def test_presets_listed() -> None:
    assert list_presets() == [
        "amcoda",
        "dojo-d1",
        "dojo-tile",
        "fred",
        "fred-mesh",
        "mesh16x16",
        "mesh4x4",
        "mesh64x64",
        "torus8x8",
        "tpu-like",
        "wse2",
        "wse3",
    ]


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_round_trips(name: str, tmp_path: Path) -> None:
    w = get_wafer(name)
    assert w.name == name
    text = wafer_to_toml(w)
    assert parse(text) == w
    dump_wafer(w, tmp_path / "w.toml")
    again = load_wafer(tmp_path / "w.toml")
    assert again == w
    assert wafer_to_toml(again) == text  # the written form is stable


def test_faulty_coarse_wafer_round_trips() -> None:
    w = get_wafer("mesh64x64").with_dead_cores(0.6, seed=5).coarsen(2)
    assert w.partial_cores and w.dead_cores and w.dead_links
    assert parse(wafer_to_toml(w)) == w


def test_awkward_strings_round_trip() -> None:
    w = get_wafer("mesh4x4")
    for text in ['a "quoted" \\ name', "line\nbreak\ttab", "é中\U0001f600", "\x00\x1f\x7f"]:
        v = dataclasses.replace(w, name=text if text.strip() else "x", source=text)
        assert parse(wafer_to_toml(v)) == v


def test_written_toml_golden() -> None:
    assert wafer_to_toml(get_wafer("mesh64x64")) == (
        '# Wafer "mesh64x64", written by waferflow.\n'
        "# Plain numbers are SI units: bytes, bytes/s, seconds, Hz, FLOP/s.\n"
        "\n"
        "[wafer]\n"
        'name = "mesh64x64"\n'
        "rows = 64\n"
        "cols = 64\n"
        'topology = "mesh"\n'
        "clock_hz = 1000000000.0  # 1 GHz\n"
        "sram_bytes = 1048576  # 1 MiB\n"
        "sram_bandwidth = 1000000000000.0  # 1 TB/s\n"
        'source = "synthetic test machine (round numbers) with 4 x 4 dies"\n'
        "\n"
        "[wafer.peak_flops]\n"
        "f32 = 1000000000000.0  # 1 TFLOP/s\n"
        "\n"
        "[link]\n"
        "bandwidth = 100000000000.0  # 100 GB/s\n"
        "latency = 1e-09  # 1 ns\n"
        "\n"
        "[dies]\n"
        "rows = 4\n"
        "cols = 4\n"
        "\n"
        "[dies.link]\n"
        "bandwidth = 50000000000.0  # 50 GB/s\n"
        "latency = 5e-09  # 5 ns\n"
        "\n"
        "[core]\n"
        "overlap = true\n"
        "fixed_cycles = 0\n"
        "read_ports = 1\n"
        "write_ports = 1\n"
        "port_bandwidth = 500000000000.0  # 500 GB/s\n"
        'source = "round numbers, not a real machine: five 10 x 10 weight-stationary arrays '
        '(the 1 TFLOP/s peak), 100 vector lanes, 1 + 1 ports of 500 B/cycle (the 1 TB/s SRAM)"\n'
        "\n"
        "[core.array]\n"
        "rows = 10\n"
        "cols = 10\n"
        "count = 5\n"
        'dataflow = "weight"\n'
        "\n"
        "[core.vector]\n"
        "lanes = 100\n"
    )


wafers = st.builds(
    lambda topo, rows, cols, peaks, bw, lat, d2d, flow, dead, seed: _random_wafer(
        topo, rows, cols, peaks, bw, lat, d2d, flow, dead, seed
    ),
    st.sampled_from([t for t in Topology if t is not Topology.TREE]),  # a tree: test_fabric
    st.sampled_from([1, 2, 4, 6]),
    st.sampled_from([1, 2, 3, 4]),
    st.dictionaries(st.sampled_from(list(DType)), st.floats(1, 1e18, allow_nan=False), min_size=1),
    st.floats(3, 1e15),
    st.floats(0, 1e-3),
    st.booleans(),
    st.none()
    | st.builds(
        FlowControl,
        st.integers(1, 4096),
        st.integers(0, 3),
        st.integers(0, 8),
        st.booleans(),
        st.integers(0, 9),
        st.integers(0, 8),
    ),
    st.floats(0, 0.5),
    st.integers(0, 2**32),
)


def _random_wafer(topo, rows, cols, peaks, bw, lat, d2d, flow, dead, seed) -> Wafer:  # type: ignore[no-untyped-def]
    w = Wafer(
        name="random",
        rows=rows,
        cols=cols,
        topology=topo,
        clock_hz=1.7e9,
        peak_flops=peaks,
        sram_bytes=12345,
        sram_bandwidth=bw * 3.3,
        link=LinkSpec(bw, lat),
        die_rows=2 if rows % 2 == 0 else 1,
        d2d_link=LinkSpec(bw / 3, lat * 7) if d2d else None,
        flow=flow,
        source="hypothesis",
    )
    return w.with_dead_cores(dead, seed)


@settings(max_examples=80, deadline=None)
@given(wafers)
def test_random_wafers_round_trip(w: Wafer) -> None:
    assert parse(wafer_to_toml(w)) == w


# --- units -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("12.8 GB/s", Kind.BANDWIDTH, Fraction(12_800_000_000)),
        ("12.8GB/s", Kind.BANDWIDTH, Fraction(12_800_000_000)),
        ("1 GiB/s", Kind.BANDWIDTH, Fraction(2**30)),
        ("128 B/cycle", Kind.BANDWIDTH, Fraction(128 * 10**8)),
        ("10 ns", Kind.TIME, Fraction(1, 10**8)),
        ("2.5 us", Kind.TIME, Fraction(25, 10**7)),
        ("3 µs", Kind.TIME, Fraction(3, 10**6)),
        ("1 cycle", Kind.TIME, Fraction(1, 10**8)),
        ("5 cycles", Kind.TIME, Fraction(5, 10**8)),
        ("48 KiB", Kind.BYTES, Fraction(49_152)),
        ("48 KB", Kind.BYTES, Fraction(48_000)),
        ("48 kB", Kind.BYTES, Fraction(48_000)),
        ("1.25 MiB", Kind.BYTES, Fraction(1_310_720)),
        ("100 MHz", Kind.FREQUENCY, Fraction(10**8)),
        ("125 PFLOP/s", Kind.FLOPS, Fraction(125 * 10**15)),
        ("1 TFLOPS", Kind.FLOPS, Fraction(10**12)),
        ("2048 FLOP/cycle", Kind.FLOPS, Fraction(2048 * 10**8)),
        ("1e3 B", Kind.BYTES, Fraction(1000)),
        ("1_000", Kind.BYTES, Fraction(1000)),
        (12.5, Kind.BANDWIDTH, Fraction(12.5)),
        (7, Kind.BYTES, Fraction(7)),
    ],
)
def test_units_parse_exactly(text: object, kind: Kind, value: Fraction) -> None:
    assert parse_quantity(text, kind, "x.y", clock_hz=1e8) == value


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("100 Gb/s", Kind.BANDWIDTH, "in bits"),
        ("10 Gbps", Kind.BANDWIDTH, "in bits"),
        ("10 ns", Kind.BANDWIDTH, "is a time, but x.y is a bandwidth"),
        ("10 furlongs", Kind.TIME, "unknown unit 'furlongs'"),
        ("fast", Kind.BANDWIDTH, "not a quantity"),
        (True, Kind.BYTES, "boolean"),
        (float("inf"), Kind.TIME, "finite"),
        ([1], Kind.TIME, "must be a time"),
    ],
)
def test_unit_errors(text: object, kind: Kind, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_quantity(text, kind, "x.y", clock_hz=1e8)


def test_cycles_need_a_clock() -> None:
    with pytest.raises(ConfigError, match="uses cycles"):
        parse_quantity("1 cycle", Kind.TIME, "link.latency")


def test_units_in_a_file() -> None:
    text = MESH4.replace('sram_bytes = "1 MiB"', 'sram_bytes = "48 KiB"')
    text = text.replace("bandwidth = 1e11", 'bandwidth = "12.8 GB/s"')
    text = text.replace("latency = 1e-9", 'latency = "3 cycles"')
    text = text.replace("f32 = 1e12", 'f32 = "2 FLOP/cycle"\nbf16 = "8 TFLOP/s"')
    w = parse(text)
    assert w.sram_bytes == 49_152
    assert w.link == LinkSpec(12.8e9, 3e-9)
    assert w.peak_flops == ((DType.F32, 2e9), (DType.BF16, 8e12))


def test_formatting() -> None:
    assert fmt_si(1.28e10, "B/s") == "12.8 GB/s"
    assert fmt_si(1e-8, "s") == "10 ns"
    assert fmt_si(9.090909e-10, "s", 4) == "909.1 ps"
    assert fmt_si(999.96e9, "FLOP/s") == "1 TFLOP/s"
    assert fmt_bytes(48 * 1024) == "48 KiB"
    assert fmt_bytes(1_310_720) == "1.25 MiB"
    assert fmt_bytes(37_456_379_904) == "37.5 GB"  # not round in GiB


# --- errors name the field ---------------------------------------------------------------


def test_negative_bandwidth() -> None:
    msg = error(MESH4.replace("bandwidth = 1e11", "bandwidth = -1e11"))
    assert msg.startswith("w.toml: link.bandwidth must be >= 1 B/s")


def test_die_grid_that_does_not_divide() -> None:
    msg = error(MESH4 + "\n[dies]\nrows = 3\n")
    assert "dies.rows (die_rows) = 3 does not divide wafer.rows = 4" in msg


def test_dead_core_outside_the_grid() -> None:
    msg = error(MESH4 + "\n[faults]\ndead_cores = [[0, 4]]\n")
    assert "faults.dead_cores: core [0, 4] is outside the 4 x 4 grid" in msg


def test_dead_link_between_non_neighbours() -> None:
    msg = error(MESH4 + "\n[faults]\ndead_links = [[[0, 0], [2, 0]]]\n")
    assert "faults.dead_links" in msg and "not neighbours" in msg


def test_unknown_keys_suggest_the_right_one() -> None:
    msg = error(MESH4.replace("rows = 4", "rowz = 4"))
    assert "unknown key 'wafer.rowz' (did you mean 'rows'?)" in msg
    assert "unknown key 'fault' (did you mean 'faults'?)" in error(MESH4 + "\n[fault]\n")
    assert "unknown key 'link.bandwith' (did you mean 'bandwidth'?)" in error(
        MESH4.replace("bandwidth = 1e11", "bandwith = 1e11")
    )
    assert "unknown dtype wafer.peak_flops.fp16 (did you mean 'f16'?)" in error(
        MESH4.replace("f32 = 1e12", "fp16 = 1e12")
    )
    assert "'meshh' is unknown (did you mean 'mesh'?)" in error(MESH4.replace('"mesh"', '"meshh"'))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("rows = 4", 'rows = "4"', "wafer.rows must be an integer, got str"),
        ("rows = 4", "rows = 4.0", "wafer.rows must be an integer, got float"),
        ('topology = "mesh"', "topology = 3", "wafer.topology must be a string"),
        ("latency = 1e-9", "latency = true", "link.latency must be a time"),
        ("[link]", "link = 5\n[other]", "unknown dtype wafer.peak_flops.link"),
        ('sram_bytes = "1 MiB"', "sram_bytes = 1048576.0", "wafer.sram_bytes must be an integer"),
        ('sram_bytes = "1 MiB"', 'sram_bytes = "1.5 B"', "not a whole number"),
        ("[wafer.peak_flops]\nf32 = 1e12", "[wafer.peak_flops]", "wafer.peak_flops is empty"),
        (
            "clock_hz = 1e9",
            "clock_hz = 1e9\ncoarsen_factor = 0",
            "wafer.coarsen_factor must be >= 1",
        ),
        ("clock_hz = 1e9\n", "", "missing wafer.clock_hz"),
    ],
)
def test_wrong_types_and_values(old: str, new: str, message: str) -> None:
    assert old in MESH4
    assert message in error(MESH4.replace(old, new))


def test_table_expected() -> None:
    assert "dies must be a table" in error("dies = 2\n" + MESH4)
    assert "link.latency is a value, not a table" in error(
        MESH4.replace("latency = 1e-9", "[link.latency]\nvalue = 1")
    )
    assert "faults.dead_cores: a core is written [row, col]" in error(
        MESH4 + "\n[faults]\ndead_cores = [[1, 2, 3]]\n"
    )
    assert "faults.seed is given without" in error(MESH4 + "\n[faults]\nseed = 1\n")
    assert "flow.handshake must be true or false" in error(MESH4 + "\n[flow]\nhandshake = 1\n")
    assert "flow.packet_bytes must be >= 1" in error(MESH4 + "\n[flow]\npacket_bytes = 0\n")


def test_malformed_toml_reports_line_and_column() -> None:
    msg = error(MESH4.replace("rows = 4", "rows = = 4"))
    assert msg.startswith("w.toml: malformed TOML:")
    assert f"line {MESH4[: MESH4.index('rows = 4')].count(chr(10)) + 1}" in msg and "column" in msg


def test_missing_file_and_unknown_preset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_wafer(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"unknown wafer preset 'wse4' \(did you mean 'wse3'\?\)"):
        get_wafer("wse4")
    with pytest.raises(ConfigError, match=r"preset name, a \.toml path or a Wafer"):
        get_wafer(42)  # type: ignore[arg-type]
    folder = tmp_path / "w.toml"
    folder.mkdir()  # in plain words, not the OS's "Is a directory"
    with pytest.raises(ConfigError, match=r"the wafer file: .*w\.toml is a directory, not a file"):
        load_wafer(folder)


# --- presets and overrides ---------------------------------------------------------------


def test_get_wafer_resolves_names_paths_and_wafers(tmp_path: Path) -> None:
    w = get_wafer("mesh4x4")
    assert get_wafer("MESH4X4") == w and get_wafer(" Dojo_D1 ") == get_wafer("dojo-d1")
    assert get_wafer(w) is w
    dump_wafer(w, tmp_path / "m.toml")
    assert get_wafer(tmp_path / "m.toml") == w == get_wafer(str(tmp_path / "m.toml"))


def test_doubling_d2d_bandwidth_from_a_preset(tmp_path: Path) -> None:
    path = tmp_path / "wse2_fast_d2d.toml"
    path.write_text('preset = "wse2"\n\n[dies.link]\nbandwidth = "8 B/cycle"\n')
    base, fast = get_wafer("wse2"), load_wafer(path)
    assert base.d2d_link is not None and fast.d2d_link is not None
    assert fast.d2d_link == LinkSpec(2 * base.d2d_link.bandwidth, base.d2d_link.latency)
    assert fast.name == "wse2_fast_d2d"  # the file's name, not the preset's
    assert "preset wse2 with overrides from wse2_fast_d2d.toml (dies.link.bandwidth)" in fast.source
    unchanged = {"rows", "cols", "peak_flops", "link", "sram_bytes", "die_rows", "die_cols"}
    assert all(getattr(fast, f) == getattr(base, f) for f in unchanged)


def test_overrides_merge_tables_and_replace_lists(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(MESH4 + "\n[faults]\ndead_cores = [[0, 0], [1, 1]]\n")
    (tmp_path / "child.toml").write_text(
        'preset = "base.toml"\n[wafer]\nname = "child"\n[wafer.peak_flops]\nbf16 = 4e12\n'
        "[faults]\ndead_cores = [[2, 2]]\n"
    )
    w = load_wafer(tmp_path / "child.toml")
    assert w.name == "child"
    assert w.peak_flops == ((DType.F32, 1e12), (DType.BF16, 4e12))  # merged per dtype
    assert w.dead_cores == frozenset({(2, 2)})  # replaced


def test_preset_cycles_are_errors(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('preset = "b.toml"\n')
    (tmp_path / "b.toml").write_text('preset = "a.toml"\n')
    with pytest.raises(ConfigError, match=r"refers back to itself \(a.toml -> b.toml -> a.toml\)"):
        load_wafer(tmp_path / "a.toml")


def test_override_that_breaks_the_die_grid() -> None:
    msg = error('preset = "wse2"\n[wafer]\nrows = 1000\n')
    assert "dies.rows (die_rows) = 12 does not divide wafer.rows = 1000" in msg


def test_dead_cores_each_die_and_random_faults() -> None:
    text = MESH4 + "\n[dies]\nrows = 2\ncols = 2\n\n[faults]\ndead_cores_each_die = [[0, 1]]\n"
    assert parse(text).dead_cores == frozenset({(0, 1), (0, 3), (2, 1), (2, 3)})
    assert "outside a 2 x 2 die" in error(text.replace("[[0, 1]]", "[[0, 2]]"))
    random = MESH4.replace("rows = 4", "rows = 16").replace("cols = 4", "cols = 16")
    random += "\n[faults]\nrandom_dead_fraction = 0.25\nseed = 9\n"
    a, b = parse(random), parse(random)
    assert a == b and len(a.dead_cores) == 64
    assert a.dead_cores == get_wafer("mesh16x16").with_dead_cores(0.25, seed=9).dead_cores


def test_example_file_is_valid_and_documented() -> None:
    path = PRESET_DIR / "example.toml"
    assert "example" not in list_presets()
    w = load_wafer(path)
    assert (w.rows, w.cols, w.die_rows, w.die_cols) == (8, 8, 2, 2)
    assert w.dead_cores == frozenset({(0, 7), (5, 2)})
    assert w.dead_links == frozenset({((3, 3), (3, 4))})
    assert w.d2d_link == LinkSpec(5e10, 5e-9) and w.flow is not None and w.flow.handshake
    text = path.read_text()
    assert w.core is not None and w.core.overlap and w.memory is not None and w.host is not None
    for key in ("preset", "dead_cores_each_die", "random_dead_fraction", "coarsen_factor",
                "[core.rates]", "lookahead", "first_fit", "[host]"):  # fmt: skip
        assert key in text  # every key of the schema is shown, if only in a comment


def test_preset_files_cite_sources() -> None:
    for name in list_presets():
        text = (PRESET_DIR / f"{name}.toml").read_text()
        assert text.startswith(f"# {name}:")
        assert get_wafer(name).source
        tomllib.loads(text)  # plain TOML, no waferflow-only syntax
    for name in ("wse2", "wse3", "dojo-d1", "dojo-tile"):
        assert "Sources" in (PRESET_DIR / f"{name}.toml").read_text()


SEEDLIKE = (
    MESH4_ROOFLINE
    + """
[core]
overlap = false
fixed_cycles = 2
read_ports = 4
port_bandwidth = "128 B/cycle"

[core.rates]
matmul = "2048 FLOP/cycle"
elementwise = inf

[memory]
block_bytes = "256 KiB"
lookahead = 5
first_fit = true

[host]
bandwidth = "12.8 GB/s"
latency = "10 ns"
"""
)


def test_core_memory_and_host_tables() -> None:
    w = parse(SEEDLIKE)
    assert w.core is not None and w.memory is not None and w.host is not None
    assert not w.core.overlap and w.core.fixed_cycles == 2 and w.core.read_ports == 4
    assert w.core.write_ports == 1  # the default
    assert w.core.port_bandwidth == 128 * w.clock_hz
    assert dict(w.core.rates) == {"elementwise": float("inf"), "matmul": 2048 * w.clock_hz}
    assert (w.memory.block_bytes, w.memory.lookahead, w.memory.first_fit) == (1 << 18, 5, True)
    assert w.host == LinkSpec(12.8e9, 10e-9)
    text = wafer_to_toml(w)
    assert "elementwise = inf" in text and "[core.rates]" in text
    assert parse_wafer_toml(text) == w
    described = w.describe()
    assert "reads + compute + writes + 2 cycle(s)" in described
    assert "blocks of 256 KiB" in described and "to every core" in described
    # a wafer without the tables keeps the roofline, exact memory and no host
    plain = parse(MESH4_ROOFLINE)
    assert plain.core is None and plain.memory is None and plain.host is None


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("elementwise = inf", "elementwize = inf", "did you mean 'elementwise'"),
        ('matmul = "2048 FLOP/cycle"', "matmul = -1.0", "core.rates.matmul must be >= 1 FLOP/s"),
        ('block_bytes = "256 KiB"', "block_bytes = 0", "give memory.block_bytes too"),
        ('block_bytes = "256 KiB"', 'block_bytes = "1 GiB"', "larger than a core's SRAM"),
        ("read_ports = 4", "read_ports = 0", "core.read_ports must be >= 1"),
        ('port_bandwidth = "128 B/cycle"', "", "missing core.port_bandwidth"),
        ("first_fit = true", "first_fit = 1", "memory.first_fit must be true or false"),
    ],
)
def test_core_and_memory_errors_name_the_field(old: str, new: str, message: str) -> None:
    assert message in error(SEEDLIKE.replace(old, new))


@pytest.mark.parametrize(
    "name", ["wse2", "wse3", "dojo-d1", "amcoda", "mesh4x4", "mesh16x16", "mesh64x64", "torus8x8"]
)
def test_presets_describe_their_core_with_its_sources(name: str) -> None:
    w = get_wafer(name)
    assert w.core is not None and w.core.source
    shown = w.describe()
    assert "  core " in shown and f"core source   {w.core.source}" in shown
    if w.core.array is not None:
        assert "MAC array" in shown
    if w.core.vector is not None:
        assert "vector unit" in shown
    # the compute units (or, on the seed machine, its rates) account for the wafer's peak
    core = w.core
    if core.array is not None:
        for d, _ in w.peak_flops:
            unit = core.array.peak_macs(d) or core.vector.peak_ops(d)  # type: ignore[union-attr]
            assert 2 * unit * w.clock_hz == pytest.approx(w.peak(d))
    elif core.vector is not None:
        for d, _ in w.peak_flops:
            assert 2 * core.vector.peak_ops(d) * w.clock_hz == pytest.approx(w.peak(d))
    else:
        assert 2 * w.clock_hz * 1024 == dict(core.rates)["matmul"]  # the seed ALU's 1024 MACs


def test_core_source_must_be_a_string() -> None:
    assert "core.source must be a string" in error(
        MESH4.replace('source = "round numbers', "source = 3 #", 1)
    )

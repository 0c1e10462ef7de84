"""Human-readable reports of a wafer: ``describe`` (a full listing) and ``summary_row``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from waferflow.ir.dtypes import DType
from waferflow.ir.target.parts import (
    CoreModel,
    FlowControl,
    LinkSpec,
    MacArray,
    MemoryModel,
    VectorUnit,
)
from waferflow.ir.target.units import fmt_bytes, fmt_count, fmt_si

if TYPE_CHECKING:
    from waferflow.ir.target.wafer import Wafer

SUMMARY_HEADER: tuple[str, ...] = ("name", "grid", "cores", "topology", "peak", "SRAM", "link BW")


def headline_dtype(w: Wafer) -> DType:
    """The dtype a one-number summary quotes: bf16 or f16 when listed, else f32."""
    listed = {d for d, _ in w.peak_flops}
    for d in (DType.BF16, DType.F16):
        if d in listed:
            return d
    return DType.F32


def _link(spec: LinkSpec, clock_hz: float) -> str:
    cycles = spec.latency * clock_hz
    cyc = f" ({cycles:.4g} cycle{'' if cycles == 1 else 's'})" if spec.latency > 0 else ""
    return f"{fmt_si(spec.bandwidth, 'B/s', 4)} per direction, {fmt_si(spec.latency, 's', 4)} per hop{cyc}"


def _flow(flow: FlowControl | None) -> str:
    if flow is None:
        return "none (messages stream at link bandwidth)"
    buffers = "unbounded" if flow.buffers_per_core == 0 else str(flow.buffers_per_core)
    streams = "unlimited" if flow.max_streams == 0 else str(flow.max_streams)
    handshake = (
        f"req/ack, req resent after {flow.retry_cycles} cycles"
        if flow.handshake
        else "no handshake"
    )
    return (
        f"{flow.packet_bytes} B packets + {flow.header_packets} header packet(s), {handshake}, "
        f"input buffers {buffers}, streams per core {streams}"
    )


def _core(core: CoreModel | None, clock_hz: float) -> str:
    if core is None:
        return "roofline (max of FLOPs at peak and bytes at SRAM bandwidth)"
    how = "reads, compute, writes overlap (max)" if core.overlap else "reads + compute + writes"
    rates = ", ".join(
        f"{g} {'no compute cycles' if r == float('inf') else f'{r / clock_hz:.6g} FLOP/cycle'}"
        for g, r in core.rates
    )
    return (
        f"per op: {how} + {core.fixed_cycles} cycle(s); {core.read_ports} read / "
        f"{core.write_ports} write port(s) of {core.port_bandwidth / clock_hz:.6g} B/cycle"
        + (f"; {rates}" if rates else "")
    )


def _per_dtype(table: tuple[tuple[DType, float], ...], unit: str) -> str:
    if not table:
        return f"1 {unit} for every dtype"
    return ", ".join(f"{d.value} {r:.6g}" for d, r in table) + f" {unit}"


def _array(a: MacArray, clock_hz: float) -> str:
    count = f"{a.count} x " if a.count > 1 else ""
    dtypes = [d for d, r in a.macs_per_pe if r > 0] or [DType.F32]
    peaks = ", ".join(
        f"{d.value} {fmt_si(2 * a.peak_macs(d) * clock_hz, 'FLOP/s', 4)}" for d in dtypes
    )
    return (
        f"{count}{a.rows} x {a.cols} PEs, {a.dataflow.value} stationary; "
        f"{_per_dtype(a.macs_per_pe, 'MAC/PE/cycle')}; peak {peaks} per core"
    )


def _vector(v: VectorUnit, clock_hz: float) -> str:
    dtypes = [d for d, _ in v.ops_per_lane] or [DType.F32]
    peaks = ", ".join(f"{d.value} {fmt_si(v.peak_ops(d) * clock_hz, 'op/s', 4)}" for d in dtypes)
    return (
        f"{v.lanes} lanes; {_per_dtype(v.ops_per_lane, 'op/lane/cycle')} "
        f"(an FMA is one op, two FLOPs); {peaks} per core"
    )


def _memory(mem: MemoryModel | None) -> str:
    if mem is None:
        return "exact bytes from an actor's start; peaks reported"
    blocks = f"blocks of {fmt_bytes(mem.block_bytes)}" if mem.block_bytes else "exact bytes"
    ahead = (
        f"buffers of the next {mem.lookahead} actors allocated ahead"
        if mem.lookahead
        else "buffers allocated at an actor's start"
    )
    fit = "first-fit, an actor waits for space" if mem.first_fit else "peaks reported"
    return f"{blocks}, {ahead}, {fit}"


def describe(w: Wafer) -> str:
    k = w.coarsen_factor
    dh, dw = w.die_shape
    lines = [f"wafer {w.name}"]

    def row(key: str, value: str) -> None:
        lines.append(f"  {key:<14}{value}")

    row("grid", f"{w.rows} x {w.cols} = {fmt_count(w.num_cores)} cores, {w.topology.value}")
    if k > 1:
        fr, fc = w.fine_shape
        fine = f"{fmt_count(fr * fc)} fine cores"
        if w.fine_rows or w.fine_cols:  # k does not divide the fine grid
            fine = f"{fr} x {fc} = {fine}; the last row / column of nodes is ragged"
        row("coarse view", f"{k} x {k} fine cores per node ({fine})")
    row("dies", f"{w.die_rows} x {w.die_cols} = {w.num_dies}, {dh} x {dw} cores each")
    row("clock", fmt_si(w.clock_hz, "Hz", 4))
    listed = dict(w.peak_flops)
    for d in DType:
        if d in listed:
            row(
                f"peak {d.value}",
                f"{fmt_si(listed[d], 'FLOP/s', 4)} per core ({listed[d] / w.clock_hz:.6g} FLOP/cycle), "
                f"{fmt_si(w.total_peak_flops(d), 'FLOP/s', 4)} in total",
            )
    missing = [d for d in (DType.F32, DType.BF16, DType.F16) if d not in listed]
    if missing:
        row(
            "peak fallback",
            ", ".join(f"{d.value} uses {fmt_si(w.peak(d), 'FLOP/s', 4)}" for d in missing),
        )
    row("SRAM", f"{fmt_bytes(w.sram_bytes)} per core, {fmt_bytes(w.total_sram())} in total")
    row("SRAM BW", f"{fmt_si(w.sram_bandwidth, 'B/s', 4)} per core")
    row("link", _link(w.link, w.clock_hz))
    row(
        "d2d link",
        "none (die boundaries use the on-die link)"
        if w.d2d_link is None
        else _link(w.d2d_link, w.clock_hz),
    )
    if w.tree is not None:
        for k, lv in enumerate(w.fabric, start=1):
            below = "cores" if k == 1 else f"level-{k - 1} switches"
            row(f"level {k}", f"{fmt_count(w.tree.switches_at(k))} switch(es) of "
                f"{lv.fanout} {below}; links {_link(LinkSpec(lv.bandwidth, lv.latency), w.clock_hz)}")  # fmt: skip
    row("links", f"{fmt_count(w.num_links())} usable directed links")
    faults = f"{fmt_count(len(w.dead_cores))} dead cores, {fmt_count(len(w.dead_links))} dead links"
    # ragged nodes are listed in partial_cores too; only those missing fine cores are faults
    partly = sum(1 for c, n in w.partial_cores if n < w.node_shape(c)[0] * w.node_shape(c)[1])
    if partly:
        faults += f", {fmt_count(partly)} partly dead nodes"
    row("faults", faults)
    row("flow control", _flow(w.flow))
    row("core", _core(w.core, w.clock_hz))
    if w.core is not None and w.core.array is not None:
        row("MAC array", _array(w.core.array, w.clock_hz))
    if w.core is not None and w.core.vector is not None:
        row("vector unit", _vector(w.core.vector, w.clock_hz))
    if w.core is not None and k > 1 and (w.core.array or w.core.vector):
        row("", f"(per fine core; a node has {k} x {k} of them, see docs/simulator.md)")
    if w.core is not None and w.core.source:
        row("core source", w.core.source)
    row("memory", _memory(w.memory))
    row("host", "none" if w.host is None else _link(w.host, w.clock_hz) + " to every core")
    row("source", w.source or "(not given)")
    return "\n".join(lines)


def summary_row(w: Wafer) -> tuple[str, ...]:
    d = headline_dtype(w)
    cores = fmt_count(w.num_alive)
    if w.coarsen_factor > 1:
        cores += f" (k={w.coarsen_factor})"
    return (
        w.name,
        f"{w.rows}x{w.cols}",
        cores,
        w.topology.value,
        f"{w.total_peak_flops(d) / 1e12:,.1f} TFLOP/s {d.value}",
        fmt_si(float(w.total_sram()), "B"),
        fmt_si(w.link.bandwidth, "B/s"),
    )

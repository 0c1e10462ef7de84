"""The small value types a ``Wafer`` is made of (re-exported by ``wafer.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from waferflow.ir.dtypes import DType
from waferflow.ir.target.ranges import AREA, EDGE, sane

Coord = tuple[int, int]

# Which listed rate stands in for a dtype a table does not list (``rate_for``).
_FALLBACK: dict[DType, tuple[DType, ...]] = {
    DType.BF16: (DType.BF16, DType.F16, DType.F32),
    DType.F16: (DType.F16, DType.BF16, DType.F32),
}


def rate_for(table: Sequence[tuple[DType, float]], dtype: DType) -> float:
    """The entry of a per-dtype table for ``dtype``: its own, else for bf16 the f16
    entry and for f16 the bf16 one (same width, same datapath on every machine we
    model), then the f32 entry, then the smallest listed (conservative). The table must
    not be empty."""
    rates = dict(table)
    for d in _FALLBACK.get(dtype, (dtype, DType.F32)):
        if d in rates:
            return rates[d]
    return min(rates.values())


class Topology(Enum):
    MESH = "mesh"  # 2D mesh, links to the 4 neighbours
    TORUS = "torus"  # 2D mesh with wrap-around links
    CROSSBAR = "crossbar"  # a dedicated link between every ordered pair (the seed machine)
    TREE = "tree"  # cores under a tree of switches (``fabric.py``; the FRED preset)


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One direction of one link. Validated by the ``Wafer`` that holds it, so that
    the error can name the field (``link.bandwidth`` or ``dies.link.bandwidth``)."""

    bandwidth: float = field(metadata=sane(1, 1e30, "B/s", scale=EDGE))
    latency: float = field(metadata=sane(0, 1.0, "s", scale=EDGE))  # seconds per hop


@dataclass(frozen=True, slots=True)
class FlowControl:
    """Packetisation and the seed machine's req/ack handshake (optional)."""

    # payload bytes per packet
    packet_bytes: int = field(default=128, metadata=sane(1, 2**20, "B", integer=True))
    # extra packets per message (the seed sends a header)
    header_packets: int = field(default=0, metadata=sane(0, 64, "packets", integer=True))
    # 0 = unbounded input buffers
    buffers_per_core: int = field(default=0, metadata=sane(0, 2**20, "buffers", integer=True))
    handshake: bool = False  # req / ack before data, as in AMCoDA
    # req resent after this many cycles without ack
    retry_cycles: int = field(default=5, metadata=sane(0, 10**6, "cycles", integer=True))
    # concurrent in / out streams per core (memory ports); 0 = unlimited
    max_streams: int = field(default=0, metadata=sane(0, 1024, "streams", integer=True))


# Op groups whose compute rate a ``CoreModel`` may set (the names of ``opkind.GROUPS``).
CORE_RATE_GROUPS: tuple[str, ...] = (
    "matmul", "elementwise", "reduction", "normalization", "pooling", "movement",
    "embedding", "loss", "optimizer", "collective",
)  # fmt: skip


class Dataflow(Enum):
    """What a MAC array keeps in its PEs while the other two operands stream
    (SCALE-Sim's three dataflows; ``backend_sim.core_model`` has the mapping)."""

    WEIGHT = "weight"  # weight stationary (TPU)
    OUTPUT = "output"  # output stationary: results accumulate in place
    INPUT = "input"  # input stationary


@dataclass(frozen=True, slots=True)
class MacArray:
    """A systolic MAC array (``[core.array]``): ``count`` arrays of ``rows x cols``
    PEs per core, each PE doing ``macs_per_pe`` multiply-accumulates per cycle by
    dtype (a dtype the table does not list falls back as ``rate_for`` says; 0: the
    array does not take that dtype, its matmuls run on the vector unit). An empty
    table: one MAC per PE per cycle for every dtype."""

    # per fine core: a coarse view keeps the fine core's array (core_model tiles a node)
    rows: int = field(metadata=sane(1, 4096, "PEs", integer=True))
    cols: int = field(metadata=sane(1, 4096, "PEs", integer=True))
    dataflow: Dataflow = Dataflow.WEIGHT
    count: int = field(default=1, metadata=sane(1, 1024, "arrays", integer=True))
    # by dtype; 0: the array does not take the dtype
    macs_per_pe: tuple[tuple[DType, float], ...] = field(
        default=(), metadata=sane(0, 1024, "MACs/cycle")
    )

    def rate(self, dtype: DType) -> float:
        """MACs per PE per cycle for ``dtype`` (0: not on the array)."""
        return rate_for(self.macs_per_pe, dtype) if self.macs_per_pe else 1.0

    def peak_macs(self, dtype: DType) -> float:
        """MACs per cycle of one core's arrays for ``dtype``."""
        return self.rows * self.cols * self.count * self.rate(dtype)


@dataclass(frozen=True, slots=True)
class VectorUnit:
    """A SIMD vector unit (``[core.vector]``): ``lanes`` lanes, each doing
    ``ops_per_lane`` element operations per cycle by dtype (a fused multiply-add is one
    operation, two FLOPs; fallback as ``rate_for``). An empty table: one op per lane
    per cycle for every dtype."""

    lanes: int = field(metadata=sane(1, 65536, "lanes", integer=True))  # per fine core
    ops_per_lane: tuple[tuple[DType, float], ...] = field(
        default=(), metadata=sane(0, 1024, "ops/cycle", open_lo=True)
    )

    def rate(self, dtype: DType) -> float:
        """Element operations per lane per cycle for ``dtype``."""
        return rate_for(self.ops_per_lane, dtype) if self.ops_per_lane else 1.0

    def peak_ops(self, dtype: DType) -> float:
        """Element operations per cycle of one core's vector unit for ``dtype``."""
        return self.lanes * self.rate(dtype)


@dataclass(frozen=True, slots=True)
class CoreModel:
    """How one core times one op (``[core]``; a wafer without it uses the roofline).

    An actor runs its ops one *pass* at a time (``ir.plan.OpWork``). A pass reads its
    operands through ``read_ports`` ports and writes its results through
    ``write_ports`` ports, each moving ``port_bandwidth`` bytes/s; operands are spread
    over the ports largest first, so with no more operands than ports the read takes
    as long as the largest operand. Its compute takes ``flops / rate`` where ``rate``
    is the pass's op group's entry in ``rates`` (FLOP/s; ``inf``: the group takes no
    compute cycles of its own, it streams at the ports' rate), else the wafer's peak
    for the dtype. With ``overlap`` the pass takes the slowest of read, compute and
    write (a roofline per pass); without, their sum (the seed machine's ALU: R + C +
    W). Every pass adds ``fixed_cycles``. Reads, compute and writes are counted in
    whole clock cycles.

    ``array`` (a MAC array) times matmuls and convolutions from their shape, ``vector``
    (a vector unit) the other op groups, and matmuls whose dtype the array does not
    take; a group listed in ``rates`` keeps that rate (an explicit override; the array
    and ``rates.matmul`` may not both be given). ``backend_sim.core_model`` has the
    closed forms."""

    overlap: bool = True
    fixed_cycles: int = field(default=0, metadata=sane(0, 10**6, "cycles", integer=True))
    read_ports: int = field(default=1, metadata=sane(1, 64, "ports", integer=True))
    write_ports: int = field(default=1, metadata=sane(1, 64, "ports", integer=True))
    # bytes/s per port
    port_bandwidth: float = field(default=0.0, metadata=sane(1, 1e30, "B/s", scale=AREA))
    # (op group, FLOP/s), sorted by group; the range holds for each rate (inf allowed)
    rates: tuple[tuple[str, float], ...] = field(
        default=(), metadata=sane(1, 1e30, "FLOP/s", scale=AREA, allow_inf=True)
    )
    array: MacArray | None = None
    vector: VectorUnit | None = None
    source: str = ""  # where the figures come from, or which are assumptions


@dataclass(frozen=True, slots=True)
class MemoryModel:
    """How a core's SRAM is handed out (``[memory]``; without it, buffers take their
    exact bytes from the moment their actor starts, and peaks are only reported).

    ``block_bytes``: buffers take whole blocks of this size (0: exact bytes).
    ``lookahead``: a core allocates the buffers of its next ``lookahead`` actors (in
    its order) ahead of time, as an issue window or reservation table does; an actor
    leaves the window once it has ended (0: a buffer is allocated when its actor
    starts). ``first_fit``: buffers are contiguous
    runs of blocks placed first-fit, and an actor whose buffers do not fit waits until
    enough is freed (false: the peak is reported, never enforced)."""

    block_bytes: int = field(default=0, metadata=sane(0, 2**40, "B", integer=True))
    lookahead: int = field(default=0, metadata=sane(0, 4096, "actors", integer=True))
    first_fit: bool = False


@dataclass(frozen=True, slots=True)
class Link:
    """One directed link of a wafer, as ``Wafer.links()`` yields it.

    ``is_d2d`` is true exactly when ``src`` and ``dst`` lie in different dies; ``spec``
    is then the wafer's die-to-die spec (or the on-die spec when it has none).
    """

    src: Coord
    dst: Coord
    spec: LinkSpec
    is_d2d: bool

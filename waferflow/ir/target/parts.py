"""The small value types a ``Wafer`` is made of (re-exported by ``wafer.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

Coord = tuple[int, int]


class Topology(Enum):
    MESH = "mesh"  # 2D mesh, links to the 4 neighbours
    TORUS = "torus"  # 2D mesh with wrap-around links
    CROSSBAR = "crossbar"  # a dedicated link between every ordered pair (the seed machine)


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One direction of one link. Validated by the ``Wafer`` that holds it, so that
    the error can name the field (``link.bandwidth`` or ``dies.link.bandwidth``)."""

    bandwidth: float  # bytes/s
    latency: float  # seconds per hop


@dataclass(frozen=True, slots=True)
class FlowControl:
    """Packetisation and the seed machine's req/ack handshake (optional)."""

    packet_bytes: int = 128  # payload bytes per packet
    header_packets: int = 0  # extra packets per message (the seed sends a header)
    buffers_per_core: int = 0  # 0 = unbounded input buffers
    handshake: bool = False  # req / ack before data, as in AMCoDA
    retry_cycles: int = 5  # req resent after this many cycles without ack
    max_streams: int = 0  # concurrent in / out streams per core (memory ports); 0 = unlimited


# Op groups whose compute rate a ``CoreModel`` may set (the names of ``opkind.GROUPS``).
CORE_RATE_GROUPS: tuple[str, ...] = (
    "matmul", "elementwise", "reduction", "normalization", "pooling", "movement",
    "embedding", "loss", "optimizer", "collective",
)  # fmt: skip


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
    whole clock cycles."""

    overlap: bool = True
    fixed_cycles: int = 0
    read_ports: int = 1
    write_ports: int = 1
    port_bandwidth: float = 0.0  # bytes/s per port
    rates: tuple[tuple[str, float], ...] = ()  # (op group, FLOP/s), sorted by group


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

    block_bytes: int = 0
    lookahead: int = 0
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

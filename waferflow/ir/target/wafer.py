"""The hardware target: a grid of cores joined by links, cut into dies.

Units are SI throughout: seconds, bytes, bytes/s, FLOP/s, Hz. Cores are numbered
row-major, ``core = row * cols + col``; coordinates are ``(row, col)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from waferflow.ir.dtypes import DType

Coord = tuple[int, int]


class Topology(Enum):
    MESH = "mesh"  # 2D mesh, links to the 4 neighbours
    TORUS = "torus"  # 2D mesh with wrap-around links
    CROSSBAR = "crossbar"  # a dedicated link between every ordered pair (the seed machine)


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One direction of one link."""

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


@dataclass(frozen=True)
class Wafer:
    name: str
    rows: int
    cols: int
    topology: Topology
    clock_hz: float
    peak_flops: tuple[tuple[DType, float], ...]  # per core, by dtype
    sram_bytes: int  # per core
    sram_bandwidth: float  # bytes/s per core
    link: LinkSpec
    die_rows: int = 1  # dies along the rows (the grid is cut into die_rows x die_cols dies)
    die_cols: int = 1
    d2d_link: LinkSpec | None = None  # links that cross a die boundary
    dead_cores: frozenset[Coord] = field(default_factory=frozenset)
    dead_links: frozenset[tuple[Coord, Coord]] = field(default_factory=frozenset)  # undirected
    flow: FlowControl | None = None
    coarsen_factor: int = 1  # k when this is a k x k coarse view of a finer wafer
    source: str = ""  # where the figures come from

    # --- numbering -------------------------------------------------------------------
    @property
    def num_cores(self) -> int:
        return self.rows * self.cols

    def core_id(self, coord: Coord) -> int:
        return coord[0] * self.cols + coord[1]

    def coord(self, core: int) -> Coord:
        return divmod(core, self.cols)

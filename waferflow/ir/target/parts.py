"""The small value types a ``Wafer`` is made of (re-exported by ``wafer.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from waferflow.ir.target.ranges import EDGE, sane

Coord = tuple[int, int]


class Topology(Enum):
    MESH = "mesh"  # 2D mesh, links to the 4 neighbours
    TORUS = "torus"  # 2D mesh with wrap-around links
    CROSSBAR = "crossbar"  # a dedicated link between every ordered pair (the seed machine)


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

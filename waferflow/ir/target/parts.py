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

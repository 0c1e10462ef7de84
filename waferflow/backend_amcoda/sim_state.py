"""State of the seed machine model: event kinds, the SU's table states, and the links.

Everything that crosses a link is kept as write times: a read in cycle t sees what
was written before t (a SystemC signal). A producer's periodic ``req`` is a pulse
train evaluated in closed form rather than written cycle by cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from waferflow.backend_amcoda.program import Entry

REQ_PERIOD = 5  # a waiting producer writes req, then 0 for 4 cycles (req_ack_max_cycle = 5)
HOST_HEADER_CYCLE = 20  # the host writes the ins_init header in cycle 20 (210 ns in the logs)
BUILD_CYCLES = 5
ALLOC_RETRY = 3


class Ev(IntEnum):
    """Event kinds; each is one time-stamped line of the authors' actor log."""

    INIT = 0
    START = 1
    BUILT = 2
    RECV_REQ = 3
    ACK = 4
    RECV_START = 5
    RECV_END = 6
    ERASED = 7
    ALU_START = 8
    ALU_END = 9
    CONSUMER_ACK = 10
    SEND_START = 11
    SEND_END = 12
    MEM = 13
    LOADED = 14


class PS(IntEnum):
    """Producer (input operand) states."""

    IDLE = 0
    RECEIVED_REQ = 1
    SENT_ACK = 2
    RECEIVING = 3
    READY = 4  # data present (or a slot)
    FINISH = 5


class OS(IntEnum):
    """Entry output states."""

    IDLE = 0
    WAIT_PRODUCE = 1
    PRODUCING = 2
    SENDING = 4
    FINISH = 5


class CS(IntEnum):
    """Consumer states of the head entry."""

    WAIT_REQ = 0
    WAIT_ACK = 1
    WAIT_SEND = 2
    SENDING = 3
    FINISH = 4


@dataclass(slots=True)
class Pte:
    src: int  # peer index (0 = host), or -1 for a slot operand
    slot: int
    release: bool
    size: int
    state: PS
    buf: int = -1  # first block of the operand's buffer (allocated, or the slot's)
    recv_end: int = 0

    @property
    def freed_by_alu(self) -> bool:
        """Actor operands' buffers and released slots are freed when the ALU op ends."""
        return self.buf >= 0 and (self.src >= 0 or self.release)


@dataclass(slots=True)
class Cte:
    dst: int
    state: CS = CS.WAIT_REQ


@dataclass(slots=True)
class Stream:
    consumers: list[Cte]
    start: int  # cycle the header is written
    end: int  # cycle the port frees (start + P + 1)


@dataclass(slots=True)
class Rte:
    index: int
    entry: Entry
    producers: list[Pte]
    consumers: list[Cte]
    out_state: OS = OS.IDLE
    out_buf: int = -1
    out_temp: bool = False  # result buffer freed after the last send
    packages: int = 0


@dataclass(slots=True)
class Build:
    begin: int
    try_at: int
    ready_at: int = -1
    failed_version: int = -1


@dataclass(slots=True)
class Train:
    """A producer's req pulses on one link: written at p0, p0 + 5, ... while <= stop."""

    p0: int
    stop: int = 1 << 62


def next_pulse_seen(train: Train, t: int) -> int | None:
    """First cycle >= t in which a pulse of ``train`` is visible (written the cycle before)."""
    w = max(t - 1, train.p0)
    k = -(-(w - train.p0) // REQ_PERIOD)
    w = train.p0 + k * REQ_PERIOD
    return w + 1 if w <= train.stop else None


class Links:
    """What crosses the links, as write times: reads in cycle t see writes before t."""

    def __init__(self) -> None:
        self.trains: dict[tuple[int, int], Train] = {}
        self.headers: dict[tuple[int, int], tuple[int, int]] = {}  # (cycle, packages)
        self.acks: dict[tuple[int, int], int] = {}

    def req_seen(self, src: int, dst: int, t: int) -> bool:
        tr = self.trains.get((src, dst))
        return tr is not None and tr.p0 <= t - 1 <= tr.stop and (t - 1 - tr.p0) % REQ_PERIOD == 0

    def header_seen(self, src: int, dst: int, t: int) -> int | None:
        h = self.headers.get((src, dst))
        return h[1] if h is not None and h[0] == t - 1 else None

    def ack_seen(self, src: int, dst: int, t: int) -> bool:
        return self.acks.get((src, dst)) == t - 1

"""``SimResult``: what one simulated step looked like, and how to read it."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from waferflow.backend_sim.analysis import PathStep, Wait, core_waits
from waferflow.backend_sim.costs import ps_to_seconds
from waferflow.backend_sim.utilisation import ClassStat, class_lines
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Coord, Wafer

if TYPE_CHECKING:
    from collections.abc import Mapping

    from waferflow.backend_sim.trace import TraceOptions
    from waferflow.parallel.ranks import CoreRank


Hops = tuple[int, ...]


class Occupancy(Sequence[tuple[Hops, Hops, Hops]]):
    """Per message: its link indices, and per hop when its first packet started on the
    link and when its last packet left it. Kept as flat lists (all messages' hops in
    one list, ``ptr[m]:ptr[m + 1]`` for message m); the tuples are built on access."""

    __slots__ = ("_end", "_links", "_ptr", "_start")

    def __init__(
        self, links: Sequence[Hops], ptr: Sequence[int], start: list[int], end: list[int]
    ) -> None:
        self._links, self._ptr, self._start, self._end = links, ptr, start, end

    def __len__(self) -> int:
        return len(self._links)

    def __getitem__(self, m):  # type: ignore[no-untyped-def, override]
        if isinstance(m, slice):
            return tuple(self[i] for i in range(*m.indices(len(self))))
        if m < 0:
            m += len(self)
        a, b = self._ptr[m], self._ptr[m + 1]
        return self._links[m], tuple(self._start[a:b]), tuple(self._end[a:b])

    def __iter__(self):  # type: ignore[no-untyped-def]
        ptr, start, end = self._ptr, self._start, self._end
        for m, links in enumerate(self._links):
            a, b = ptr[m], ptr[m + 1]
            yield links, tuple(start[a:b]), tuple(end[a:b])

    def arrays(self) -> OccupancyArrays:
        """Every hop of every message as flat int64 arrays, without a tuple per message."""
        n = len(self._links)
        ptr = np.asarray(self._ptr[: n + 1], dtype=np.int64)
        hops = int(ptr[-1]) if n else 0
        link = np.fromiter(itertools.chain.from_iterable(self._links), np.int64, count=hops)
        start = np.asarray(self._start[:hops], dtype=np.int64)
        return OccupancyArrays(ptr, link, start, np.asarray(self._end[:hops], dtype=np.int64))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(x == y for x, y in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Occupancy({len(self)} messages)"


@dataclass(frozen=True, eq=False)
class OccupancyArrays:
    """An occupancy as flat int64 arrays: message m's hops are ``ptr[m]:ptr[m + 1]`` of
    ``link`` (link index), ``start`` (first packet on it) and ``end`` (last one off)."""

    ptr: np.ndarray
    link: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def of(cls, occupancy: Sequence[tuple[Hops, Hops, Hops]]) -> OccupancyArrays:
        """The arrays of an ``Occupancy``, or of any sequence of per-message tuples."""
        if isinstance(occupancy, Occupancy):
            return occupancy.arrays()
        ptr = np.cumsum([0, *(len(links) for links, _, _ in occupancy)], dtype=np.int64)
        flat = [np.asarray([x for hop in occupancy for x in hop[k]], dtype=np.int64)
                for k in range(3)]  # fmt: skip
        return cls(ptr, *flat)


@dataclass(frozen=True, slots=True)
class LinkStat:
    """One directed link that carried traffic."""

    index: int  # the link's number in this result (order of first use)
    src: Coord
    dst: Coord
    bytes: int  # payload bytes that crossed it
    busy_ps: int  # time it spent serialising packets (headers included)
    d2d: bool  # crosses a die boundary
    utilisation: float  # busy / step time

    @property
    def busy_s(self) -> float:
        return ps_to_seconds(self.busy_ps)

    def __str__(self) -> str:
        tag = " d2d" if self.d2d else ""
        return (
            f"{self.src}->{self.dst}{tag}: {_fmt_bytes(self.bytes)}, "
            f"busy {_fmt_time(self.busy_ps)} ({100 * self.utilisation:.1f} %)"
        )


@dataclass(frozen=True, slots=True)
class CoreStat:
    """How one core that runs actors spent the step (the four times in ps)."""

    core: int
    coord: Coord
    actors: int
    compute_ps: int
    comm_ps: int  # waiting for input messages
    idle_ps: int  # everything else: buffer waits, before the first / after the last actor
    peak_mem_bytes: int


@dataclass(frozen=True)
class SimResult:
    """The outcome of ``simulate(plan, wafer)``. Times are integer picoseconds
    (``*_ps``); ``step_time`` and friends give seconds. Per-actor and per-message
    tuples are indexed by id."""

    plan: Plan = field(repr=False)
    wafer: Wafer = field(repr=False)
    step_time_ps: int
    actor_start_ps: tuple[int, ...] = field(repr=False)
    actor_end_ps: tuple[int, ...] = field(repr=False)
    msg_inject_ps: tuple[int, ...] = field(repr=False)  # producer finished
    msg_data_start_ps: tuple[int, ...] = field(repr=False)  # data began (after req/ack)
    msg_arrive_ps: tuple[int, ...] = field(repr=False)
    msg_queueing_ps: tuple[int, ...] = field(repr=False)  # delay beyond the closed form
    msg_hops: tuple[int, ...] = field(repr=False)
    cores: tuple[CoreStat, ...] = field(repr=False)
    # links that carried traffic, numbered by first use: endpoints (core ids), payload
    # bytes, busy time, crosses a die edge (``links`` gives them as LinkStat objects)
    link_src: tuple[int, ...] = field(repr=False)
    link_dst: tuple[int, ...] = field(repr=False)
    link_bytes: tuple[int, ...] = field(repr=False)
    link_busy_ps: tuple[int, ...] = field(repr=False)
    link_d2d: tuple[bool, ...] = field(repr=False)
    critical_path: tuple[PathStep, ...] = field(repr=False)
    flop_utilisation: float
    events: int  # events the engine processed
    packet_hops: int  # packets x hops moved
    # per message: (link indices, first-packet start, last-packet end) per hop, for
    # traces (an ``Occupancy``: a sequence of those tuples, built on access)
    link_occupancy: Sequence[tuple[Hops, Hops, Hops]] = field(repr=False, default=())
    # with the wafer's memory model ([memory]): per core id, its allocations and frees
    # as (ps, +-bytes), in the order they happened (empty without one)
    memory_log: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = field(repr=False, default=())
    # per op class (matmul, conv, elementwise, ...): busy time, utilisation of the unit
    # that ran it and what bound it (``utilisation.op_classes``; empty when a custom
    # compute model timed the actors)
    op_classes: tuple[ClassStat, ...] = field(repr=False, default=())

    # -- headline numbers ----------------------------------------------------------------
    @property
    def step_time(self) -> float:
        return ps_to_seconds(self.step_time_ps)

    @property
    def peak_memory(self) -> int:
        """The largest per-core peak (bytes)."""
        return max((c.peak_mem_bytes for c in self.cores), default=0)

    def link_stat(self, index: int) -> LinkStat:
        busy = self.link_busy_ps[index]
        return LinkStat(
            index=index,
            src=self.wafer.node_coord(self.link_src[index]),
            dst=self.wafer.node_coord(self.link_dst[index]),
            bytes=self.link_bytes[index],
            busy_ps=busy,
            d2d=self.link_d2d[index],
            utilisation=busy / self.step_time_ps if self.step_time_ps else 0.0,
        )

    @cached_property
    def links(self) -> tuple[LinkStat, ...]:
        """Every link that carried traffic (built on first use: big wafers have many)."""
        return tuple(self.link_stat(i) for i in range(len(self.link_src)))

    @property
    def total_link_bytes(self) -> int:
        return sum(self.link_bytes)

    @property
    def total_queueing_ps(self) -> int:
        return sum(self.msg_queueing_ps)

    @property
    def contention_free(self) -> bool:
        """No message arrived later than its closed form (no queueing anywhere)."""
        return not any(self.msg_queueing_ps)

    def busiest_links(self, k: int = 3) -> list[LinkStat]:
        """The ``k`` links with the most busy time (ties: lower link index)."""
        busy = self.link_busy_ps
        top = heapq.nsmallest(k, range(len(busy)), key=lambda i: (-busy[i], i))
        return [self.link_stat(i) for i in top]

    def core_stat(self, core: int) -> CoreStat:
        for c in self.cores:
            if c.core == core:
                return c
        raise KeyError(f"core {core} runs no actor in plan {self.plan.name!r}")

    def memory_rate(self, cores: Sequence[int] | None = None) -> float:
        """The mean over ``cores`` (default: every core that runs actors) of each core's
        peak memory as a share of its SRAM: the seed machine's "average maximum
        allocation rate" when ``cores`` are those of its conv layers."""
        w = self.wafer
        stats = [self.core_stat(c) for c in cores] if cores is not None else list(self.cores)
        rates = [c.peak_mem_bytes / w.core_sram_bytes(c.coord) for c in stats]
        return sum(rates) / len(rates) if rates else 0.0

    def waits(self) -> list[Wait]:
        """The gaps each core spent waiting before an actor: for an input from another
        core, then for an output buffer (``analysis.core_waits``)."""
        return list(self._waits)

    @cached_property
    def _waits(self) -> tuple[Wait, ...]:
        # found once: the trace and the timeline both show them (10^5 on the demo plan)
        return tuple(
            core_waits(self.plan, self.actor_start_ps, self.actor_end_ps, self.msg_arrive_ps)
        )

    def actor_span(self, actor_id: int) -> tuple[float, float]:
        """(start, end) of an actor in seconds."""
        return (
            ps_to_seconds(self.actor_start_ps[actor_id]),
            ps_to_seconds(self.actor_end_ps[actor_id]),
        )

    # -- presentation ----------------------------------------------------------------------
    def summary(self, top: int = 3) -> str:
        plan, step = self.plan, self.step_time_ps
        w = self.wafer
        real = [c for c in self.cores if not w.is_switch_node(c.core)]
        n_used = len(real)  # a switched fabric's switch units run no compute
        unit = w.unit  # "core", or on a coarse view "node" (of k x k cores)
        remote = [m for m, h in zip(plan.messages, self.msg_hops, strict=True) if h]
        lines = [
            f"plan {plan.name!r} on wafer {w.name!r}: {len(plan.actors):,} actors, "
            f"{len(plan.messages):,} messages ({len(remote):,} between {unit}s, "
            f"{len(plan.messages) - len(remote):,} within one), {w.units(n_used)} used",
            f"  {'step time':<22}{_fmt_time(step)}",
            f"  {'FLOP utilisation':<22}{100 * self.flop_utilisation:.1f} % "
            f"(ideal compute time / (step x used {unit}s))",
        ]
        if n_used and step:
            tot = step * n_used
            comp = sum(c.compute_ps for c in real) / tot
            comm = sum(c.comm_ps for c in real) / tot
            idle = sum(c.idle_ps for c in real) / tot
            lines.append(
                f"  {unit + ' time':<22}compute {100 * comp:.1f} %, comm wait {100 * comm:.1f} %, "
                f"idle {100 * idle:.1f} %"
            )
        lines.extend(class_lines(self.op_classes))
        lines.append(
            f"  {'network':<22}{len(remote):,} messages between {unit}s, "
            f"{_fmt_bytes(sum(m.bytes for m in remote))} "
            f"sent, {_fmt_bytes(self.total_link_bytes)} x hop on {len(self.link_src)} links, "
            f"queueing {_fmt_time(self.total_queueing_ps)} summed over messages"
        )
        busiest = self.busiest_links(top)
        if busiest:
            lines.append(f"  busiest links (top {len(busiest)}):")
            lines.extend(f"    {lk}" for lk in busiest)
        if self.cores:
            worst = max(self.cores, key=lambda c: (c.peak_mem_bytes, -c.core))
            frac = worst.peak_mem_bytes / self.wafer.sram_bytes if self.wafer.sram_bytes else 0.0
            lines.append(
                f"  {'peak memory (sim)':<22}{_fmt_bytes(worst.peak_mem_bytes)} on {unit} "
                f"{worst.coord}, the fullest as simulated ({100 * frac:.1f} % of its "
                f"{_fmt_bytes(self.wafer.sram_bytes)} SRAM)"
            )
        n_act = sum(1 for s in self.critical_path if s.kind == "actor")
        t_act = sum(s.duration_ps for s in self.critical_path if s.kind == "actor")
        n_msg = len(self.critical_path) - n_act
        t_msg = sum(s.duration_ps for s in self.critical_path if s.kind == "message")
        lines.append(
            f"  {'critical path':<22}{n_act} actors ({_fmt_time(t_act)} compute), "
            f"{n_msg} messages ({_fmt_time(t_msg)} in flight)"
        )
        lines.append(f"  {'engine':<22}{self.events:,} events, {self.packet_hops:,} packet-hops")
        return "\n".join(lines)

    def to_chrome_trace(
        self,
        path: str | Path,
        link_tracks: bool = False,
        *,
        options: TraceOptions | None = None,
        ranks: Mapping[int, CoreRank] | None = None,
    ) -> Path:
        """Write a Chrome / Perfetto trace (open in ui.perfetto.dev or chrome://tracing):
        a track per core with its actors and waits, flows for the messages between
        cores, memory and link-load counters; with ``link_tracks``, one track per link
        with the messages crossing it. ``ranks`` names each core's rank
        (``waferflow.parallel.ranks``). See ``backend_sim.trace``."""
        from waferflow.backend_sim.trace import write_chrome_trace

        return write_chrome_trace(self, path, link_tracks, options=options, ranks=ranks)

    def __str__(self) -> str:
        return self.summary()


def _fmt_time(ps: int | float) -> str:
    s = ps / 1e12
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(s) >= scale:
            return f"{s / scale:.3f} {unit}"
    return f"{ps:.0f} ps"


def _fmt_bytes(n: int | float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


__all__ = ["CoreStat", "LinkStat", "Occupancy", "OccupancyArrays", "PathStep", "SimResult"]

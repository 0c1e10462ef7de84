"""Views from the toolkit's own objects: a ``Plan``, a ``SimResult`` and a ``Wafer``.

Only attributes are read (no simulator code runs), so the types are imported for type
checking only and this module imports neither matplotlib nor the simulator.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from waferflow.viz.data import (
    DETAIL_LIMIT,
    KINDS,
    PHASES,
    UNASSIGNED,
    LinkLoad,
    LinkView,
    MemoryView,
    PlacementView,
    Region,
    SpanColumns,
    SpanKind,
    TimelineView,
    VizError,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from waferflow.backend_sim.results import SimResult
    from waferflow.ir.plan import Actor, Plan
    from waferflow.ir.target.wafer import Wafer
    from waferflow.parallel.ranks import CoreRank

_PS = 1e-12  # seconds per picosecond
_MAX_STAGE_REGIONS = 64


class LabelBy(Enum):
    """What colours a placement map: each core shows the label of its heaviest actor
    (most FLOPs; ties to the lower actor id)."""

    AUTO = "auto"  # stage when the plan is pipelined, else layer, else module
    STAGE = "stage"
    LAYER = "layer"
    MODULE = "module"
    OP_KIND = "op_kind"


def _resolve(by: LabelBy, plan: Plan) -> LabelBy:
    if by is not LabelBy.AUTO:
        return by
    if len({a.stage for a in plan.actors}) > 1:
        return LabelBy.STAGE
    if any(a.layer for a in plan.actors):
        return LabelBy.LAYER
    return LabelBy.MODULE


def _label_of(a: Actor, by: LabelBy) -> str:
    if by is LabelBy.STAGE:
        return f"stage {a.stage}"
    if by is LabelBy.OP_KIND:
        return a.op_kind.value
    if by is LabelBy.LAYER:
        return a.layer or a.module or a.name
    return a.module or a.layer or a.name


def _unit(wafer: Wafer) -> str:
    """What one cell of the wafer's grid is: a core, or on a coarse view a node."""
    return "node" if wafer.coarsen_factor > 1 else "core"


def _where(wafer: Wafer) -> str:
    """``'wse2@84x (nodes of 84x84 cores)'``, or the plain name of a fine wafer."""
    k = wafer.coarsen_factor
    return f"{wafer.name} (nodes of {k}x{k} cores)" if k > 1 else wafer.name


def _check_fits(plan: Plan, wafer: Wafer) -> None:
    n = wafer.rows * wafer.cols
    for a in plan.actors:
        if not 0 <= a.core < n:
            raise VizError(
                f"plan {plan.name!r}: actor {a.id} ({a.name!r}) is on core {a.core}, not on "
                f"wafer {wafer.name!r} ({wafer.rows}x{wafer.cols}); pass the plan's wafer"
            )


def placement_view(
    plan: Plan,
    wafer: Wafer,
    by: LabelBy = LabelBy.AUTO,
    ranks: Mapping[int, CoreRank] | None = None,
) -> PlacementView:
    """Each core coloured by the label (stage, layer, module or op kind) of its heaviest
    actor; pipelined plans also get one region per stage (the box around its cores).
    With ``ranks`` (core -> ``CoreRank`` of a parallel plan) each core also shows its
    data- / tensor-parallel rank."""
    _check_fits(plan, wafer)
    by = _resolve(by, plan)
    best: dict[int, Actor] = {}
    for a in plan.actors:
        cur = best.get(a.core)
        if cur is None or a.flops > cur.flops:  # ties keep the earlier (lower id) actor
            best[a.core] = a
    if by is LabelBy.STAGE:
        stages = sorted({a.stage for a in best.values()})
        names = [f"stage {s}" for s in stages]
    else:  # program order: by the first actor that carries each label
        first: dict[str, int] = {}
        for a in plan.actors:
            first.setdefault(_label_of(a, by), a.id)
        shown = {_label_of(a, by) for a in best.values()}
        names = sorted(shown, key=first.__getitem__)
    index = {name: i for i, name in enumerate(names)}
    grid = [UNASSIGNED] * (wafer.rows * wafer.cols)
    for core, a in best.items():
        grid[core] = index[_label_of(a, by)]
    return PlacementView(
        rows=wafer.rows,
        cols=wafer.cols,
        core_label=tuple(grid),
        labels=tuple(names),
        die_rows=wafer.die_rows,
        die_cols=wafer.die_cols,
        dead=frozenset(wafer.dead_cores),
        regions=_stage_regions(plan, wafer.cols),
        title=f"{plan.name} on {_where(wafer)}: placement by {by.value}",
        cell_text=_rank_text(ranks, wafer),
        unit=_unit(wafer),
    )


def _rank_text(ranks: Mapping[int, CoreRank] | None, wafer: Wafer) -> tuple[str, ...]:
    if not ranks or not any(r.label for r in ranks.values()):
        return ()
    text = [""] * (wafer.rows * wafer.cols)
    for core, r in ranks.items():
        if 0 <= core < len(text):
            text[core] = r.label
    return tuple(text)


def _stage_regions(plan: Plan, cols: int) -> tuple[Region, ...]:
    boxes: dict[int, list[int]] = {}
    for a in plan.actors:
        r, c = divmod(a.core, cols)
        box = boxes.setdefault(a.stage, [r, c, r, c])
        box[0], box[1] = min(box[0], r), min(box[1], c)
        box[2], box[3] = max(box[2], r), max(box[3], c)
    if not 1 < len(boxes) <= _MAX_STAGE_REGIONS:
        return ()
    return tuple(
        Region(f"stage {s}", r0, c0, r1 + 1, c1 + 1)
        for s, (r0, c0, r1, c1) in sorted(boxes.items())
    )


def link_view(result: SimResult, wafer: Wafer | None = None) -> LinkView:
    """Every link that carried traffic, with its utilisation (busy time / step time,
    clipped to [0, 1]); on a mesh or torus small enough to draw link by link, the idle
    links are added too so the fabric shows."""
    wafer = wafer or result.wafer
    used: set[tuple[tuple[int, int], tuple[int, int]]] = set()
    links: list[LinkLoad] = []
    for lk in result.links:
        src, dst = tuple(lk.src), tuple(lk.dst)
        used.add((src, dst))
        links.append(LinkLoad(src, dst, min(max(lk.utilisation, 0.0), 1.0), lk.bytes, bool(lk.d2d)))
    if wafer.topology.value in ("mesh", "torus") and max(wafer.rows, wafer.cols) <= DETAIL_LIMIT:
        for link in wafer.links():
            src, dst = tuple(link.src), tuple(link.dst)
            # wrap-around links of a torus would cross the whole picture: only used ones
            near = abs(src[0] - dst[0]) + abs(src[1] - dst[1]) == 1
            if near and (src, dst) not in used:
                links.append(LinkLoad(src, dst, 0.0, 0, bool(link.is_d2d)))
    return LinkView(
        rows=wafer.rows,
        cols=wafer.cols,
        links=tuple(links),
        die_rows=wafer.die_rows,
        die_cols=wafer.die_cols,
        dead=frozenset(wafer.dead_cores),
        title=f"{result.plan.name} on {_where(wafer)}: links",
        unit=_unit(wafer),
    )


def timeline_view(
    plan: Plan, result: SimResult, ranks: Mapping[int, CoreRank] | None = None
) -> TimelineView:
    """One track per core that runs actors, grouped by pipeline stage and ordered by
    rank within a stage (``ranks``: core -> ``CoreRank``): its actors as compute spans
    (phase from the actor), its outgoing messages as sends (first hop) and incoming ones
    as receives (last hop), and the waits before its actors (``SimResult.waits``)."""
    n = len(plan.actors)
    if len(result.actor_start_ps) != n or len(result.msg_arrive_ps) != len(plan.messages):
        raise VizError(
            f"timeline: result has {len(result.actor_start_ps)} actors and "
            f"{len(result.msg_arrive_ps)} messages but plan {plan.name!r} has {n} and "
            f"{len(plan.messages)}; pass the plan that was simulated"
        )
    cores, names, stage_of = _tracks(plan, result.wafer, ranks)
    track_of = np.full(max(cores, default=0) + 1, -1, dtype=np.int64)
    track_of[cores] = np.arange(len(cores))
    actors = plan.actors
    core = np.fromiter((a.core for a in actors), np.int64, count=n)
    phase_code = {p: i for i, p in enumerate(PHASES)}
    phase = np.fromiter((phase_code[a.phase._value_] for a in actors), np.int8, count=n)
    # the columns, part by part: actors, then each remote message's send and receive,
    # then the waits
    parts = [(track_of[core], np.asarray(result.actor_start_ps, dtype=np.int64),
              np.asarray(result.actor_end_ps, dtype=np.int64),
              np.full(n, KINDS.index(SpanKind.COMPUTE)), phase)]  # fmt: skip
    msgs = _message_columns(plan, result, core)
    src, dst, send0, send1, recv0, recv1 = msgs
    parts.append((
        _pairs(track_of[core[src]], track_of[core[dst]]), _pairs(send0, recv0), _pairs(send1, recv1),
        _pairs(np.full(len(src), KINDS.index(SpanKind.SEND)),
            np.full(len(src), KINDS.index(SpanKind.RECV))),
        _pairs(phase[src], phase[src]),
    ))  # fmt: skip
    waits = result.waits()
    parts.append((
        track_of[np.fromiter((w.core for w in waits), np.int64, count=len(waits))],
        np.fromiter((w.start_ps for w in waits), np.int64, count=len(waits)),
        np.fromiter((w.end_ps for w in waits), np.int64, count=len(waits)),
        np.full(len(waits), KINDS.index(SpanKind.WAIT)),
        np.full(len(waits), PHASES.index("")),
    ))  # fmt: skip
    n_msg = len(src)

    def label(i: int) -> str:
        if i < n:
            return actors[i].name
        if i < n + 2 * n_msg:
            m = (i - n) // 2
            return f"{actors[src[m]].name}->{actors[dst[m]].name}"
        w = waits[i - n - 2 * n_msg]
        return f"wait ({w.kind.value}) for {actors[w.actor].name}"

    track, start, end, kind, phases = (np.concatenate(c) for c in zip(*parts, strict=True))
    spans = SpanColumns(track, start * _PS, end * _PS, kind, phases, label)
    stages = sorted(set(stage_of))
    several = len(stages) > 1
    return TimelineView(
        tracks=tuple(names) or ("(no cores)",),
        spans=spans,
        step_time_s=result.step_time_ps * _PS,
        title=f"{plan.name} on {_where(result.wafer)}: timeline",
        groups=tuple(f"stage {s}" for s in stages) if several else (),
        track_group=tuple(stages.index(s) for s in stage_of) if several else (),
    )


def _tracks(
    plan: Plan, wafer: Wafer, ranks: Mapping[int, CoreRank] | None
) -> tuple[list[int], list[str], list[int]]:
    """The cores with actors in (stage, rank, core) order, their track names and their
    stages (a core's stage: that of its first actor)."""
    stage = {c: plan.actors[ids[0]].stage for c, ids in plan.order if ids}
    unit = _unit(wafer)

    def key(c: int) -> tuple[int, int, int]:
        r = ranks.get(c) if ranks else None
        return (stage[c], r.rank if r is not None else 0, c)

    cores = sorted(plan.cores, key=key)
    names = []
    for c in cores:
        r = ranks.get(c) if ranks else None
        role = f"{r.label} " if r is not None and r.label else ""
        names.append(f"{role}{unit} {wafer.coord(c)}")
    return cores, names, [stage[c] for c in cores]


def _pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a[0], b[0], a[1], b[1], ...``: a message's send, then its receive."""
    return np.column_stack([a, b]).ravel()


def _message_columns(plan: Plan, result: SimResult, core: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per message between cores: its source and destination actors, and when it is
    sent (its first hop) and received (its last hop), in ps."""
    from waferflow.backend_sim.results import OccupancyArrays  # plain arrays, no simulation

    src = np.fromiter((m.src_actor for m in plan.messages), np.int64, count=len(plan.messages))
    dst = np.fromiter((m.dst_actor for m in plan.messages), np.int64, count=len(plan.messages))
    ids = np.flatnonzero(core[src] != core[dst])  # a local message stays in memory
    occ = OccupancyArrays.of(result.link_occupancy) if result.link_occupancy else None
    # without hops (or an occupancy) the whole flight, data start to arrival, is both
    send0 = np.asarray(result.msg_data_start_ps, dtype=np.int64)[ids]
    send1 = np.asarray(result.msg_arrive_ps, dtype=np.int64)[ids]
    recv0, recv1 = send0.copy(), send1.copy()
    if occ is not None:
        first, stop = occ.ptr[ids], occ.ptr[ids + 1]
        hops = stop > first
        send0[hops], send1[hops] = occ.start[first[hops]], occ.end[first[hops]]
        recv0[hops], recv1[hops] = occ.start[stop[hops] - 1], occ.end[stop[hops] - 1]
    return src[ids], dst[ids], send0, send1, recv0, recv1


def memory_view(result: SimResult, wafer: Wafer | None = None) -> MemoryView:
    """Each core's peak memory from the simulation against its SRAM (cores that run
    nothing use 0); coarse nodes with dead fine cores get their reduced capacity."""
    wafer = wafer or result.wafer
    n = wafer.rows * wafer.cols
    used = [0] * n
    for c in result.cores:
        if not 0 <= c.core < n:
            raise VizError(
                f"memory: core {c.core} of the result is not on wafer {wafer.name!r} "
                f"({wafer.rows}x{wafer.cols}); pass the simulated wafer"
            )
        used[c.core] = c.peak_mem_bytes
    capacity: tuple[int, ...] = ()
    if wafer.partial_cores:
        caps = [wafer.sram_bytes] * n
        for coord, _alive in wafer.partial_cores:
            caps[wafer.core_id(coord)] = max(1, wafer.core_sram_bytes(coord))
        capacity = tuple(caps)
    return MemoryView(
        rows=wafer.rows,
        cols=wafer.cols,
        used_bytes=tuple(used),
        capacity_bytes=wafer.sram_bytes,
        dead=frozenset(wafer.dead_cores),
        die_rows=wafer.die_rows,
        die_cols=wafer.die_cols,
        title=f"{result.plan.name} on {_where(wafer)}: memory",
        core_capacity=capacity,
        unit=_unit(wafer),
    )


__all__ = ["LabelBy", "link_view", "memory_view", "placement_view", "timeline_view"]

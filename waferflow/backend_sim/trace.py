"""Chrome / Perfetto trace of a simulated step (the JSON "Trace Event Format").

Process 1 has one track (thread) per core that runs actors, named by its pipeline stage,
its rank (when the plan's ranks are known) and its coordinate, sorted stage by stage.
On a track: a complete event ("ph": "X") per actor, and wait slices for the gaps the
core spent waiting for an input from another core ("wait: input") or, inputs in, for an
output buffer ("wait: buffer"); no slice is idle. Each message between cores is a flow
("s" in its producer, "f" bound to its consumer), drawn as an arrow from one to the
other. Counters ("ph": "C", see ``trace_counters``): each core's memory (process 1)
and the load of the busiest links and the mean over all used links (process 2),
sampled into ``counter_points`` bins. With ``link_tracks``, process 2 also has one
track per link with an event per message crossing it. Timestamps are microseconds.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from waferflow.backend_sim.analysis import WaitKind
from waferflow.backend_sim.trace_counters import bin_edges, link_loads, memory_peaks
from waferflow.fileio import write_bytes

if TYPE_CHECKING:
    from waferflow.backend_sim.results import SimResult
    from waferflow.parallel.ranks import CoreRank

CORES_PID = 1
LINKS_PID = 2
_FLOW_EDGE_PS = 1000  # flow ends sit this far inside their slices (Perfetto keeps ns)


@dataclass(frozen=True)
class TraceOptions:
    """What goes into a trace beyond the actors, waits and flows (always there)."""

    link_tracks: bool = False  # a track per used link, an event per message on it
    counter_points: int = 200  # samples per counter track over the step
    counter_links: int = 16  # the busiest links get a load counter each


# Events are written as JSON text as they are made: the bytes ``json.dumps(event,
# separators=(",", ":"))`` gives, without a dict per event for the 10^5-10^6 actors,
# waits and flows (the rare kinds are dicts through ``_compact``).
_compact = json.JSONEncoder(separators=(",", ":")).encode
_text = json.encoder.encode_basestring_ascii  # a string as json.dumps writes it


def _us(ps: float) -> float:
    return round(ps / 1e6, 6)


def _us_list(ps: Any) -> list[float]:
    """``_us`` of integer picoseconds, vectorised: for an integer below 2^53, ``ps /
    1e6`` is already the double nearest its 6-decimal value, so rounding keeps it."""
    return (np.asarray(ps, dtype=np.int64) / 1e6).tolist()


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> str:
    return _compact({"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args})


def track_names(result: SimResult, ranks: Mapping[int, CoreRank] | None) -> dict[int, str]:
    """Core -> ``'stage 0 dp1 tp3 · core (3, 0)'`` (``node`` on a coarse view; the rank
    only when known, the stage only when the plan has several)."""
    plan, wafer = result.plan, result.wafer
    unit = "node" if wafer.coarsen_factor > 1 else "core"
    stage = _core_stages(result)
    several = len(set(stage.values())) > 1
    out = {}
    for c in plan.cores:
        where = f"{unit} {wafer.coord(c)}"
        r = ranks.get(c) if ranks else None
        role = r.long_label if r is not None else (f"stage {stage[c]}" if several else "")
        out[c] = f"{role} · {where}" if role else where
    return out


def _core_stages(result: SimResult) -> dict[int, int]:
    """The stage of each core's first actor (a core runs one stage in parallel plans)."""
    stage: dict[int, int] = {}
    for c, ids in result.plan.order:
        if ids:
            stage[c] = result.plan.actors[ids[0]].stage
    return stage


def _track_order(result: SimResult, ranks: Mapping[int, CoreRank] | None) -> list[int]:
    stage = _core_stages(result)

    def key(c: int) -> tuple[int, int, int]:
        r = ranks.get(c) if ranks else None
        return (r.stage, r.rank, c) if r is not None else (stage[c], 0, c)

    return sorted(result.plan.cores, key=key)


def _core_events(result: SimResult, ranks: Mapping[int, CoreRank] | None) -> Iterator[str]:
    wafer = result.wafer
    unit = "nodes" if wafer.coarsen_factor > 1 else "cores"
    yield _meta("process_name", CORES_PID, 0, {"name": f"{unit} of {wafer.name}"})
    yield _meta("process_sort_index", CORES_PID, 0, {"sort_index": CORES_PID})
    names = track_names(result, ranks)
    for i, c in enumerate(_track_order(result, ranks)):
        yield _meta("thread_name", CORES_PID, c, {"name": names[c]})
        yield _meta("thread_sort_index", CORES_PID, c, {"sort_index": i})
    start = np.asarray(result.actor_start_ps, dtype=np.int64)
    ts, dur = _us_list(start), _us_list(np.asarray(result.actor_end_ps, dtype=np.int64) - start)
    cats: dict[tuple[str, str], str] = {}
    for a in result.plan.actors:
        # the track names the stage and rank; the module only when the name does not
        module = f',"module":{_text(a.module)}' if a.module and a.module not in a.name else ""
        key = (a.phase._value_, a.op_kind._value_)  # plain attributes: no Enum.__hash__
        cat = cats.get(key)
        if cat is None:
            cat = cats[key] = _text(",".join(key))
        i = a.id
        yield (
            f'{{"name":{_text(a.name)},"cat":{cat},"ph":"X","ts":{ts[i]!r},"dur":{dur[i]!r},'
            f'"pid":{CORES_PID},"tid":{a.core},"args":{{"actor":{i},"flops":{a.flops},'
            f'"bytes_read":{a.bytes_read},"bytes_written":{a.bytes_written},'
            f'"microbatch":{a.microbatch}{module}}}}}'
        )


def _wait_events(result: SimResult) -> Iterator[str]:
    plan, wafer = result.plan, result.wafer
    waits = result.waits()
    ts = _us_list([w.start_ps for w in waits])
    dur = _us_list([w.end_ps - w.start_ps for w in waits])
    names = {kind.value: _text(f"wait: {kind.value}") for kind in WaitKind}
    for i, w in enumerate(waits):
        # for the actor that follows on the track; an input wait names the message
        args = ""
        if w.message >= 0:
            src = plan.actors[plan.messages[w.message].src_actor]
            where = _text(f"actor {src.id} on {wafer.coord(src.core)}")
            args = f'"message":{w.message},"from":{where}'
        yield (
            f'{{"name":{names[w.kind._value_]},"cat":"wait","ph":"X","ts":{ts[i]!r},"dur":{dur[i]!r},'
            f'"pid":{CORES_PID},"tid":{w.core},"args":{{{args}}}}}'
        )


def _flow_events(result: SimResult) -> Iterator[str]:
    """One flow per message between cores: from its producer's slice (where it is sent,
    at the end) to its consumer's (which it lets start), ``_FLOW_EDGE_PS`` inside each
    slice (at most half of it) so that the flow binds to it. A flow's two events are
    one piece of text."""
    plan = result.plan
    if not plan.messages:
        return
    core = np.fromiter((a.core for a in plan.actors), dtype=np.int64, count=len(plan.actors))
    src = np.fromiter((m.src_actor for m in plan.messages), dtype=np.int64)
    dst = np.fromiter((m.dst_actor for m in plan.messages), dtype=np.int64)
    ids = np.fromiter((m.id for m in plan.messages), dtype=np.int64)
    remote = core[src] != core[dst]
    src, dst, ids = src[remote], dst[remote], ids[remote]
    start = np.asarray(result.actor_start_ps, dtype=np.int64)
    end = np.asarray(result.actor_end_ps, dtype=np.int64)
    sent = end[src] - np.minimum(_FLOW_EDGE_PS, (end[src] - start[src]) // 2)
    taken = start[dst] + np.minimum(_FLOW_EDGE_PS, (end[dst] - start[dst]) // 2)
    # a slice of a picosecond or two leaves no room inside: the send sits at its end,
    # which a reader finds as ts + dur of the written microseconds; that sum can round
    # an ulp below the end's own microseconds, so the send is clamped to it
    sent_us = np.minimum(sent / 1e6, start[src] / 1e6 + (end[src] - start[src]) / 1e6)
    for m, sc, dc, t0, t1 in zip(
        ids.tolist(), core[src].tolist(), core[dst].tolist(), sent_us.tolist(), _us_list(taken),
        strict=True,
    ):  # fmt: skip
        yield (
            f'{{"name":"message","cat":"message","id":{m},"pid":{CORES_PID},"ph":"s",'
            f'"tid":{sc},"ts":{t0!r}}},{{"name":"message","cat":"message","id":{m},'
            f'"pid":{CORES_PID},"ph":"f","bp":"e","tid":{dc},"ts":{t1!r}}}'
        )


def _counter(name: str, pid: int, key: str, times: np.ndarray, values: np.ndarray) -> Iterator[str]:
    """Samples of one counter; a sample equal to the one before is left out (a counter
    holds its value until the next), the last one always stays."""
    vals = [round(v, 3) for v in values.tolist()]
    last = len(vals) - 1
    for i, (t, v) in enumerate(zip(times.tolist(), vals, strict=True)):
        if 0 < i < last and v == vals[i - 1]:
            continue
        yield _compact(
            {"name": name, "ph": "C", "pid": pid, "tid": 0, "ts": _us(t), "args": {key: v}}
        )


def _counter_times(edges: np.ndarray, step_ps: int) -> np.ndarray:
    """A sample at each bin's start, and one at the end of the step."""
    return np.append(edges[:-1], float(step_ps))


def _memory_counters(result: SimResult, names: Mapping[int, str], points: int) -> Iterator[str]:
    step = result.step_time_ps
    edges = bin_edges(step, points)
    peaks = memory_peaks(result, edges)
    top = max((float(p.max()) for p in peaks.values()), default=0.0)
    unit, scale = ("MiB", 2**20) if top >= 10 * 2**20 else ("KiB", 2**10)
    for core, peak in peaks.items():
        values = np.append(peak, peak[-1]) / scale
        yield from _counter(f"memory {names[core]}", CORES_PID, unit,
                            _counter_times(edges, step), values)  # fmt: skip


def _link_counters(result: SimResult, options: TraceOptions) -> Iterator[str]:
    step = result.step_time_ps
    yield _meta("process_name", LINKS_PID, 0, {"name": "links"})
    yield _meta("process_sort_index", LINKS_PID, 0, {"sort_index": LINKS_PID})
    if not result.link_busy_ps:
        return
    edges = bin_edges(step, options.counter_points)
    times = _counter_times(edges, step)
    chosen = result.busiest_links(options.counter_links)
    rows, mean = link_loads(result, [lk.index for lk in chosen], edges)
    n = len(result.link_busy_ps)
    yield from _counter(f"link load: mean of {n} used links", LINKS_PID, "busy %", times,
                        np.append(mean, 0.0) * 100)  # fmt: skip
    for lk, row in zip(chosen, rows, strict=True):
        tag = " d2d" if lk.d2d else ""
        yield from _counter(f"link load {lk.src}->{lk.dst}{tag}", LINKS_PID, "busy %", times,
                            np.append(row, 0.0) * 100)  # fmt: skip


def _link_track_events(result: SimResult) -> Iterator[str]:
    plan = result.plan
    for lk in result.links:
        tag = " d2d" if lk.d2d else ""
        yield _meta("thread_name", LINKS_PID, lk.index, {"name": f"{lk.src}->{lk.dst}{tag}"})
    for m, (links, s_ps, e_ps) in enumerate(result.link_occupancy):
        msg = plan.messages[m]
        label = f"m{m} {plan.actors[msg.src_actor].name}->{plan.actors[msg.dst_actor].name}"
        for li, s, e in zip(links, s_ps, e_ps, strict=True):
            yield _compact(
                {
                    "name": label,
                    "cat": "message",
                    "ph": "X",
                    "ts": _us(s),
                    "dur": _us(e - s),
                    "pid": LINKS_PID,
                    "tid": li,
                    "args": {"message": m, "bytes": msg.bytes},
                }
            )


def trace_json(
    result: SimResult,
    link_tracks: bool = False,
    *,
    options: TraceOptions | None = None,
    ranks: Mapping[int, CoreRank] | None = None,
) -> str:
    """The trace as compact JSON text (what ``json.dumps(..., separators=(",", ":"))``
    writes), made event by event. ``ranks`` (core -> ``CoreRank``, from a parallel
    plan) puts each core's rank in its track name."""
    opts = options or TraceOptions(link_tracks=link_tracks)
    names = track_names(result, ranks)
    ev: list[str] = [*_core_events(result, ranks), *_wait_events(result)]
    ev += _flow_events(result)
    if result.step_time_ps > 0:
        ev += _memory_counters(result, names, opts.counter_points)
        ev += _link_counters(result, opts)
    if opts.link_tracks:
        ev += _link_track_events(result)
    other = {
        "plan": result.plan.name,
        "wafer": result.wafer.name,
        "step_time_ps": result.step_time_ps,
        "counters": (
            f"{opts.counter_points} samples per counter: link load = share of the "
            "sample the link was busy; memory = most bytes live in the sample"
        ),
    }
    events = ",".join(ev)
    return f'{{"traceEvents":[{events}],"displayTimeUnit":"ns","otherData":{_compact(other)}}}\n'


def chrome_trace(
    result: SimResult,
    link_tracks: bool = False,
    *,
    options: TraceOptions | None = None,
    ranks: Mapping[int, CoreRank] | None = None,
) -> dict[str, Any]:
    """The trace as a JSON-ready dict (``trace_json`` read back)."""
    return json.loads(trace_json(result, link_tracks, options=options, ranks=ranks))


def write_chrome_trace(
    result: SimResult,
    path: str | Path,
    link_tracks: bool = False,
    *,
    options: TraceOptions | None = None,
    ranks: Mapping[int, CoreRank] | None = None,
) -> Path:
    """Write the trace as compact JSON; gzip-compressed when ``path`` ends in ``.gz``
    (Perfetto and chrome://tracing open both)."""
    data = trace_json(result, link_tracks, options=options, ranks=ranks).encode("utf-8")
    if str(path).endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)  # mtime 0: same bytes
    return write_bytes(path, data)


__all__ = ["TraceOptions", "chrome_trace", "trace_json", "track_names", "write_chrome_trace"]

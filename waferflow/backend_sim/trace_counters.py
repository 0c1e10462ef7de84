"""Counter tracks of a trace, sampled into a bounded number of time bins.

A step with hundreds of thousands of actors would give millions of counter changes;
instead each counter has one value per bin of ``step / points``:

* **link load**: the share of the bin the link spent serialising packets. Each message
  crossing a link holds it from its first packet entering to its last leaving; its part
  of the link's busy time (``SimResult.link_busy_ps``, split between the messages in
  proportion to their bytes, exact when packets are full) is spread evenly over that
  interval. The bins of a link add up to its busy time.
* **memory**: the most bytes live on the core at any moment of the bin (resident bytes
  plus buffers, ``analysis.memory_events``), so a short peak is never averaged away.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from waferflow.backend_sim.analysis import memory_event_arrays, memory_events, times_fit_int64
from waferflow.backend_sim.results import OccupancyArrays

if TYPE_CHECKING:
    from waferflow.backend_sim.results import SimResult


def bin_edges(step_ps: int, points: int) -> np.ndarray:
    """``points + 1`` edges from 0 to the step (ps)."""
    return np.linspace(0.0, float(step_ps), max(1, points) + 1)


def spread(s: np.ndarray, e: np.ndarray, amount: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """How much of ``amount`` falls in each bin when each is spread evenly over its
    interval ``[s, e]`` (an interval of no length puts all of it in the bin of ``s``).
    Exact: the running total is piecewise linear, so it is read at the edges."""
    out = np.zeros(len(edges) - 1)
    point = e <= s
    if (~point).any():
        s1, e1 = s[~point], e[~point]
        rate = amount[~point] / (e1 - s1)
        t = np.concatenate([s1, e1])
        dr = np.concatenate([rate, -rate])
        order = np.argsort(t, kind="stable")
        t, dr = t[order], dr[order]
        slope = np.cumsum(dr)[:-1]  # between consecutive breakpoints
        total = np.concatenate([[0.0], np.cumsum(slope * np.diff(t))])
        out += np.diff(np.interp(edges, t, total))
    if point.any():
        idx = np.clip(np.searchsorted(edges, s[point], side="right") - 1, 0, len(out) - 1)
        np.add.at(out, idx, amount[point])
    return out


def _link_spans(result: SimResult) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(link, start, end, busy share) of every message on every hop."""
    occ = OccupancyArrays.of(result.link_occupancy)
    link = occ.link
    nbytes = np.fromiter((m.bytes for m in result.plan.messages), np.float64)
    w = np.repeat(nbytes[: len(occ.ptr) - 1], np.diff(occ.ptr))
    busy = np.asarray(result.link_busy_ps, dtype=np.float64)
    total = np.bincount(link, weights=w, minlength=len(busy)) if len(link) else busy * 0
    count = np.bincount(link, minlength=len(busy)) if len(link) else busy * 0
    # by bytes; a link that carried only empty messages splits its (header) time evenly
    bytes_share = np.divide(w, total[link], out=np.zeros_like(w), where=total[link] > 0)
    even = 1.0 / np.maximum(count[link], 1)
    share = np.where(total[link] > 0, bytes_share, even) * busy[link]
    return link, occ.start.astype(np.float64), occ.end.astype(np.float64), share


def link_loads(
    result: SimResult, chosen: Sequence[int], edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Busy fraction per bin of each ``chosen`` link (rows) and the mean over every used
    link."""
    width = np.diff(edges)
    width = np.where(width > 0, width, 1.0)
    link, s, e, share = _link_spans(result)
    rows = np.zeros((len(chosen), len(width)))
    for i, li in enumerate(chosen):
        mask = link == li
        rows[i] = spread(s[mask], e[mask], share[mask], edges) / width
    n_links = max(len(result.link_busy_ps), 1)
    mean = spread(s, e, share, edges) / width / n_links
    return rows, mean


def memory_peaks(result: SimResult, edges: np.ndarray) -> dict[int, np.ndarray]:
    """Per core that runs actors: the most bytes live in each bin (as the wafer's memory
    model allocated them, when it has one)."""
    times = (result.actor_end_ps, result.msg_arrive_ps)
    if not result.memory_log and times_fit_int64(*times):
        resident, ev_core, ev_t, ev_d = memory_event_arrays(
            result.plan, result.actor_start_ps, result.actor_end_ps,
            result.msg_data_start_ps, result.msg_arrive_ps,
        )  # fmt: skip
        cuts = [*np.searchsorted(ev_core, sorted(resident), side="left").tolist(), len(ev_core)]
        events = {
            c: (ev_t[a:b], ev_d[a:b])
            for c, a, b in zip(sorted(resident), cuts[:-1], cuts[1:], strict=True)
        }
    else:
        if result.memory_log:
            resident = {c: 0 for c, _ in result.memory_log}
            deltas = {c: list(ev) for c, ev in result.memory_log}
        else:
            resident, deltas = memory_events(
                result.plan,
                result.actor_start_ps,
                result.actor_end_ps,
                result.msg_data_start_ps,
                result.msg_arrive_ps,
            )
        events = {}
        for core in resident:
            pairs = np.asarray(deltas.get(core, ()), dtype=np.int64).reshape(-1, 2)
            # in time order, frees before allocations at equal times
            pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
            events[core] = (pairs[:, 0], pairs[:, 1])
    bins = len(edges) - 1
    out: dict[int, np.ndarray] = {}
    for core in sorted(resident):
        ts, ds = events[core]
        if not len(ts):
            out[core] = np.full(bins, float(resident[core]))
            continue
        t = ts.astype(np.float64)
        live = np.cumsum(ds.astype(np.float64))
        first = np.searchsorted(t, edges[:-1], side="left")
        peak = np.where(first > 0, live[np.maximum(first - 1, 0)], 0.0)
        where = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
        np.maximum.at(peak, where, live)
        out[core] = resident[core] + peak
    return out


__all__ = ["bin_edges", "link_loads", "memory_peaks", "spread"]

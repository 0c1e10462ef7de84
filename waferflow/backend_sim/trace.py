"""Chrome / Perfetto trace of a simulated step (the JSON "Trace Event Format").

Process 1 holds one track (thread) per core that runs actors, with a complete
("ph": "X") event per actor; process 2, when asked, one track per link with an event
per message crossing it, from its first packet entering the link to its last packet
leaving it. Timestamps are microseconds, as the format wants.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waferflow.fileio import write_text

if TYPE_CHECKING:
    from waferflow.backend_sim.results import SimResult

CORES_PID = 1
LINKS_PID = 2


def _us(ps: int) -> float:
    return round(ps / 1e6, 6)


def chrome_trace(result: SimResult, link_tracks: bool = False) -> dict[str, Any]:
    """The trace as a JSON-ready dict."""
    plan = result.plan
    cols = result.wafer.cols
    ev: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": CORES_PID, "tid": 0,
         "args": {"name": f"cores of {result.wafer.name}"}},
        {"name": "process_sort_index", "ph": "M", "pid": CORES_PID, "tid": 0,
         "args": {"sort_index": CORES_PID}},
    ]  # fmt: skip
    for c in plan.cores:
        ev.append(
            {"name": "thread_name", "ph": "M", "pid": CORES_PID, "tid": c,
             "args": {"name": f"core {c} {divmod(c, cols)}"}}
        )  # fmt: skip
        ev.append(
            {"name": "thread_sort_index", "ph": "M", "pid": CORES_PID, "tid": c,
             "args": {"sort_index": c}}
        )  # fmt: skip
    start, end = result.actor_start_ps, result.actor_end_ps
    for a in plan.actors:
        ev.append(
            {
                "name": a.name,
                "cat": f"{a.phase.value},{a.op_kind.value}",
                "ph": "X",
                "ts": _us(start[a.id]),
                "dur": _us(end[a.id] - start[a.id]),
                "pid": CORES_PID,
                "tid": a.core,
                "args": {
                    "actor": a.id,
                    "flops": a.flops,
                    "bytes_read": a.bytes_read,
                    "bytes_written": a.bytes_written,
                    "module": a.module,
                    "stage": a.stage,
                    "microbatch": a.microbatch,
                },
            }
        )
    if link_tracks:
        ev.append(
            {"name": "process_name", "ph": "M", "pid": LINKS_PID, "tid": 0,
             "args": {"name": "links"}}
        )  # fmt: skip
        ev.append(
            {"name": "process_sort_index", "ph": "M", "pid": LINKS_PID, "tid": 0,
             "args": {"sort_index": LINKS_PID}}
        )  # fmt: skip
        for lk in result.links:
            tag = " d2d" if lk.d2d else ""
            ev.append(
                {"name": "thread_name", "ph": "M", "pid": LINKS_PID, "tid": lk.index,
                 "args": {"name": f"{lk.src}->{lk.dst}{tag}"}}
            )  # fmt: skip
        for m, (links, s_ps, e_ps) in enumerate(result.link_occupancy):
            msg = plan.messages[m]
            label = f"m{m} {plan.actors[msg.src_actor].name}->{plan.actors[msg.dst_actor].name}"
            for li, s, e in zip(links, s_ps, e_ps, strict=True):
                ev.append(
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
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "plan": plan.name,
            "wafer": result.wafer.name,
            "step_time_ps": result.step_time_ps,
        },
    }


def write_chrome_trace(result: SimResult, path: str | Path, link_tracks: bool = False) -> None:
    doc = chrome_trace(result, link_tracks=link_tracks)
    write_text(path, json.dumps(doc, separators=(",", ":")) + "\n")  # atomically


__all__ = ["chrome_trace", "write_chrome_trace"]

"""The Perfetto / Chrome trace: loaded back and checked against the Trace Event Format
(required keys per phase, paired flows bound inside their slices, counters) and against
the simulation it came from."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from waferflow.backend_sim import SimResult, simulate
from waferflow.backend_sim.analysis import WaitKind
from waferflow.backend_sim.trace import CORES_PID, LINKS_PID, TraceOptions, chrome_trace
from waferflow.backend_sim.trace_counters import bin_edges, spread
from waferflow.ir.plan import Message, Plan
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel.ranks import CoreRank

from ._helpers import actor, wafer
from .test_contention import one_buffer_case
from .test_properties import SETTINGS, mesh_cases

L = 7000  # ps of link latency in the helper wafer
PS_PER_BYTE = 1000  # at the helper wafer's 1 GB/s

_REQUIRED = {
    "X": {"name", "ts", "dur", "pid", "tid"},
    "M": {"name", "pid", "args"},
    "C": {"name", "ts", "pid", "args"},
    "s": {"name", "cat", "id", "ts", "pid", "tid"},
    "f": {"name", "cat", "id", "ts", "pid", "tid", "bp"},
}


def _load(res: SimResult, tmp_path: Path, **kw: Any) -> list[dict[str, Any]]:
    path = res.to_chrome_trace(tmp_path / "trace.json", **kw)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["displayTimeUnit"] == "ns" and doc["otherData"]["plan"] == res.plan.name
    return doc["traceEvents"]


def check_format(events: list[dict[str, Any]]) -> None:
    """Required keys of each phase, numbers where numbers go, and every flow id with
    one start and one end, each strictly inside (or at the start of) a slice of its
    own track."""
    for e in events:
        assert e["ph"] in _REQUIRED, e
        assert _REQUIRED[e["ph"]] <= e.keys(), e
        if "ts" in e:
            assert isinstance(e["ts"], float | int) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, float | int) for v in e["args"].values())
    slices = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e))
    flows: dict[Any, dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in events:
        if e["ph"] in "sf":
            assert e["ph"] not in flows[e["id"]], f"flow {e['id']} has two {e['ph']!r}"
            flows[e["id"]][e["ph"]] = e
            assert any(a <= e["ts"] <= b for a, b, _ in slices[(e["pid"], e["tid"])]), e
    for fid, ends in flows.items():
        assert set(ends) == {"s", "f"}, f"flow {fid} is not paired"
        assert ends["s"]["name"] == ends["f"]["name"] and ends["s"]["cat"] == ends["f"]["cat"]


def _by_phase(events: list[dict[str, Any]], ph: str) -> list[dict[str, Any]]:
    return [e for e in events if e["ph"] == ph]


def _plan() -> Plan:
    return Plan.build(
        "mem", "test",
        [
            actor(0, 0, flops=1000, mem_bytes=1000, out_bytes=200),
            actor(1, 0, flops=2000, out_bytes=50),
            actor(2, 1, mem_bytes=5, out_bytes=10, flops=1000),
        ],
        [Message(0, 0, 1, 64), Message(1, 0, 2, 300)],
    )  # fmt: skip


def test_actors_waits_flows_and_counters_by_hand(tmp_path: Path) -> None:
    res = simulate(_plan(), wafer(1, 4))
    arrive = 1000 + 300 * PS_PER_BYTE + L
    assert res.msg_arrive_ps[1] == arrive
    events = _load(res, tmp_path)
    check_format(events)
    xs = _by_phase(events, "X")
    actors = {e["args"]["actor"]: e for e in xs if e.get("cat", "").startswith("fwd")}
    assert sorted(actors) == [0, 1, 2]
    assert actors[2]["tid"] == 1 and actors[2]["ts"] == arrive / 1e6
    # core 1 waits for a0's message from the start of the step until it lands
    (wait,) = [e for e in xs if e["cat"] == "wait"]
    assert wait["name"] == "wait: input" and wait["tid"] == 1
    assert (wait["ts"], wait["dur"]) == (0.0, arrive / 1e6)
    assert wait["args"] == {"message": 1, "from": "actor 0 on (0, 0)"}
    # one flow (the local message 0 is none): a0's end on core 0 to a2 on core 1
    s, f = _by_phase(events, "s"), _by_phase(events, "f")
    assert [(e["id"], e["tid"]) for e in s] == [(1, 0)]
    assert [(e["id"], e["tid"]) for e in f] == [(1, 1)]
    assert s[0]["ts"] == (1000 - 500) / 1e6  # inside a0 (1 ns long), half way from its end
    assert f[0]["ts"] == (arrive + 500) / 1e6 and f[0]["bp"] == "e"
    # counters: each core's memory peaks at the simulated peak, the link is busy 300 ns
    counters = _by_phase(events, "C")
    mem = defaultdict(list)
    for e in counters:
        if e["name"].startswith("memory"):
            assert e["pid"] == CORES_PID
            mem[e["name"]].append(e["args"]["KiB"])
    # 1000 resident + a0's 200 + a1's 50; 5 resident + the 300 B received + a2's 10
    assert [c.peak_mem_bytes for c in res.cores] == [1250, 315]
    assert max(mem["memory core (0, 0)"]) == round(1250 / 1024, 3)
    assert max(mem["memory core (0, 1)"]) == round(315 / 1024, 3)
    link = [e for e in counters if e["name"] == "link load (0, 0)->(0, 1)"]
    assert link and all(e["pid"] == LINKS_PID for e in link)
    assert max(e["args"]["busy %"] for e in link) == 100.0
    assert link[-1]["ts"] == res.step_time_ps / 1e6 and link[-1]["args"]["busy %"] == 0.0
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names[(1, 0)] == "core (0, 0)" and names[(1, 1)] == "core (0, 1)"


def test_link_tracks_are_an_option_of_compile_and_simulate_alike(tmp_path: Path) -> None:
    res = simulate(_plan(), wafer(1, 4))
    plain = _load(res, tmp_path)
    assert not [e for e in plain if e["ph"] == "X" and e["pid"] == LINKS_PID]
    events = _load(res, tmp_path, link_tracks=True)
    check_format(events)
    (msg,) = [e for e in events if e["ph"] == "X" and e["pid"] == LINKS_PID]
    assert msg["dur"] == 300 * PS_PER_BYTE / 1e6 and msg["args"]["message"] == 1
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names[(LINKS_PID, 0)] == "(0, 0)->(0, 1)"


def test_a_gz_path_writes_the_same_trace_compressed(tmp_path: Path) -> None:
    import gzip

    res = simulate(_plan(), wafer(1, 4))
    plain = res.to_chrome_trace(tmp_path / "t.json").read_bytes()
    packed = res.to_chrome_trace(tmp_path / "t.json.gz").read_bytes()
    assert gzip.decompress(packed) == plain
    assert res.to_chrome_trace(tmp_path / "u.json.gz").read_bytes() == packed  # same bytes


def test_buffer_waits_are_told_apart_from_input_waits(tmp_path: Path) -> None:
    # one output buffer per core: a1 on core 0 waits for a0's message to be delivered
    plan, w = one_buffer_case()
    res = simulate(plan, w)
    t = 1000 * PS_PER_BYTE
    waits = res.waits()
    assert [(x.core, x.kind, x.start_ps, x.end_ps, x.actor) for x in waits] == [
        (0, WaitKind.BUFFER, 0, 3 * (t + L), 1),
        (1, WaitKind.INPUT, 0, res.msg_arrive_ps[1], 3),
        (3, WaitKind.INPUT, 0, res.msg_arrive_ps[0], 2),
    ]
    events = _load(res, tmp_path)
    check_format(events)
    assert sorted(e["name"] for e in events if e.get("cat") == "wait") == [
        "wait: buffer", "wait: input", "wait: input",
    ]  # fmt: skip


def test_rank_and_stage_name_the_tracks_in_stage_order() -> None:
    plan = Plan.build(
        "pp", "test",
        [actor(0, 2, flops=10, stage=0), actor(1, 0, flops=10, stage=1),
         actor(2, 1, flops=10, stage=1)],
        [Message(0, 0, 1, 100), Message(1, 0, 2, 100)],
    )  # fmt: skip
    res = simulate(plan, wafer(1, 4))
    ranks = {2: CoreRank(0, 0, 1), 0: CoreRank(1, 0, 2, tp=0), 1: CoreRank(1, 1, 2, tp=1)}
    events = chrome_trace(res, ranks=ranks)["traceEvents"]
    check_format(events)
    name = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    order = {e["tid"]: e["args"]["sort_index"] for e in events if e["name"] == "thread_sort_index"}
    assert name == {2: "stage 0 · core (0, 2)", 0: "stage 1 tp0 · core (0, 0)",
                    1: "stage 1 tp1 · core (0, 1)"}  # fmt: skip
    assert sorted(order, key=order.__getitem__) == [2, 0, 1]
    # without ranks: the stage alone; a coarse view says node
    bare = chrome_trace(res)["traceEvents"]
    name = {e["tid"]: e["args"]["name"] for e in bare if e["name"] == "thread_name"}
    assert name[0] == "stage 1 · core (0, 0)"
    coarse = simulate(plan, _coarse(wafer(1, 4)))
    name = {e["tid"]: e["args"]["name"] for e in chrome_trace(coarse)["traceEvents"]
            if e["name"] == "thread_name"}  # fmt: skip
    assert name[0] == "stage 1 · node (0, 0)"
    process = [e["args"]["name"] for e in chrome_trace(coarse)["traceEvents"]
               if e["name"] == "process_name"]  # fmt: skip
    assert process[0].startswith("nodes of")


def _coarse(w: Wafer) -> Wafer:
    from dataclasses import replace

    return replace(w, coarsen_factor=2)


def test_spread_by_hand() -> None:
    edges = np.array([0.0, 5.0, 10.0, 15.0])
    s, e = np.array([0.0, 2.0, 12.0]), np.array([10.0, 2.0, 14.0])
    out = spread(s, e, np.array([10.0, 3.0, 4.0]), edges)
    assert out.tolist() == [5.0 + 3.0, 5.0, 4.0]
    assert spread(np.array([]), np.array([]), np.array([]), edges).tolist() == [0, 0, 0]


@given(
    st.lists(
        st.tuples(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 500)), max_size=20
    ),
    st.integers(1, 50),
)
def test_spread_keeps_every_amount(spans: list[tuple[int, int, int]], points: int) -> None:
    s = np.array([min(a, b) for a, b, _ in spans], dtype=float)
    e = np.array([max(a, b) for a, b, _ in spans], dtype=float)
    amount = np.array([x for *_, x in spans], dtype=float)
    out = spread(s, e, amount, bin_edges(1000, points))
    assert len(out) == points
    assert out.sum() == pytest.approx(amount.sum(), abs=1e-6)
    assert (out >= -1e-9).all()


@SETTINGS
@given(mesh_cases())
def test_trace_of_random_plans(case: tuple[Plan, Wafer, Any]) -> None:
    plan, w, cfg = case
    res = simulate(plan, w, cfg)
    opts = TraceOptions(counter_points=7, counter_links=50)
    doc = chrome_trace(res, options=opts)
    events = doc["traceEvents"]
    check_format(events)
    remote = [m for m in plan.messages
              if plan.actors[m.src_actor].core != plan.actors[m.dst_actor].core]  # fmt: skip
    assert len(_by_phase(events, "s")) == len(remote)
    # waits never overlap the core's actors; input waits cover at least the comm time
    by_core = defaultdict(list)
    for a in plan.actors:
        by_core[a.core].append((res.actor_start_ps[a.id], res.actor_end_ps[a.id]))
    waited = defaultdict(int)
    for x in res.waits():
        assert x.end_ps > x.start_ps
        assert all(x.end_ps <= s or x.start_ps >= e for s, e in by_core[x.core] if e > s)
        if x.kind is WaitKind.INPUT:
            waited[x.core] += x.end_ps - x.start_ps
    for c in res.cores:
        assert waited[c.core] >= c.comm_ps
    if res.step_time_ps == 0:
        return
    # counters: memory peaks at the simulated peak; link loads add up to the busy time
    from waferflow.backend_sim.trace_counters import link_loads, memory_peaks

    edges = bin_edges(res.step_time_ps, 7)
    peaks = memory_peaks(res, edges)
    assert {c: int(p.max()) for c, p in peaks.items()} == {
        c.core: c.peak_mem_bytes for c in res.cores
    }
    rows, mean = link_loads(res, list(range(len(res.link_busy_ps))), edges)
    width = np.diff(edges)
    for busy, row in zip(res.link_busy_ps, rows, strict=True):
        assert (row * width).sum() == pytest.approx(busy, rel=1e-9, abs=1e-3)
    assert (mean * width).sum() * max(len(res.link_busy_ps), 1) == pytest.approx(
        sum(res.link_busy_ps), rel=1e-9, abs=1e-3
    )


def test_the_text_is_what_json_dumps_writes(tmp_path: Path) -> None:
    """Events are formatted as text, not dicts: the file is the compact JSON a
    standard encoder writes for what it holds, escapes of odd names included."""
    plan = Plan.build(
        "odd \"name\" ✓", "test",
        [actor(0, 0, flops=1000, out_bytes=200, name='a "0" \\ ✓'),
         actor(1, 1, flops=2000, name="b\n1", module="m ✓")],
        [Message(0, 0, 1, 64)],
    )  # fmt: skip
    path = simulate(plan, wafer(1, 4)).to_chrome_trace(tmp_path / "trace.json")
    text = path.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), separators=(",", ":")) + "\n"
    names = {e["name"] for e in json.loads(text)["traceEvents"]}
    assert {'a "0" \\ ✓', "b\n1"} <= names


def test_a_flow_from_a_one_picosecond_slice_stays_inside_it() -> None:
    """A send sits at the end of a slice too short to hold it further inside; written
    in microseconds, ts + dur of that slice (0.392207 + 0.000001) rounds an ulp below
    its end (0.392208): the send is clamped so that it still binds to the slice (a
    hypothesis example found it)."""
    w = wafer(1, 2, peak=1e12)
    plan = Plan.build(
        "edge", "test", [actor(0, 1, 392207), actor(1, 1, 1), actor(2, 0)], [Message(0, 1, 2, 0)]
    )
    res = simulate(plan, w)
    assert (res.actor_start_ps[1], res.actor_end_ps[1]) == (392207, 392208)
    check_format(chrome_trace(res)["traceEvents"])

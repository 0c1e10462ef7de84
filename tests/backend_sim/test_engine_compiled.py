"""The compiled event loop (``engine_jit``, numba) against the pure-Python one
(``engine.run_python``, the engine as it was before it was compiled): on random plans
with every mechanism a wafer can switch on, the two give the same run, event for
event: every time of every actor, message and hop, the step, the event count."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waferflow.backend_sim import SimConfig, SimResult, engine_jit, simulate
from waferflow.backend_sim.engine import run, run_python
from waferflow.backend_sim.network import prepare
from waferflow.errors import ConfigError, PlanError
from waferflow.ir.plan import HostTransfer, Message, Plan
from waferflow.ir.target.wafer import FlowControl, LinkSpec, MemoryModel, Topology, Wafer

from ._helpers import GBPS, NS, actor, wafer

pytestmark = pytest.mark.skipif(not engine_jit.AVAILABLE, reason="numba is not installed")

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cases(draw: st.DrawFn) -> tuple[Plan, Wafer, SimConfig]:
    """A small wafer with any of: dies and a d2d link, flow control (headers, req/ack
    with resends, stream caps, bounded output buffers), a host link; a plan with
    broadcasts, host transfers and messages that go forward in id order (so no
    deadlock), many of them at once so that links and streams are contended."""
    topology = draw(st.sampled_from([Topology.MESH, Topology.TORUS, Topology.CROSSBAR]))
    rows = 1 if topology is Topology.CROSSBAR else draw(st.integers(1, 3))
    cols = draw(st.integers(2, 5))
    die_cols = draw(st.sampled_from([d for d in (1, 2) if cols % d == 0]))
    d2d = LinkSpec(0.5 * GBPS, draw(st.integers(0, 30)) * NS) if die_cols > 1 else None
    flow = None
    if draw(st.booleans()):
        flow = FlowControl(
            packet_bytes=draw(st.sampled_from([64, 100, 300])),
            header_packets=draw(st.integers(0, 1)),
            buffers_per_core=draw(st.integers(0, 2)),
            handshake=draw(st.booleans()),
            retry_cycles=draw(st.integers(0, 7)),
            max_streams=draw(st.integers(0, 2)),
        )
    w = wafer(
        rows, cols, topology=topology, die_cols=die_cols, d2d=d2d, flow=flow,
        lat=draw(st.integers(0, 12)) * NS, bw=draw(st.sampled_from([0.5, 1.0, 3.0])) * GBPS,
    )  # fmt: skip
    if draw(st.booleans()):
        w = dataclasses.replace(w, host=LinkSpec(2 * GBPS, draw(st.integers(0, 10)) * NS))
    n_cores = rows * cols
    n = draw(st.integers(2, 10))
    actors = [
        actor(i, draw(st.integers(0, n_cores - 1)), flops=draw(st.sampled_from([0, 0, 1000, 7000])),
              out_bytes=draw(st.sampled_from([0, 100, 4000])), mem_bytes=draw(st.integers(0, 50)))
        for i in range(n)
    ]  # fmt: skip
    msgs: list[Message] = []
    for _ in range(draw(st.integers(0, 16))):
        a = draw(st.integers(0, n - 2))
        b = draw(st.integers(a + 1, n - 1))
        bcast = draw(st.sampled_from([-1, -1, 0, 1]))
        holds = draw(st.booleans())  # False: the consumer recomputes the value
        msgs.append(Message(len(msgs), a, b, draw(st.integers(0, 900)), bcast=bcast, holds=holds))
    host = [
        HostTransfer(draw(st.integers(0, n - 1)), draw(st.integers(0, 700)),
                     to_host=draw(st.booleans()))
        for _ in range(draw(st.integers(0, 4)))
    ]  # fmt: skip
    plan = Plan.build("rand", w.name, actors, msgs, host=host)
    pb = draw(st.sampled_from([None, 64, 256]))
    return plan, w, SimConfig(packet_bytes=pb)


def assert_same(a: SimResult, b: SimResult) -> None:
    for f in dataclasses.fields(SimResult):
        if f.name not in ("plan", "wafer"):
            assert getattr(a, f.name) == getattr(b, f.name), f.name


@SETTINGS
@given(cases())
def test_compiled_loop_is_the_python_loop_event_for_event(
    case: tuple[Plan, Wafer, SimConfig],
) -> None:
    plan, w, cfg = case
    py = simulate(plan, w, dataclasses.replace(cfg, engine="python"))
    jit = simulate(plan, w, dataclasses.replace(cfg, engine="compiled"))
    assert_same(py, jit)
    assert simulate(plan, w, cfg).events == py.events  # auto picks the compiled loop


def test_a_ring_allreduce_under_contention_matches() -> None:
    """Many messages on shared links at once, with ties: the order of equal-time
    events decides who goes first, so the seq order must be the same too."""
    from ._helpers import ring_allreduce_plan

    w = wafer(2, 4, lat=3 * NS)
    plan = ring_allreduce_plan([0, 1, 2, 3, 7, 6, 5, 4], 64_000)
    cfg = SimConfig(packet_bytes=512)
    py = simulate(plan, w, dataclasses.replace(cfg, engine="python"))
    jit = simulate(plan, w, dataclasses.replace(cfg, engine="compiled"))
    assert_same(py, jit)
    assert py.events > 100


def test_the_memory_model_runs_in_python_and_compiled_says_why_not() -> None:
    w = dataclasses.replace(
        wafer(1, 2), memory=MemoryModel(block_bytes=100, lookahead=2, first_fit=True)
    )
    plan = Plan.build("m", w.name, [actor(0, 0, out_bytes=100), actor(1, 1)],
                      [Message(0, 0, 1, 100)])  # fmt: skip
    p = prepare(plan, w, SimConfig())
    assert run(p).events == run_python(p).events  # auto: the pure-Python loop
    with pytest.raises(ConfigError, match="memory model"):
        run(p, "compiled")


def test_times_past_int64_fall_back_to_python() -> None:
    """A compute time near 2**62 ps cannot be held by the compiled loop's int64: auto
    runs Python (exact integers), compiled refuses."""
    # 1 FLOP/s (the least a wafer may declare): 10**10 FLOPs take 1e22 ps (past int64
    # alone); 3 * 10**6 FLOPs take 3e18 ps, which fits, but two in a row pass 2**62
    for flops in (10**10, 3 * 10**6):
        w = wafer(1, 2, peak=1.0)
        plan = Plan.build("slow", w.name, [actor(0, 0, flops=flops), actor(1, 1, flops=flops)],
                          [Message(0, 0, 1, 8)])  # fmt: skip
        res = simulate(plan, w)
        assert res.step_time_ps > 2**62
        assert res == simulate(plan, w, SimConfig(engine="python"))
    with pytest.raises(ConfigError, match="2\\*\\*62"):
        simulate(plan, w, SimConfig(engine="compiled"))


def test_a_deadlock_is_the_same_error() -> None:
    """Two cores each wait for the other's second actor first: both loops stop with
    the same PlanError (verification off, or it would refuse the plan earlier)."""
    w = wafer(1, 2)
    actors = [actor(0, 0), actor(1, 0), actor(2, 1), actor(3, 1)]
    msgs = [Message(0, 1, 2, 8), Message(1, 3, 0, 8)]
    plan = Plan.build("dead", w.name, actors, msgs)
    errors = []
    for engine in ("python", "compiled"):
        with pytest.raises(PlanError, match="deadlocks") as err:
            simulate(plan, w, SimConfig(verify=False, engine=engine))
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_engine_option_is_checked() -> None:
    with pytest.raises(ConfigError, match="engine"):
        SimConfig(engine="fast")


@SETTINGS
@given(cases())
def test_peak_memory_on_arrays_is_the_loop(case: tuple[Plan, Wafer, SimConfig]) -> None:
    """The vectorised peak memory (int64 arrays) against the event-by-event sum."""
    from waferflow.backend_sim import analysis

    plan, w, cfg = case
    p = prepare(plan, w, cfg)
    raw = run(p)
    args = (plan, p, raw.start, raw.end, raw.data_start, raw.arrive)
    assert analysis._peak_memory_arrays(*args) == analysis._peak_memory_loop(*args)


@SETTINGS
@given(cases())
def test_waits_on_arrays_are_the_loop(case: tuple[Plan, Wafer, SimConfig]) -> None:
    """The vectorised waits (int64 arrays) against the actor-by-actor walk, and the
    memory events as arrays against the event lists."""
    from waferflow.backend_sim import analysis

    plan, w, cfg = case
    raw = run(prepare(plan, w, cfg))
    args = (plan, raw.start, raw.end, raw.arrive)
    assert analysis._core_waits_arrays(*args) == analysis._core_waits_loop(*args)
    resident, deltas = analysis.memory_events(plan, raw.start, raw.end, raw.data_start, raw.arrive)
    res, core, t, d = analysis.memory_event_arrays(
        plan, raw.start, raw.end, raw.data_start, raw.arrive
    )
    assert res == resident
    flat = sorted((c, x, y) for c, ev in deltas.items() for x, y in ev)
    assert list(zip(core.tolist(), t.tolist(), d.tolist(), strict=True)) == flat

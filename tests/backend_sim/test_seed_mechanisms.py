"""The seed machine's mechanisms as wafer parameters of the general simulator, each
checked against a closed form: the core model (R + C + W + fixed cycles), broadcast
and split streams, req resent until a stream frees, the host's links, and a
first-fit block allocator that makes an actor wait."""

from __future__ import annotations

import dataclasses
import math

import pytest

from waferflow.backend_sim import compute_ps, core_ps, roofline_ps, simulate
from waferflow.errors import PlanError
from waferflow.ir.dtypes import DType
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import Actor, HostTransfer, Message, OpWork, Plan
from waferflow.ir.target import get_wafer
from waferflow.ir.target.wafer import CoreModel, FlowControl, LinkSpec, MemoryModel, Topology, Wafer

K = OpKind
NS = 1000  # ps
AMCODA = get_wafer("amcoda")
CYCLE = 10_000  # ps at 100 MHz


def xbar(n: int = 4, **kw: object) -> Wafer:
    """A crossbar at 1 GHz: 1 GB/s links (1 ns per byte), 10 ns per hop."""
    return Wafer(
        name="xbar", rows=1, cols=n, topology=Topology.CROSSBAR, clock_hz=1e9,
        peak_flops=((DType.F32, 1e12),), sram_bytes=1 << 20, sram_bandwidth=1e12,
        link=LinkSpec(1e9, 10e-9), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


# -- the core model ----------------------------------------------------------------------


def test_seed_alu_is_reads_plus_compute_plus_writes_plus_two() -> None:
    """The design brief's check: conv1 forward of the seed CNN takes 50,176 + 225,792 +
    50,176 + 2 = 326,146 cycles (R = largest operand / 32 floats, C = MACs / 1024,
    W = result / 32 floats)."""
    x, w, y = 32 * 16 * 56 * 56 * 4, 16 * 16 * 9 * 4, 32 * 16 * 56 * 56 * 4
    macs = 32 * 16 * 56 * 56 * 9 * 16
    conv = Actor(0, "conv1", 0, flops=2 * macs, work=(OpWork(K.CONV, 2 * macs, (x, w), (y,)),))
    assert core_ps(conv, AMCODA) == (50_176 + 225_792 + 50_176 + 2) * CYCLE
    # a ReLU computes nothing of its own: reads and writes only
    relu = Actor(1, "relu1", 0, work=(OpWork(K.RELU, y // 4, (y,), (y,)),))
    assert core_ps(relu, AMCODA) == (50_176 + 0 + 50_176 + 2) * CYCLE
    # pooling: B x C x HWout^2 x k^2 / 1024, one FLOP per window element
    pool = OpWork(K.AVG_POOL, 32 * 32 * 16 * 49, (32 * 32 * 28 * 28 * 4,), (32 * 32 * 16 * 4,))
    assert core_ps(Actor(2, "pool", 0, work=(pool,)), AMCODA) == (25_088 + 784 + 512 + 2) * CYCLE
    # an actor's passes add up
    both = Actor(3, "conv+relu", 0, work=conv.work + relu.work)
    assert core_ps(both, AMCODA) == core_ps(conv, AMCODA) + core_ps(relu, AMCODA)


def test_core_model_sum_max_ports_and_rates() -> None:
    core = CoreModel(overlap=False, fixed_cycles=2, read_ports=2, write_ports=1,
                     port_bandwidth=16e9, rates=(("elementwise", math.inf), ("matmul", 64e9)))  # fmt: skip
    w = xbar(core=core)
    mm = OpWork(K.MATMUL, 1000, (100, 300), (50,))
    # R = ceil(300 / 16) = 19, C = ceil(1000 / 64) = 16, W = ceil(50 / 16) = 4
    assert core_ps(Actor(0, "mm", 0, work=(mm,)), w) == (19 + 16 + 4 + 2) * NS
    over = dataclasses.replace(w, core=dataclasses.replace(core, overlap=True))
    assert core_ps(Actor(0, "mm", 0, work=(mm,)), over) == (19 + 2) * NS
    # three operands on two ports: the two largest first, the third after the smaller
    add = OpWork(K.ADD, 10, (160, 160, 32), (160,))
    assert core_ps(Actor(0, "add", 0, work=(add,)), w) == (12 + 0 + 10 + 2) * NS
    # a group without a rate runs at the wafer's peak (1 TFLOP/s = 1000 FLOP/cycle)
    red = OpWork(K.SUM, 5000, (16,), (16,))
    assert core_ps(Actor(0, "sum", 0, work=(red,)), w) == (1 + 5 + 1 + 2) * NS
    # no passes recorded: one pass over the actor's totals; no work at all: no time
    assert core_ps(Actor(0, "x", 0, flops=640, bytes_read=32, bytes_written=16,
                         op_kind=K.MATMUL), w) == (2 + 10 + 1 + 2) * NS  # fmt: skip
    assert core_ps(Actor(0, "start", 0), w) == 0


def test_roofline_stays_the_default_without_a_core_model() -> None:
    w = xbar()
    a = Actor(0, "mm", 0, flops=10**9, bytes_read=10**6, bytes_written=10**6,
              work=(OpWork(K.MATMUL, 10**9, (10**6,), (10**6,)),))  # fmt: skip
    assert w.core is None and compute_ps(a, w) == roofline_ps(a, w)
    assert compute_ps(a, AMCODA) == core_ps(a, AMCODA) != roofline_ps(a, AMCODA)


# -- streams: broadcast and split, req resent --------------------------------------------


def _fan_out(bcast: bool) -> Plan:
    actors = [Actor(0, "src", 0)] + [Actor(i, f"dst{i}", i) for i in (1, 2, 3)]
    msgs = [Message(i - 1, 0, i, 1000, bcast=0 if bcast else -1) for i in (1, 2, 3)]
    return Plan.build("fan", "xbar", actors, msgs)


@pytest.mark.parametrize("bcast", [False, True])
def test_broadcast_takes_one_stream_split_one_per_consumer(bcast: bool) -> None:
    """1000 B in 100 B packets over one 10 ns hop: 10 x 100 ns + 10 ns = 1010 ns. With one
    outgoing stream slot a split sends to its three consumers one after another; a
    broadcast streams to all three at once through its one slot."""
    flow = FlowControl(packet_bytes=100, max_streams=1)
    res = simulate(_fan_out(bcast), xbar(flow=flow))
    one = 10 * 100 * NS + 10 * NS
    expect = [one, one, one] if bcast else [one, 2 * one, 3 * one]
    assert list(res.msg_arrive_ps) == expect
    assert res.step_time_ps == max(expect)


def test_refused_req_is_resent_until_a_stream_frees() -> None:
    """Two producers send 1000 B to one core with one incoming stream slot. Both reqs
    arrive at 10 ns; the first is acked (data from 20 ns, delivered at 20 + 1010 =
    1030 ns). The second producer resends its req every 7 cycles from 10 ns: the first
    resend after 1030 ns is at 10 + ceil(1020 / 7) x 7 = 1032 ns; its data then starts
    a hop later, at 1042 ns, and arrives at 2052 ns."""
    flow = FlowControl(packet_bytes=100, handshake=True, retry_cycles=7, max_streams=1)
    actors = [Actor(0, "a", 0), Actor(1, "b", 1), Actor(2, "c", 2), Actor(3, "d", 2)]
    msgs = [Message(0, 0, 2, 1000), Message(1, 1, 3, 1000)]
    res = simulate(Plan.build("retry", "xbar", actors, msgs), xbar(flow=flow))
    assert res.msg_data_start_ps == (20 * NS, 1042 * NS)
    assert res.msg_arrive_ps == (1030 * NS, 2052 * NS)


# -- the host ------------------------------------------------------------------------------


def test_host_streams_inputs_in_order_and_receives_results() -> None:
    """The seed's message timing on the host's link (128 B packages, a header, req/ack:
    2 + 1 + packets cycles at 100 MHz): 1 KiB of weights is 8 packages + a header,
    delivered at 12 cycles; 10 KiB of input queues behind it on the same link (80 + 1
    packets, done at 2 + 9 + 81 = 92 cycles, delivered at 93). The actor then runs,
    and its 1 KiB result reaches the host 12 cycles after it ends: the step."""
    w = dataclasses.replace(AMCODA, core=None, memory=None)
    a = Actor(0, "layer", 0, flops=2048 * 100)  # 100 cycles at the roofline's peak
    host = (HostTransfer(0, 1024, "w"), HostTransfer(0, 10240, "x"),
            HostTransfer(0, 1024, "y", to_host=True))  # fmt: skip
    plan = Plan.build("host", "amcoda", [a], [], host=host)
    res = simulate(plan, w)
    assert res.actor_start_ps == (93 * CYCLE,)
    assert res.actor_end_ps == (193 * CYCLE,)
    assert res.step_time_ps == (193 + 12) * CYCLE
    # a wafer without a host link ignores the plan's host transfers
    bare = dataclasses.replace(w, host=None)
    assert simulate(plan, bare).step_time_ps == 100 * CYCLE


# -- the block allocator ------------------------------------------------------------------


def _allocator(first_fit: bool = True, lookahead: int = 4) -> Wafer:
    mem = MemoryModel(block_bytes=100, lookahead=lookahead, first_fit=first_fit)
    return dataclasses.replace(xbar(flow=FlowControl(packet_bytes=100)), sram_bytes=400,
                               memory=mem)  # fmt: skip


def _fragmenting_plan() -> Plan:
    """Core 0 runs a0, a1, a2 (one block each), a3 (two contiguous blocks), a4 (reads a2's
    result in place, so block 2 stays taken until after a3). a0 and a1 send 100 B each
    to core 1 over one link: delivered at 110 and 210 ns, freeing blocks 0 and 1. At
    110 ns blocks 0 and 3 are free, but apart: a3 waits for block 1 (210 ns)."""
    actors = [Actor(0, "a0", 0, out_bytes=100), Actor(1, "a1", 0, out_bytes=100),
              Actor(2, "a2", 0, out_bytes=100), Actor(3, "a3", 0, out_bytes=200),
              Actor(4, "a4", 0), Actor(5, "r0", 1), Actor(6, "r1", 1)]  # fmt: skip
    msgs = [Message(0, 0, 5, 100), Message(1, 1, 6, 100), Message(2, 2, 4, 0)]
    return Plan.build("frag", "xbar", actors, msgs)


def test_first_fit_allocation_waits_for_a_contiguous_run() -> None:
    res = simulate(_fragmenting_plan(), _allocator())
    assert res.msg_arrive_ps[:2] == (110 * NS, 210 * NS)
    assert res.actor_start_ps[3] == 210 * NS  # not 110 ns: blocks 0 and 3 are apart
    assert res.core_stat(0).peak_mem_bytes == 300  # a0, a1, a2; then a2 and a3
    # counted, not placed: nothing waits, and the peak shows the overcommitment
    loose = simulate(_fragmenting_plan(), _allocator(first_fit=False))
    assert loose.actor_start_ps[3] == 0 and loose.core_stat(0).peak_mem_bytes == 500


def test_lookahead_window_admits_the_next_actors_only() -> None:
    """With a window of one actor, core 1 admits r1 (allocates its receive buffer) only
    once r0 has ended, at 110 ns: a1's message waits for it and arrives at 220 ns, not
    210, and a3, which needs a1's block, starts then. Core 0's actors each enter the
    window when the one before has ended."""
    res = simulate(_fragmenting_plan(), _allocator(lookahead=1))
    assert res.msg_data_start_ps[:2] == (0, 110 * NS)
    assert res.actor_start_ps[:4] == (0, 0, 0, 220 * NS)
    assert res.core_stat(0).peak_mem_bytes == 300


def test_an_actor_that_can_never_fit_is_a_clear_error() -> None:
    big = Plan.build("big", "xbar", [Actor(0, "a", 0, out_bytes=500)], [])
    with pytest.raises(PlanError, match="memory: core 0: actor 0 waits for 5 block"):
        simulate(big, _allocator())


def test_the_allocators_log_is_the_memory_the_trace_shows(tmp_path) -> None:
    """The allocations and frees of the memory model are kept with the result: their
    running sum peaks at the reported peak, and the Perfetto trace's memory counter
    draws them."""
    import itertools
    import json

    res = simulate(_fragmenting_plan(), _allocator())
    log = dict(res.memory_log)
    live = list(itertools.accumulate(d for _, d in log[0]))
    assert max(live) == res.core_stat(0).peak_mem_bytes == 300 and live[-1] == 0
    path = tmp_path / "t.json"
    res.to_chrome_trace(path)
    doc = json.loads(path.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    counters = [e for e in events if e.get("ph") == "C" and "mem" in e.get("name", "").lower()]
    assert counters and max(max(e["args"].values()) for e in counters) <= 300


def test_a_broadcast_goes_to_the_admitted_destinations_first() -> None:
    """S broadcasts to D1 (next on core 1) and to D2, which core 2 runs after X, and X
    waits for D1. With a window of one actor, D2 is admitted only once X has ended:
    waiting for every destination before sending would wait on itself (a deadlock).
    The broadcast goes to D1 at once (110 ns), X runs when D1's message lands (220
    ns), and the rest of the broadcast goes to D2 once D2 is admitted (330 ns)."""
    actors = [Actor(0, "S", 0, out_bytes=100), Actor(1, "D1", 1, out_bytes=100),
              Actor(2, "X", 2), Actor(3, "D2", 2)]  # fmt: skip
    msgs = [Message(0, 0, 1, 100, bcast=0), Message(1, 0, 3, 100, bcast=0),
            Message(2, 1, 2, 100)]  # fmt: skip
    plan = Plan.build("bcast-window", "xbar", actors, msgs)
    res = simulate(plan, _allocator(lookahead=1))
    assert res.msg_arrive_ps == (110 * NS, 330 * NS, 220 * NS)
    assert res.actor_start_ps == (0, 110 * NS, 220 * NS, 330 * NS)
    # with room for every destination at once, the broadcast is one stream as before
    whole = simulate(plan, _allocator(lookahead=4))
    assert whole.msg_arrive_ps[:2] == (110 * NS, 110 * NS)


def test_output_buffers_held_for_a_window_are_named_in_the_deadlock() -> None:
    """Core 0 runs a1 (to b2) then a2 (to b1) with one output buffer; core 1 runs b1
    then b2 with a window of one actor. a1's message waits for b2 to be admitted, so
    a1 keeps the buffer, a2 never starts, and b1 waits for a2: the machine stops, and
    the message says which resources wait on each other and what to raise."""
    flow = FlowControl(packet_bytes=100, buffers_per_core=1)
    mem = MemoryModel(block_bytes=100, lookahead=1, first_fit=True)
    w = dataclasses.replace(xbar(flow=flow), sram_bytes=400, memory=mem)
    actors = [Actor(0, "a1", 0, out_bytes=100), Actor(1, "a2", 0, out_bytes=100),
              Actor(2, "b1", 1), Actor(3, "b2", 1)]  # fmt: skip
    plan = Plan.build("held", "xbar", actors, [Message(0, 0, 3, 100), Message(1, 1, 2, 100)])
    with pytest.raises(
        PlanError, match=r"output buffers of core\(s\) 0 \(flow.buffers_per_core = 1\)"
    ):
        simulate(plan, w)
    # two buffers: a2 starts while a1's message waits, and the run ends
    two = dataclasses.replace(w, flow=dataclasses.replace(flow, buffers_per_core=2))
    assert all(e >= 0 for e in simulate(plan, two).actor_end_ps)

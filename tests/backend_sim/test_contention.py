"""Links shared by several messages, stream limits, bounded buffers, ring all-reduce."""

from __future__ import annotations

import pytest

from waferflow.backend_sim import SimConfig, estimate, simulate
from waferflow.backend_sim.engine import CAUSE_BUFFER
from waferflow.ir.plan import Message, Plan
from waferflow.ir.target.wafer import FlowControl, Topology, Wafer

from ._helpers import actor, ring_allreduce_plan, wafer

L = 7000
PS_PER_BYTE = 1000


def closed(h: int, n: int, t: int) -> int:
    """Uncontended time of n equal packets of serialisation t over h equal hops."""
    return h * (t + L) + (n - 1) * t


@pytest.mark.parametrize("h", [1, 3, 6])
@pytest.mark.parametrize("n", [1, 4])
def test_two_messages_on_the_same_path_queue_behind_each_other(h: int, n: int) -> None:
    pb = 500
    t = pb * PS_PER_BYTE
    w = wafer(1, 8)
    plan = Plan.build(
        "two", "test", [actor(0, 0), actor(1, h), actor(2, h)],
        [Message(0, 0, 1, n * pb), Message(1, 0, 2, n * pb)],
    )  # fmt: skip
    res = simulate(plan, w, SimConfig(packet_bytes=pb))
    one = closed(h, n, t)
    assert res.msg_arrive_ps[0] == one  # first in the FIFO: as if alone
    # the second's packets follow the first's back to back: longer by bytes / bandwidth
    assert res.msg_arrive_ps[1] - res.msg_arrive_ps[0] == n * t
    assert res.msg_arrive_ps[1] == closed(h, 2 * n, t)
    assert res.msg_queueing_ps == (0, n * t)
    assert res.step_time_ps == one + n * t
    est = estimate(plan, w, SimConfig(packet_bytes=pb))
    assert est.step_time_ps == one
    assert est.gap(res) == pytest.approx(n * t / (one + n * t))


def test_merging_paths_delay_by_hand_computed_amount() -> None:
    # m0: core 0 -> 3, m1: core 1 -> 3, both 2 packets injected at 0; they share 1->2, 2->3.
    pb = 100
    t = pb * PS_PER_BYTE
    w = wafer(1, 4)
    plan = Plan.build(
        "merge", "test", [actor(0, 0), actor(1, 1), actor(2, 3), actor(3, 3)],
        [Message(0, 0, 2, 2 * pb), Message(1, 1, 3, 2 * pb)],
    )  # fmt: skip
    res = simulate(plan, w, SimConfig(packet_bytes=pb))
    assert res.msg_arrive_ps[1] == closed(2, 2, t)  # m1 got 1->2 first
    # m0's first packet reaches core 1 at t+L but link 1->2 is busy until 2t, ...
    assert res.msg_arrive_ps[0] == 5 * t + 2 * L
    assert res.msg_queueing_ps[0] == (5 * t + 2 * L) - closed(3, 2, t)
    assert not res.contention_free


def test_sharing_a_link_at_different_times_costs_nothing() -> None:
    pb = 100
    t = pb * PS_PER_BYTE
    w = wafer(1, 4)
    late = 10 * closed(3, 2, t)  # the second producer computes long enough
    plan = Plan.build(
        "apart", "test", [actor(0, 0), actor(1, 1, flops=late), actor(2, 3), actor(3, 3)],
        [Message(0, 0, 2, 2 * pb), Message(1, 1, 3, 2 * pb)],
    )  # fmt: skip
    res = simulate(plan, w, SimConfig(packet_bytes=pb))
    assert res.contention_free
    assert res.msg_arrive_ps == (closed(3, 2, t), late + closed(2, 2, t))
    assert estimate(plan, w, SimConfig(packet_bytes=pb)).step_time_ps == res.step_time_ps


def _crossbar_streams() -> object:
    return wafer(
        1, 3, topology=Topology.CROSSBAR,
        flow=FlowControl(packet_bytes=128, handshake=True, max_streams=1, retry_cycles=5),
    )  # fmt: skip


def test_one_outgoing_stream_serialises_sends() -> None:
    w = _crossbar_streams()
    plan = Plan.build(
        "out", "test", [actor(0, 0), actor(1, 1), actor(2, 2)],
        [Message(0, 0, 1, 128), Message(1, 0, 2, 128)],
    )  # fmt: skip
    res = simulate(plan, w)  # type: ignore[arg-type]
    t = 128 * PS_PER_BYTE
    # req (L), ack (L), one packet (t + L); the second waits for the first to land
    assert res.msg_data_start_ps[0] == 2 * L
    assert res.msg_arrive_ps[0] == 2 * L + t + L
    assert res.msg_data_start_ps[1] == res.msg_arrive_ps[0] + 2 * L
    assert res.msg_arrive_ps[1] == res.msg_arrive_ps[0] + 3 * L + t


def test_one_incoming_stream_makes_the_second_sender_retry() -> None:
    w = _crossbar_streams()
    plan = Plan.build(
        "in", "test", [actor(0, 0), actor(1, 1), actor(2, 2), actor(3, 2)],
        [Message(0, 0, 2, 128), Message(1, 1, 3, 128)],
    )  # fmt: skip
    res = simulate(plan, w)  # type: ignore[arg-type]
    t = 128 * PS_PER_BYTE
    first = 2 * L + t + L
    assert res.msg_arrive_ps[0] == first
    # m1's req reached core 2 at L and was refused; it is resent every 5 cycles (5 ns),
    # and the first resend after the port frees at `first` is accepted
    retry = 5000
    grant = L + -(-(first - L) // retry) * retry
    assert res.msg_data_start_ps[1] == grant + L
    assert res.msg_arrive_ps[1] == grant + L + t + L


def one_buffer_case() -> tuple[Plan, Wafer]:
    """One output buffer per core; core 0 runs a0 (sends 1000 B three hops) then a1
    (sends 1000 B one hop), which must wait for a0's buffer."""
    w = wafer(1, 4, flow=FlowControl(packet_bytes=1000, buffers_per_core=1))
    plan = Plan.build(
        "buf", "test", [actor(0, 0), actor(1, 0), actor(2, 3), actor(3, 1)],
        [Message(0, 0, 2, 1000), Message(1, 1, 3, 1000)],
    )  # fmt: skip
    return plan, w


def test_bounded_output_buffers_delay_the_next_sender() -> None:
    plan, w = one_buffer_case()
    res = simulate(plan, w)
    t = 1000 * PS_PER_BYTE
    assert res.msg_arrive_ps[0] == 3 * (t + L)
    assert res.actor_start_ps[1] == 3 * (t + L)  # waited for a0's buffer
    assert res.msg_arrive_ps[1] == 3 * (t + L) + t + L
    assert any(s.kind == "message" and s.id == 0 for s in res.critical_path)
    est = estimate(plan, w)
    assert est.actor_start_ps == res.actor_start_ps
    assert est.step_time_ps == res.step_time_ps
    # unbounded: a1 starts at once and its packet queues behind a0's on link 0->1
    free = simulate(plan, wafer(1, 4, flow=FlowControl(packet_bytes=1000)))
    assert free.actor_start_ps[1] == 0
    assert free.msg_arrive_ps[1] == 2 * t + L


def test_buffer_cause_is_recorded() -> None:
    plan, w = one_buffer_case()
    from waferflow.backend_sim.engine import run
    from waferflow.backend_sim.network import prepare

    raw = run(prepare(plan, w, SimConfig()))
    assert raw.cause_kind[1] == CAUSE_BUFFER and raw.cause_id[1] == 0


@pytest.mark.parametrize("topology", [Topology.MESH, Topology.TORUS])
@pytest.mark.parametrize("n", [4, 8])
def test_ring_allreduce_matches_bandwidth_term(topology: Topology, n: int) -> None:
    # a ring over one row; on a mesh the wrap-around message walks back n-1 hops on the
    # westward links, which nothing else uses
    bw, lat = 10e9, 10e-9
    w = wafer(1, n, topology=topology, bw=bw, lat=lat)
    total = 64 << 20
    plan = ring_allreduce_plan(list(range(n)), total)
    res = simulate(plan, w, SimConfig(packet_bytes=4096))
    expected = 2 * (n - 1) / n * total / bw + 2 * (n - 1) * lat
    assert res.step_time == pytest.approx(expected, rel=0.02)
    # every ring link carries exactly its 2(n-1) chunks
    east = [lk for lk in res.links if lk.dst[1] == (lk.src[1] + 1) % n]
    assert len(east) == n - 1 + (topology is Topology.TORUS)
    assert all(lk.bytes == 2 * (n - 1) * (total // n) for lk in east)

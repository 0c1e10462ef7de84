"""One uncontended message (and one actor) against closed forms computed by hand."""

from __future__ import annotations

import pytest

from waferflow.backend_sim import SimConfig, estimate, simulate, transit_ps
from waferflow.ir.plan import Message, Plan
from waferflow.ir.target.wafer import FlowControl, LinkSpec, Topology

from ._helpers import GBPS, NS, actor, one_message_plan, wafer

L = 7000  # ps: the helper wafer's 7 ns per hop
PS_PER_BYTE = 1000  # 1 GB/s


def uniform_closed_form(h: int, nbytes: int, pb: int) -> int:
    """h hops of identical links: the first packet crosses h links, the others follow
    one serialisation apart; the last (partial) packet is shorter."""
    if nbytes == 0:
        return h * L  # one empty packet
    n = -(-nbytes // pb)
    t = pb * PS_PER_BYTE
    t_last = (nbytes - (n - 1) * pb) * PS_PER_BYTE
    if n == 1:
        return h * (L + t_last)
    return h * L + (h - 1) * t + (n - 1) * t + t_last


def brute_force(lat: list[int], ser: list[list[int]]) -> int:
    """Max-plus recursion over packets x hops, written out: packet k may enter link j
    once it has crossed link j-1 (plus latency) and packet k-1 has left link j."""
    n, h = len(ser), len(lat)
    done = [[0] * h for _ in range(n)]  # when packet k leaves link j
    for k in range(n):
        for j in range(h):
            ready = 0 if j == 0 else done[k][j - 1] + lat[j - 1]
            free = done[k - 1][j] if k else 0
            done[k][j] = max(ready, free) + ser[k][j]
    return done[n - 1][h - 1] + lat[h - 1]


@pytest.mark.parametrize("h", [1, 2, 3, 7])
@pytest.mark.parametrize("nbytes", [0, 1, 100, 1000, 4096, 4097, 10_000, 12_288])
@pytest.mark.parametrize("pb", [128, 1000, 4096])
def test_single_message_uniform_links(h: int, nbytes: int, pb: int) -> None:
    w = wafer(1, 8)
    plan = one_message_plan(0, h, nbytes)
    cfg = SimConfig(packet_bytes=pb)
    res = simulate(plan, w, cfg)
    expected = uniform_closed_form(h, nbytes, pb)
    assert res.msg_arrive_ps[0] == expected
    assert res.step_time_ps == expected
    assert res.msg_hops[0] == h
    assert res.msg_queueing_ps[0] == 0
    assert estimate(plan, w, cfg).step_time_ps == expected


def test_default_packet_is_4096_bytes_without_flow_control() -> None:
    w = wafer(1, 8)
    res = simulate(one_message_plan(0, 3, 10_000), w)
    assert res.step_time_ps == uniform_closed_form(3, 10_000, 4096)


D2D = LinkSpec(0.25 * GBPS, 50 * NS)  # 4000 ps per byte, 50 ns


@pytest.mark.parametrize("n_packets", [1, 2, 5])
@pytest.mark.parametrize("d2d", [D2D, LinkSpec(4 * GBPS, 30 * NS)])
def test_single_message_across_a_die_boundary(n_packets: int, d2d: LinkSpec) -> None:
    # dies: columns 0-3 and 4-7; from column 1 to 6 is 5 hops, the third crosses dies
    w = wafer(1, 8, die_cols=2, d2d=d2d)
    pb = 256
    plan = one_message_plan(1, 6, n_packets * pb)
    res = simulate(plan, w, SimConfig(packet_bytes=pb))
    t_on = pb * PS_PER_BYTE
    t_d2d = round(pb * 1e12 / d2d.bandwidth)
    lat_d2d = round(d2d.latency * 1e12)
    ts = [t_on, t_on, t_d2d, t_on, t_on]
    lats = [L, L, lat_d2d, L, L]
    # equal packets: the pipeline's fill plus (n-1) beats of its slowest stage
    expected = sum(ts) + sum(lats) + (n_packets - 1) * max(ts)
    assert res.step_time_ps == expected
    assert [lk.d2d for lk in res.links] == [False, False, True, False, False]
    assert estimate(plan, w, SimConfig(packet_bytes=pb)).step_time_ps == expected


@pytest.mark.parametrize("nbytes", [1, 300, 700, 1000, 2500, 5000])
@pytest.mark.parametrize(("src", "dst"), [(0, 7), (3, 7), (4, 0), (2, 4)])
def test_partial_last_packet_across_dies_matches_max_plus(nbytes: int, src: int, dst: int) -> None:
    # the slow die-to-die hop (3 <-> 4) first, last, or in the middle of the route
    w = wafer(1, 8, die_cols=2, d2d=D2D)
    pb = 1000
    res = simulate(one_message_plan(src, dst, nbytes), w, SimConfig(packet_bytes=pb))
    n = -(-nbytes // pb)
    sizes = [pb] * (n - 1) + [nbytes - (n - 1) * pb]
    step = 1 if dst > src else -1
    hops = [(c, c + step) for c in range(src, dst, step)]
    rate = [4000 if {a, b} == {3, 4} else 1000 for a, b in hops]
    lats = [50_000 if {a, b} == {3, 4} else L for a, b in hops]
    expected = brute_force(lats, [[s * r for r in rate] for s in sizes])
    assert res.step_time_ps == expected
    full = [pb * r for r in rate]
    last = [sizes[-1] * r for r in rate]
    assert transit_ps(lats, full, last, n) == expected


def test_torus_goes_the_short_way_round() -> None:
    w = wafer(1, 8, topology=Topology.TORUS)
    res = simulate(one_message_plan(0, 6, 4096), w, SimConfig(packet_bytes=4096))
    assert res.msg_hops[0] == 2
    assert res.step_time_ps == uniform_closed_form(2, 4096, 4096)
    assert {(lk.src, lk.dst) for lk in res.links} == {((0, 0), (0, 7)), ((0, 7), (0, 6))}


def test_crossbar_is_one_hop() -> None:
    w = wafer(2, 4, topology=Topology.CROSSBAR)
    res = simulate(one_message_plan(0, 7, 5000), w, SimConfig(packet_bytes=1000))
    assert res.msg_hops[0] == 1
    assert res.step_time_ps == uniform_closed_form(1, 5000, 1000)


def test_handshake_adds_req_and_ack() -> None:
    w = wafer(1, 8, flow=FlowControl(packet_bytes=128, handshake=True))
    res = simulate(one_message_plan(0, 3, 1000), w)
    assert res.msg_data_start_ps[0] == 2 * 3 * L
    assert res.step_time_ps == 2 * 3 * L + uniform_closed_form(3, 1000, 128)


def test_header_packets_travel_first() -> None:
    w = wafer(1, 8, flow=FlowControl(packet_bytes=100, header_packets=1))
    res = simulate(one_message_plan(0, 2, 250), w)
    # packets: header 100, 100, 100, 50 bytes
    t = 100 * PS_PER_BYTE
    assert res.step_time_ps == 2 * L + (2 - 1) * t + 3 * t + 50 * PS_PER_BYTE
    assert [lk.bytes for lk in res.links] == [250, 250]  # payload only
    assert [lk.busy_ps for lk in res.links] == [350 * PS_PER_BYTE] * 2


def test_roofline_compute_time_and_injection_after_compute() -> None:
    w = wafer(1, 4, peak=1e12, sram_bw=1e12)
    flops_bound = actor(0, 0, flops=2_000_000, bytes_read=1000)  # 2e6 ps vs 1e3 ps
    mem_bound = actor(1, 1, flops=10, bytes_read=2_000_000, bytes_written=1_000_000)
    plan = Plan.build("c", "test", [flops_bound, mem_bound], [Message(0, 0, 1, 64)])
    res = simulate(plan, w, SimConfig(packet_bytes=64))
    assert res.actor_end_ps[0] == 2_000_000
    assert res.msg_inject_ps[0] == 2_000_000
    assert res.msg_arrive_ps[0] == 2_000_000 + L + 64 * PS_PER_BYTE
    assert res.actor_start_ps[1] == res.msg_arrive_ps[0]
    assert res.actor_end_ps[1] - res.actor_start_ps[1] == 3_000_000


def test_same_core_message_is_free() -> None:
    w = wafer(1, 4)
    plan = Plan.build(
        "local", "test", [actor(0, 2, flops=5000), actor(1, 2, flops=1000)],
        [Message(0, 0, 1, 1 << 20)],
    )  # fmt: skip
    res = simulate(plan, w)
    assert res.msg_arrive_ps[0] == 5000
    assert res.step_time_ps == 6000
    assert res.links == ()


def test_amcoda_preset_message_takes_header_plus_packages() -> None:
    from waferflow.ir.target import get_wafer

    w = get_wafer("amcoda")  # crossbar, 10 ns cycle, one 128 B package per cycle per link
    cycle = 10_000
    res = simulate(one_message_plan(0, 5, 8 * 128), w)
    # req (1 cycle), ack (1 cycle), header + 8 packages (9 cycles), last one's latency (1)
    assert res.msg_data_start_ps[0] == 2 * cycle
    assert res.step_time_ps == (2 + 9 + 1) * cycle
    assert estimate(one_message_plan(0, 5, 8 * 128), w).step_time_ps == res.step_time_ps

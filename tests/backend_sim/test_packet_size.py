"""The packet size a wafer without flow control gets (``costs.view_packet_bytes``) and
the bound it is chosen by: a larger packet moves an uncontended message's transit by at
most one hop latency per intermediate hop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.backend_sim import SimConfig, simulate
from waferflow.backend_sim.config import for_wafer
from waferflow.backend_sim.costs import (
    DEFAULT_PACKET_BYTES,
    MAX_VIEW_PACKET_BYTES,
    view_packet_bytes,
)
from waferflow.ir.target import get_wafer
from waferflow.ir.target.wafer import FlowControl, LinkSpec

from ._helpers import GBPS, NS, one_message_plan, wafer


def test_fine_wafers_keep_the_default_and_coarse_views_grow_with_k_squared() -> None:
    assert view_packet_bytes(get_wafer("wse2")) == DEFAULT_PACKET_BYTES
    assert view_packet_bytes(get_wafer("mesh16x16")) == DEFAULT_PACKET_BYTES
    w = get_wafer("wse2")
    # a k x k node: k times the bandwidth and the latency of a 4 B/cycle, 1 cycle link
    assert [view_packet_bytes(w.coarsen(k)) for k in (16, 32, 46, 64, 84)] == [
        4096, 4096, 8192, 16384, 16384,
    ]  # fmt: skip
    # L x B = 1 ms x 1 GB/s = 1 MB: capped
    assert view_packet_bytes(wafer(bw=GBPS, lat=1e-3)) == MAX_VIEW_PACKET_BYTES


def test_the_slower_die_to_die_link_decides() -> None:
    w = wafer(1, 8, bw=GBPS, lat=100_000 * NS, die_cols=2, d2d=LinkSpec(GBPS, 10_000 * NS))
    assert view_packet_bytes(w) == 8192  # 10 us x 1 GB/s = 10 kB


def test_a_wafer_with_flow_control_or_a_given_size_is_left_alone() -> None:
    w = wafer(bw=GBPS, lat=1e-3)
    assert for_wafer(None, w).packet_bytes == MAX_VIEW_PACKET_BYTES
    assert for_wafer(SimConfig(packet_bytes=512), w).packet_bytes == 512
    flow = wafer(bw=GBPS, lat=1e-3, flow=FlowControl(packet_bytes=128))
    assert for_wafer(None, flow).packet_bytes is None  # the wafer's own 128 B


@settings(max_examples=60, deadline=None)
@given(
    hops=st.integers(1, 7),
    nbytes=st.integers(0, 300_000),
    lat_ns=st.sampled_from([1, 7, 40, 300]),
)
def test_the_view_packet_moves_a_transit_by_at_most_a_latency_per_extra_hop(
    hops: int, nbytes: int, lat_ns: int
) -> None:
    w = wafer(1, 8, bw=GBPS, lat=lat_ns * NS)
    plan = one_message_plan(0, hops, nbytes)
    fine = simulate(plan, w, SimConfig(packet_bytes=DEFAULT_PACKET_BYTES)).step_time_ps
    view = simulate(plan, w).step_time_ps  # the view's own packet
    assert 0 <= view - fine <= (hops - 1) * lat_ns * 1000

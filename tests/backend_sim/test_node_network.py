"""The traffic a matmul makes inside a node of a coarse view (``node_network_ps``)."""

from __future__ import annotations

from waferflow.backend_sim import simulate
from waferflow.backend_sim.costs import PS_PER_S, node_network_ps, roofline_ps
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import Actor, Plan
from waferflow.ir.target import get_wafer

FINE = get_wafer("mesh16x16")
COARSE = FINE.coarsen(4)  # 4x4 nodes of 4x4 cores; links 4x the fine bandwidth


def _actor(kind: OpKind, bytes_read: int, flops: int = 0) -> Actor:
    return Actor(0, "a", 0, flops=flops, bytes_read=bytes_read, op_kind=kind)


def test_a_matmul_moves_its_operands_inside_a_coarse_node() -> None:
    nbytes = 3 * 10**6
    a = _actor(OpKind.MATMUL, nbytes)
    # (K - 1) / (2 K B) per operand byte, K = 4, B = the coarse link (4 fine links)
    expect = -(-nbytes * 3 * PS_PER_S // int(2 * 4 * COARSE.link.bandwidth))
    assert node_network_ps(a, COARSE) == expect > 0
    assert COARSE.link.bandwidth == 4 * FINE.link.bandwidth
    # a fine wafer holds a matmul's operands on its one core; elementwise ops never move
    assert node_network_ps(a, FINE) == 0
    assert node_network_ps(_actor(OpKind.ADD, nbytes), COARSE) == 0


def test_the_roofline_takes_the_slowest_of_compute_sram_and_node_network() -> None:
    light = _actor(OpKind.MATMUL, 3 * 10**6, flops=1)
    assert roofline_ps(light, COARSE) == node_network_ps(light, COARSE)
    heavy = _actor(OpKind.MATMUL, 8, flops=10**12)
    assert roofline_ps(heavy, COARSE) > node_network_ps(heavy, COARSE)
    plan = Plan.build("one", COARSE.name, [light], [])
    assert simulate(plan, COARSE).step_time_ps == roofline_ps(light, COARSE)

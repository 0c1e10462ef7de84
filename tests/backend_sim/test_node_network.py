"""The traffic a matmul makes inside a node of a coarse view (``node_network_ps``)."""

from __future__ import annotations

from dataclasses import replace

from waferflow.backend_sim import simulate
from waferflow.backend_sim.costs import PS_PER_S, duration_ps, node_network_ps, roofline_ps
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import Actor, Plan
from waferflow.ir.target import get_wafer

FINE = replace(get_wafer("mesh16x16"), core=None)  # the roofline (the core model: below)
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


def test_the_core_model_puts_the_node_network_under_each_matmul_pass() -> None:
    from waferflow.backend_sim.costs import core_ps
    from waferflow.ir.plan import OpWork

    coarse = get_wafer("mesh16x16").coarsen(4)
    nbytes = 3 * 10**6
    mm = OpWork(OpKind.MATMUL, 2, (nbytes,), (4,))
    a = Actor(0, "a", 0, work=(mm,), op_kind=OpKind.MATMUL)
    # the pass is tiny (2 FLOPs, the operands read once) and waits for its operands, in
    # whole cycles: ceil(bytes * (K - 1) / (2 K B) * clock)
    floor_ps = node_network_ps(_actor(OpKind.MATMUL, nbytes), coarse)
    cycles = -(-floor_ps * int(coarse.clock_hz) // PS_PER_S)
    assert core_ps(a, coarse) == duration_ps(cycles, coarse.clock_hz) >= floor_ps
    add = Actor(0, "a", 0, work=(OpWork(OpKind.ADD, 2, (nbytes,), (4,)),), op_kind=OpKind.ADD)
    assert core_ps(add, coarse) < core_ps(a, coarse)  # elementwise ops never move

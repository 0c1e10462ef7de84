"""Compute-shift matmuls (``matmul=shift|auto``) against their closed forms.

The case: ``y = relu(x) @ w`` under tp = n, with ``relu(x)`` split by rows over the
ranks and ``w`` by columns, so the matmul needs the rows whole: an all-gather of
h = relu(x) (256 x 64 f32, a block b = 16,384 B per rank) feeding the matmul
(2 x 256 x 64 x 256 FLOPs, F / n per rank). On a ring of one-hop links (a 1 x n
torus) of bandwidth B and latency L a block's transfer takes T = b / B + L, and a
rank's matmul c_all = F / (n P) at peak P (c = c_all / n per block):

    gather then multiply:  (n - 1) T + c_all
    shift:                 c + (n - 1) max(c, T)

Both move (n - 1) b bytes per rank. The simulator's collective step actors each
take 1 ps (they copy their block at an SRAM bandwidth of 1e30 B/s, rounded up).
"""

from __future__ import annotations

import pytest

from waferflow.backend_sim import simulate
from waferflow.ir import print_graph
from waferflow.ir.graph import Graph
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.target import Wafer, parse_wafer_toml
from waferflow.ir.verifier import verify_graph
from waferflow.parallel.driver import insert, lower, read_state, schedule
from waferflow.parallel.shift import shift_time

K = OpKind
ROWS, INNER, COLS = 256, 64, 256
FLOPS = 2 * ROWS * INNER * COLS
BANDWIDTH, LATENCY = 1e9, 10e-9  # 1 B/ns: a 4 KiB packet in 4.096 us


def _wafer(
    n: int, topology: str, peak: float, bandwidth: float = BANDWIDTH, latency: float = LATENCY
) -> Wafer:
    return parse_wafer_toml(
        f"""
[wafer]
name = "ring{n}"
rows = 1
cols = {n}
topology = "{topology}"
clock_hz = 1e9
sram_bytes = "1 GiB"
sram_bandwidth = 1e30
[wafer.peak_flops]
f32 = {peak}
[link]
bandwidth = {bandwidth}
latency = {latency}
"""
    )


def _graph(n: int, matmul: str, algo: str = "ring") -> Graph:
    plan = f"dp=1,tp={n},pp=1,microbatches=1,algo={algo},span=1,matmul={matmul}"
    return parse_graph(f"""graph @shift parallel(plan="{plan}", wafer="ring{n}", dp=1, tp={n}, mb=1, pp=1, ranks={n}, level=sharded) {{
  %x = input "x" : f32[{ROWS},{INNER}] fwd
  %w = param "w" : f32[{INNER},{COLS}]{{tp=split(1)}} fwd
  %h = relu %x : f32[{ROWS},{INNER}]{{tp=split(0)}} fwd loc("a", "aten.relu.default") par(stage=0, in=[{{tp=split(0)}}], div=[tp])
  %y = matmul %h, %w : f32[{ROWS},{COLS}]{{tp=split(1)}} fwd loc("b", "aten.mm.default") cost(flops={FLOPS}, read=0, write=0) par(stage=0, in=[{{}}, {{tp=split(1)}}], div=[tp])
  return %y
}}
""")


def _run(g: Graph, wafer: Wafer) -> tuple[int, int, str]:
    """(simulated step in ps, bytes the gather's steps received, the IR after schedule)."""
    state = read_state(g, wafer)
    insert(g, state)
    schedule(g, state)
    text = print_graph(g)
    plan = lower(state)
    verify_graph(g)
    moved = sum(m.bytes for m in plan.messages if plan.actors[m.dst_actor].op_kind is K.ALL_GATHER)
    return simulate(plan, wafer).step_time_ps, moved, text


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("peak", [1e12, 1e9])  # the transfer, then the compute, dominates
def test_shift_and_gather_match_their_closed_forms(n: int, peak: float) -> None:
    wafer = _wafer(n, "torus", peak)
    block = ROWS // n * INNER * 4
    transfer = round((block / BANDWIDTH + LATENCY) * 1e12)
    c_all = round(FLOPS / n / peak * 1e12)
    c = c_all // n
    gather, g_moved, _ = _run(_graph(n, "gather"), wafer)
    shift, s_moved, text = _run(_graph(n, "shift"), wafer)
    assert "shift=true" in text
    steps = n - 1  # collective step actors, 1 ps each
    assert abs(gather - ((n - 1) * transfer + c_all)) <= steps
    assert abs(shift - (c + (n - 1) * max(c, transfer))) <= steps
    assert g_moved == s_moved == n * (n - 1) * block
    assert shift <= gather


def test_auto_rotates_on_a_torus_and_gathers_where_the_ring_is_long() -> None:
    """A 1 x 8 torus closes its ring over one hop; a 1 x 8 mesh over seven, each of a
    high latency: there the shift's last step is slow and gathering is cheaper."""
    n = 8
    _, _, torus = _run(_graph(n, "auto", "auto"), _wafer(n, "torus", 1e9))
    assert "shift=true" in torus
    slow = _wafer(n, "mesh", 1e12, bandwidth=1e12, latency=1e-6)
    _, _, mesh = _run(_graph(n, "auto", "auto"), slow)
    assert "shift=false" in mesh


def test_shift_time_closed_form() -> None:
    assert shift_time(4, 4.0, 2, 1.0, 0.5, 1) == 1.0 + 3 * 2.5
    assert shift_time(4, 40.0, 2, 1.0, 0.5, 1) == 10.0 + 3 * 10.0

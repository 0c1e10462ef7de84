"""In-network collectives on a switched fabric against their closed form.

The case: ``y = relu(x) @ w`` under tp = n with the inner dimension split, so each
rank holds a partial sum of y (R x C f32, S bytes) and an all-reduce over the
ranks makes it whole. On a tree of switches the ranks stream S up in k chunks of
c = S / k bytes (``innet.CHUNK_BYTES``); each switch adds its children's chunks and
passes one up; the top switch sends the sum down, each switch copying it to its
children. Store and forward per chunk, so over the path of 2h links (h up, h down)
of bandwidths B_i and latencies L_i:

    T = sum_i (c / B_i + L_i) + (k - 1) max_i c / B_i

Compute is free here (peak and SRAM bandwidth of 1e30), so the step is T.
"""

from __future__ import annotations

import pytest

from waferflow.backend_sim import simulate
from waferflow.ir.graph import Graph
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.plan import plan_from_json, plan_to_json
from waferflow.ir.target import Wafer, parse_wafer_toml
from waferflow.mapper.bridge import hop_matrix
from waferflow.mapper.local import swap_descent_dist
from waferflow.parallel.driver import insert, lower, read_state, schedule
from waferflow.parallel.innet import CHUNK_BYTES, innet_seconds

K = OpKind
ROWS, INNER, COLS = 256, 64, 256
S = ROWS * COLS * 4  # the partial sum each rank holds: 256 KiB = 4 chunks
BW = (1e9, 4e9)  # cores' ports, then the links between level-1 and level-2 switches
LAT = (10e-9, 30e-9)


def _tree(
    rows: int, cols: int, fanout: str, bw: tuple[float, ...], lat: tuple[float, ...]
) -> Wafer:
    """A tree wafer whose compute is free (peak and SRAM bandwidth of 1e30)."""
    return parse_wafer_toml(
        f"""
[wafer]
name = "tree{rows * cols}"
rows = {rows}
cols = {cols}
topology = "tree"
clock_hz = 1e9
sram_bytes = "1 GiB"
sram_bandwidth = 1e30
[wafer.peak_flops]
f32 = 1e30
[fabric]
fanout = {fanout}
bandwidth = {list(bw)}
latency = {list(lat)}
"""
    )


def _wafer() -> Wafer:
    return _tree(4, 4, "[4, 4]", BW, LAT)


def _graph(n: int, algo: str) -> Graph:
    plan = f"dp=1,tp={n},pp=1,microbatches=1,algo={algo},span=1"
    return parse_graph(f"""graph @innet parallel(plan="{plan}", wafer="tree16", dp=1, tp={n}, mb=1, pp=1, ranks={n}, level=sharded) {{
  %x = input "x" : f32[{ROWS},{INNER}] fwd
  %w = param "w" : f32[{INNER},{COLS}]{{tp=split(0)}} fwd
  %h = relu %x : f32[{ROWS},{INNER}]{{tp=split(1)}} fwd loc("a", "aten.relu.default") par(stage=0, in=[{{tp=split(1)}}], div=[tp])
  %y = matmul %h, %w : f32[{ROWS},{COLS}]{{tp=partial}} fwd loc("b", "aten.mm.default") par(stage=0, in=[{{tp=split(1)}}, {{tp=split(0)}}], div=[tp])
  return %y
}}
""")


def _run(n: int, algo: str) -> tuple[int, list[str], int]:
    """(simulated step in ps, collective records, bytes from cores to switches)."""
    wafer = _wafer()
    g = _graph(n, algo)
    state = read_state(g, wafer)
    insert(g, state)
    schedule(g, state)
    plan = lower(state)
    recs = [f"{r.kind}/{r.algorithm}" for r in state.records]
    up = sum(
        m.bytes
        for m in plan.messages
        if plan.actors[m.src_actor].core < 16 <= plan.actors[m.dst_actor].core
    )
    again = plan_from_json(plan_to_json(plan))  # switch units and routes round-trip
    assert again == plan
    return simulate(again, wafer).step_time_ps, recs, up


def test_tree_arithmetic() -> None:
    w = _wafer()
    tree = w.tree
    assert tree is not None and tree.num_switches == 5 and w.num_links() == 2 * 20
    assert tree.path((0, 0), (0, 3), 4) == [(0, 0), (-1, 0), (0, 3)]
    assert tree.hops((0, 0), (3, 3), 4) == 4  # up two levels, down two
    assert w.link_spec((-1, 0), (-2, 0)).bandwidth == BW[1]


@pytest.mark.parametrize("n", [4, 16])  # one switch; two levels
def test_in_network_all_reduce_matches_its_closed_form(n: int) -> None:
    k = S // CHUNK_BYTES
    c = S / k
    links = [(BW[0], LAT[0])] * 2 + ([(BW[1], LAT[1])] * 2 if n == 16 else [])
    closed = sum(c / b + lat for b, lat in links) + (k - 1) * max(c / b for b, _ in links)
    cores = [divmod(i, 4) for i in range(n)]
    assert innet_seconds(_wafer(), cores, K.ALL_REDUCE, S) == pytest.approx(closed)
    step, recs, up = _run(n, "innet")
    assert recs == ["all_reduce/innet"]
    assert up == n * S  # each rank sends its buffer once; the switches add the rest
    assert abs(step - closed * 1e12) <= 8  # a ps per actor on a core, rounding
    ring, ring_recs, _ = _run(n, "ring")
    assert ring_recs == ["all_reduce/ring"] and ring > step
    _, auto, _ = _run(n, "auto")
    assert auto == ["all_reduce/innet"]  # the closed forms choose the switches


def test_ranks_swap_onto_one_switch_by_switch_hops() -> None:
    """Ranks 0 and 3 exchange the most bytes; on a tree of two 2-core switches the
    start (identity) puts them 4 hops apart; one swap brings them under one switch."""
    w = _tree(1, 4, "[2, 2]", (1e9, 1e9), (1e-9, 1e-9))
    dist = hop_matrix(w)
    pairs = [(0, 3, 10.0), (1, 2, 1.0)]
    got = swap_descent_dist(pairs, (0, 1, 2, 3), dist)
    cost = sum(x * dist[got[a], got[b]] for a, b, x in pairs)
    assert dist[0, 3] == 4 and dist[0, 1] == 2
    assert cost == 10 * 2 + 1 * 2  # both pairs under one switch each: the optimum

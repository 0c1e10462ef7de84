"""Collectives lowered to point-to-point messages deliver every byte."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from waferflow.backend_sim import simulate
from waferflow.ir.plan import Actor, Message, Plan, verify_plan
from waferflow.ir.target import get_wafer
from waferflow.mapper.collectives import (
    Algorithm,
    CollectiveKind,
    check_schedule,
    supported_algorithms,
)
from waferflow.parallel import build_parallel_plan
from waferflow.parallel.collective_lowering import ScheduleCache, expand, grid_shape, wire
from waferflow.parallel.plan_spec import CollectiveAlgo

from .graphs import fast_wafer, mlp

WAFER = get_wafer("mesh16x16")
KINDS = [k for k in CollectiveKind if k is not CollectiveKind.BROADCAST]


@st.composite
def groups(draw: st.DrawFn) -> tuple[CollectiveKind, Algorithm, tuple[int, ...], int]:
    kind = draw(st.sampled_from(KINDS))
    algo = draw(st.sampled_from(supported_algorithms(kind)))
    rows = draw(st.integers(1, 4))
    cols = draw(st.integers(1, 4))
    assume(rows * cols > 1)
    r0, c0 = draw(st.integers(0, 16 - rows)), draw(st.integers(0, 16 - cols))
    cores = tuple((r0 + r) * 16 + c0 + c for r in range(rows) for c in range(cols))
    if algo is Algorithm.MESH2D:
        assume(rows > 1 and cols > 1)
    nbytes = draw(st.integers(0, 5000))
    return kind, algo, cores, nbytes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups())
def test_lowered_collective_delivers_every_byte(
    case: tuple[CollectiveKind, Algorithm, tuple[int, ...], int],
) -> None:
    kind, algo, cores, nbytes = case
    cache = ScheduleCache(WAFER, CollectiveAlgo(algo.value))
    sched = cache.schedule(kind, cores, nbytes)
    assert sched.algorithm is algo
    check_schedule(sched)  # every rank ends with what the collective promises
    # lower it: one input actor per rank, step actors, one message per transfer
    n = len(cores)
    actors: list[tuple[int, int]] = []  # (member, step); step -1 = the input actor
    msgs: list[tuple[int, int, int]] = []

    def make(member: int, step: int) -> int:
        actors.append((member, step))
        return len(actors) - 1

    entries = [make(i, -1) for i in range(n)]
    final = wire(
        expand(sched),
        list(entries),
        lambda i, j, got, red: make(i, j),
        lambda i: make(i, -1),
        lambda s, d, b: msgs.append((s, d, b)),
    )
    assert sorted((actors[s][0], actors[d][0], b) for s, d, b in msgs) == sorted(
        (t.src, t.dst, t.bytes) for t in sched.transfers
    )
    for s, d, _ in msgs:
        assert actors[s][1] < actors[d][1]  # a transfer leaves before the step it feeds
    received = [0] * n
    for _, d, b in msgs:
        received[actors[d][0]] += b
    for i in range(n):
        assert received[i] == sum(t.bytes for t in sched.transfers if t.dst == i)
        assert actors[final[i]][0] == i
    # as an actor program on the wafer it runs to the end: every message arrives
    order: dict[int, list[int]] = {}
    for a, (member, _) in enumerate(actors):
        order.setdefault(cores[member], []).append(a)
    plan = Plan.build(
        "coll", WAFER.name,
        [Actor(a, f"a{a}", cores[m]) for a, (m, _) in enumerate(actors)],
        [Message(i, s, d, b) for i, (s, d, b) in enumerate(msgs)],
        order,
    )  # fmt: skip
    verify_plan(plan, WAFER)
    sim = simulate(plan, WAFER)
    assert all(t >= 0 for t in sim.msg_arrive_ps)


def test_grid_shape() -> None:
    assert grid_shape([(0, 0), (0, 1), (1, 0), (1, 1)]) == (2, 2)
    assert grid_shape([(0, 0), (0, 1)]) is None  # one row: no 2-D grid
    assert grid_shape([(0, 1), (0, 0), (1, 0), (1, 1)]) is None  # not row-major


def test_auto_picks_the_cheapest_and_unsupported_falls_back() -> None:
    cache = ScheduleCache(WAFER, CollectiveAlgo.AUTO)
    row = tuple(range(8))
    s = cache.schedule(CollectiveKind.ALL_REDUCE, row, 1 << 20)
    assert s.algorithm in supported_algorithms(CollectiveKind.ALL_REDUCE)
    tree = ScheduleCache(WAFER, CollectiveAlgo.TREE)
    g = tree.schedule(CollectiveKind.ALL_GATHER, row, 4096)
    assert g.algorithm is not Algorithm.TREE and tree.notes  # no tree all-gather: noted


@pytest.mark.parametrize("algo", ["ring", "direct", "biring"])
def test_data_parallel_gradients_move_the_expected_bytes(algo: str) -> None:
    """Two replicas, two weight gradients of 4 KiB each, one all-reduce per layer:
    every algorithm moves 2 (n - 1) / n x S per rank, i.e. 2 x 4 KiB per gradient here;
    and the returned loss (a 4-byte partial sum per replica) is all-reduced too."""
    g = mlp(batch=8, d=16, h=64)
    r = build_parallel_plan(g, fast_wafer(2), f"dp=2,algo={algo}")
    assert r.plan.total_message_bytes == 2 * (4096 + 4096) + 2 * 4
    kinds = {(c.kind, c.axis, c.algorithm) for c in r.collectives}
    assert kinds == {("all_reduce", "dp", algo)}

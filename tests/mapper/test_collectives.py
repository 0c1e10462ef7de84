"""Collective schedules: every builder passes the symbolic checker, moves the known
volume, and the checker rejects broken schedules."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.errors import PlanError
from waferflow.mapper.collectives import (
    Algorithm,
    CollectiveKind,
    Schedule,
    Transfer,
    build_schedule,
    check_schedule,
    chunk_sizes,
    split_even,
    supported_algorithms,
)

K = CollectiveKind
A = Algorithm


@st.composite
def cases(draw: st.DrawFn) -> tuple[CollectiveKind, Algorithm, int, int, tuple[int, int], int]:
    kind = draw(st.sampled_from(list(CollectiveKind)))
    algorithm = draw(st.sampled_from(supported_algorithms(kind)))
    n = draw(st.integers(1, 16))
    size = draw(st.one_of(st.integers(0, 70), st.integers(0, 100_000)))
    rows = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    root = draw(st.integers(0, n - 1))
    return kind, algorithm, n, size, (rows, n // rows), root


def build(case: tuple[CollectiveKind, Algorithm, int, int, tuple[int, int], int]) -> Schedule:
    kind, algorithm, n, size, grid, root = case
    return build_schedule(kind, algorithm, n, size, grid_shape=grid, root=root)


def expected_volume(s: Schedule, grid: tuple[int, int]) -> int:
    """Bytes all ranks send in total, from each algorithm's hop counts."""
    n, size = s.n_ranks, s.total_bytes
    if s.kind is K.ALL_REDUCE:
        return 2 * (n - 1) * size  # also MESH2D: r(c-1) + (r-1) = n - 1
    if s.kind is not K.ALL_TO_ALL:
        return (n - 1) * size  # every chunk reaches (or leaves) n - 1 ranks once
    rows, cols = grid
    hops_per_destination = {
        A.DIRECT: n - 1,
        A.RING: n * (n - 1) // 2,  # block i -> j goes (j - i) mod n hops
        A.BIRING: n * n // 4,  # ... or the shorter way round
        A.MESH2D: (n - rows) + (n - cols),  # one row hop and/or one column hop
    }[s.algorithm]
    return hops_per_destination * size


@settings(max_examples=100, deadline=None)
@given(cases())
def test_every_schedule_passes_the_checker_and_moves_the_known_volume(case) -> None:
    s = build(case)
    check_schedule(s)
    assert s.total_bytes_sent() == expected_volume(s, case[4])
    assert sum(s.chunk_bytes) == s.total_bytes * (s.n_ranks if s.kind is K.ALL_TO_ALL else 1)
    assert [t.step for t in s.transfers] == sorted(t.step for t in s.transfers)
    assert all(group for group in s.steps()), "no idle steps"
    assert s == build(case), "deterministic"


@settings(max_examples=60, deadline=None)
@given(cases(), st.data())
def test_dropping_any_transfer_breaks_the_schedule(case, data) -> None:
    s = build(case)
    if not s.transfers:
        return
    i = data.draw(st.integers(0, len(s.transfers) - 1))
    broken = dataclasses.replace(s, transfers=s.transfers[:i] + s.transfers[i + 1 :])
    with pytest.raises(PlanError):
        check_schedule(broken)


@settings(max_examples=60, deadline=None)
@given(cases(), st.data())
def test_repeating_a_reduce_transfer_double_counts(case, data) -> None:
    s = build(case)
    reduces = [t for t in s.transfers if t.reduce]
    if not reduces:
        return
    t = data.draw(st.sampled_from(reduces))
    broken = dataclasses.replace(s, transfers=(*s.transfers, t))
    with pytest.raises(PlanError, match="twice"):
        check_schedule(broken)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("algorithm", [A.RING, A.BIRING, A.DIRECT])
def test_all_reduce_sends_two_n_minus_one_over_n_per_rank(n: int, algorithm: Algorithm) -> None:
    size = 2 * n * 1000  # divisible by n (and 2n for the two half rings)
    s = build_schedule(K.ALL_REDUCE, algorithm, n, size)
    assert s.bytes_sent() == (2 * (n - 1) * size // n,) * n


@pytest.mark.parametrize(("rows", "cols"), [(1, 6), (2, 3), (3, 2), (4, 4), (6, 1)])
def test_mesh2d_all_reduce_per_rank_volume_and_steps(rows: int, cols: int) -> None:
    n = rows * cols
    size = n * 120
    s = build_schedule(K.ALL_REDUCE, A.MESH2D, n, size, grid_shape=(rows, cols))
    # rows: reduce-scatter and all-gather of S; columns: the same on a row block S / cols
    per_rank = 2 * (cols - 1) * size // cols + 2 * (rows - 1) * size // n
    assert s.bytes_sent() == (per_rank,) * n
    assert s.n_steps == 2 * (rows - 1) + 2 * (cols - 1)


def test_ring_all_reduce_schedule_by_hand() -> None:
    s = build_schedule(K.ALL_REDUCE, A.RING, 3, 10)
    assert s.chunk_bytes == (4, 3, 3)
    assert s.n_steps == 4
    # rank r sends chunk r - 1 - step in the reduce-scatter, r - step in the all-gather
    assert s.steps()[0] == (
        Transfer(0, 0, 1, 3, (2,), True),
        Transfer(0, 1, 2, 4, (0,), True),
        Transfer(0, 2, 0, 3, (1,), True),
    )
    assert s.steps()[2] == (
        Transfer(2, 0, 1, 4, (0,), False),
        Transfer(2, 1, 2, 3, (1,), False),
        Transfer(2, 2, 0, 3, (2,), False),
    )


@pytest.mark.parametrize("kind", [K.REDUCE_SCATTER, K.ALL_GATHER])
@pytest.mark.parametrize("size", [0, 5, 17, 1000])
def test_rank_blocks_do_not_depend_on_the_algorithm(kind: CollectiveKind, size: int) -> None:
    n = 6
    for algorithm in supported_algorithms(kind):
        s = build_schedule(kind, algorithm, n, size, grid_shape=(2, 3))
        blocks = [sum(s.chunk_bytes[c] for c in s.owned_chunks(r)) for r in range(n)]
        assert blocks == list(split_even(size, n)), algorithm


def test_chunk_sizes_spread_the_remainder_exactly() -> None:
    assert split_even(10, 4) == (3, 3, 2, 2)
    assert chunk_sizes(K.ALL_REDUCE, 2, 5, 4) == (2, 1, 1, 1)
    assert chunk_sizes(K.REDUCE_SCATTER, 2, 5, 4) == (2, 1, 1, 1)  # blocks 3 and 2
    assert chunk_sizes(K.ALL_GATHER, 3, 7, 6) == (2, 1, 1, 1, 1, 1)
    assert chunk_sizes(K.ALL_TO_ALL, 2, 3, 4) == (2, 1, 2, 1)  # block i -> j is piece j


@pytest.mark.parametrize("n", range(2, 17))
@pytest.mark.parametrize("max_operands", [2, 3, 4, 5])
def test_root_adds_at_most_max_operands(n: int, max_operands: int) -> None:
    s = build_schedule(K.ALL_REDUCE, A.ROOT, n, 4096, root=1, max_operands=max_operands)
    check_schedule(s)
    assert s.max_add_operands() <= max_operands
    reduces = [t for t in s.transfers if t.reduce]
    assert {t.dst for t in reduces} == {1}
    assert sorted(t.src for t in reduces) == [r for r in range(n) if r != 1]
    assert all(t.bytes == 4096 for t in s.transfers)  # whole buffers, as on the seed machine
    add_steps = math.ceil((n - 1) / (max_operands - 1))
    assert s.n_steps == add_steps + 1
    assert [t.dst for t in s.steps()[-1]] == [r for r in range(n) if r != 1]


def test_root_matches_the_seed_machine_with_four_replicas() -> None:
    s = build_schedule(K.ALL_REDUCE, A.ROOT, 4, 400)
    assert s.root == 0
    assert s.steps() == (
        tuple(Transfer(0, r, 0, 400, (0,), True) for r in (1, 2, 3)),
        tuple(Transfer(1, 0, r, 400, (0,), False) for r in (1, 2, 3)),
    )
    assert s.max_add_operands() == 4


def test_tree_shape_and_pipelining() -> None:
    s = build_schedule(K.BROADCAST, A.TREE, 7, 90, root=2, arity=3)
    check_schedule(s)
    # positions (rank - 2) mod 7: 0 -> 1, 2, 3; 1 -> 4, 5, 6
    assert {(t.src, t.dst) for t in s.transfers} == {
        (2, 3), (2, 4), (2, 5), (3, 6), (3, 0), (3, 1)
    }  # fmt: skip
    assert s.n_steps == 2
    piped = build_schedule(K.ALL_REDUCE, A.TREE, 7, 90, arity=2, pipeline_chunks=3)
    check_schedule(piped)
    assert piped.n_chunks == 3
    assert piped.n_steps == 2 * 2 + 3 - 1  # up and down a depth-2 tree, 3 pieces
    assert piped.max_add_operands() == 3  # own copy + two children


def test_single_rank_gives_an_empty_schedule() -> None:
    for kind in CollectiveKind:
        for algorithm in supported_algorithms(kind):
            s = build_schedule(kind, algorithm, 1, 123)
            assert s.transfers == () and s.n_steps == 0 and s.steps() == ()
            check_schedule(s)


def test_unsupported_pairs_name_the_pair_and_the_alternatives() -> None:
    with pytest.raises(
        PlanError, match=r"no tree algorithm for all-to-all.*ring, biring, mesh2d, direct"
    ):
        build_schedule(K.ALL_TO_ALL, A.TREE, 4, 64)
    with pytest.raises(PlanError, match="no root algorithm for reduce-scatter"):
        build_schedule(K.REDUCE_SCATTER, A.ROOT, 4, 64)
    assert build_schedule("all-reduce", "ring", 2, 8).algorithm is A.RING
    with pytest.raises(PlanError, match="unknown Algorithm 'hypercube'"):
        build_schedule(K.ALL_REDUCE, "hypercube", 4, 64)


def test_bad_arguments_are_plan_errors() -> None:
    with pytest.raises(PlanError, match="grid_shape"):
        build_schedule(K.ALL_REDUCE, A.MESH2D, 6, 64)
    with pytest.raises(PlanError, match="rows \\* cols must equal n_ranks = 6"):
        build_schedule(K.ALL_REDUCE, A.MESH2D, 6, 64, grid_shape=(2, 2))
    with pytest.raises(PlanError, match="root 4"):
        build_schedule(K.BROADCAST, A.RING, 4, 64, root=4)
    with pytest.raises(PlanError, match="max_operands"):
        build_schedule(K.REDUCE, A.ROOT, 4, 64, max_operands=1)
    with pytest.raises(PlanError, match="n_ranks"):
        build_schedule(K.REDUCE, A.ROOT, 0, 64)
    with pytest.raises(PlanError, match="total_bytes"):
        build_schedule(K.REDUCE, A.ROOT, 2, -1)


# --- hand-broken schedules -------------------------------------------------------------


def replace_transfers(s: Schedule, *transfers: Transfer) -> Schedule:
    return dataclasses.replace(s, transfers=tuple(transfers))


def test_checker_rejects_a_send_before_the_sender_has_the_chunk() -> None:
    s = build_schedule(K.ALL_GATHER, A.RING, 4, 40)
    early = [
        dataclasses.replace(t, step=0) if t.step == 1 and t.src == 1 else t for t in s.transfers
    ]
    with pytest.raises(PlanError, match="step 0 rank 1 sends chunk 0 to rank 2 but does not hold"):
        check_schedule(replace_transfers(s, *early))


def test_transfers_of_one_step_read_the_state_before_the_step() -> None:
    s = build_schedule(K.BROADCAST, A.RING, 3, 6, pipeline_chunks=1)
    assert s.transfers == (Transfer(0, 0, 1, 6, (0,), False), Transfer(1, 1, 2, 6, (0,), False))
    same_step = replace_transfers(s, s.transfers[0], dataclasses.replace(s.transfers[1], step=0))
    with pytest.raises(PlanError, match="rank 1 sends chunk 0 to rank 2 but does not hold it"):
        check_schedule(same_step)


def test_checker_rejects_a_dropped_transfer_with_the_missing_contribution() -> None:
    s = build_schedule(K.ALL_REDUCE, A.RING, 4, 40)
    last = s.transfers[-1]
    with pytest.raises(PlanError, match=f"rank {last.dst} ends holding"):
        check_schedule(replace_transfers(s, *s.transfers[:-1]))


def test_checker_rejects_double_counting() -> None:
    s = build_schedule(K.REDUCE, A.DIRECT, 3, 30)
    twice = Transfer(1, 1, 0, 30, (0,), True)
    with pytest.raises(
        PlanError, match=r"step 1 rank 1 adds chunk 0 into rank 0, counting .* \[1\] twice"
    ):
        check_schedule(replace_transfers(s, *s.transfers, twice))


def test_checker_rejects_malformed_transfers() -> None:
    s = build_schedule(K.BROADCAST, A.DIRECT, 3, 30)
    cases = {
        "claims 29 bytes": Transfer(0, 0, 1, 29, (0,), False),
        "sends to itself": Transfer(0, 1, 1, 30, (0,), False),
        "outside 0..2": Transfer(0, 0, 3, 30, (0,), False),
        "chunk outside": Transfer(0, 0, 1, 30, (1,), False),
        "non-empty set of distinct": Transfer(0, 0, 1, 60, (0, 0), False),
        "negative step": Transfer(-1, 0, 1, 30, (0,), False),
    }
    for message, bad in cases.items():
        with pytest.raises(PlanError, match=message):
            check_schedule(replace_transfers(s, bad, *s.transfers[1:]))


def test_checker_rejects_conflicting_writes_and_adds_into_nothing() -> None:
    s = build_schedule(K.ALL_GATHER, A.DIRECT, 3, 30)
    both = replace_transfers(s, *s.transfers, Transfer(1, 1, 2, 10, (0,), False),
                             Transfer(1, 0, 2, 10, (0,), False))  # fmt: skip
    with pytest.raises(PlanError, match="both overwrite chunk 0 of rank 2"):
        check_schedule(both)
    b = build_schedule(K.BROADCAST, A.DIRECT, 3, 30)
    with pytest.raises(PlanError, match="which does not hold that chunk"):
        check_schedule(replace_transfers(b, Transfer(0, 0, 1, 30, (0,), True), *b.transfers[1:]))


def test_checker_rejects_the_wrong_collective() -> None:
    s = build_schedule(K.REDUCE_SCATTER, A.RING, 4, 40)
    with pytest.raises(PlanError, match="all-reduce ring schedule: rank 0 ends holding"):
        check_schedule(dataclasses.replace(s, kind=K.ALL_REDUCE))

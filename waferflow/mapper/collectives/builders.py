"""Schedule builders: one function per algorithm, dispatched by ``build_schedule``.

Ring order is rank order. MESH2D views the ranks as a row-major ``rows x cols`` grid
(rank ``a * cols + b`` at row ``a``, column ``b``); the caller places ranks on cores so
that this grid matches the wafer. Pipelined broadcast / reduce cut the buffer into
``pipeline_chunks`` pieces (per direction for BIRING); the defaults are the chain or
tree depth + 1 for RING, BIRING and MESH2D (so a piece is about S / n on a ring) and
1 for TREE.
"""

from __future__ import annotations

from typing import TypeVar

from waferflow.errors import PlanError
from waferflow.mapper.collectives import patterns as pat
from waferflow.mapper.collectives.schedule import (
    Algorithm,
    CollectiveKind,
    Schedule,
    Transfer,
    chunk_sizes,
    make_transfer,
)

K = CollectiveKind
A = Algorithm
E = TypeVar("E", CollectiveKind, Algorithm)


def supported_algorithms(kind: CollectiveKind) -> tuple[Algorithm, ...]:
    """The algorithms ``build_schedule`` implements for ``kind``, in enum order."""
    kind = CollectiveKind(kind)
    if kind in (K.ALL_REDUCE, K.BROADCAST, K.REDUCE):
        return tuple(Algorithm)
    return (A.RING, A.BIRING, A.MESH2D, A.DIRECT)


def build_schedule(
    kind: CollectiveKind,
    algorithm: Algorithm,
    n_ranks: int,
    total_bytes: int,
    *,
    grid_shape: tuple[int, int] | None = None,
    root: int = 0,
    arity: int = 2,
    max_operands: int = 4,
    pipeline_chunks: int | None = None,
) -> Schedule:
    """The transfers of ``kind`` over ``n_ranks`` ranks with ``algorithm``.

    ``grid_shape`` (rows, cols) is required by MESH2D and ignored otherwise; ``root``
    is the root of BROADCAST / REDUCE and of TREE / ROOT all-reduce; ``arity`` is the
    TREE fan-out; ``max_operands`` bounds ROOT's adds (its own copy + at most
    max_operands - 1 incoming buffers per step, see ``Schedule.max_add_operands``).
    """
    kind, algorithm = _enum(CollectiveKind, kind), _enum(Algorithm, algorithm)
    _check_int("n_ranks", n_ranks, 1)
    _check_int("total_bytes", total_bytes, 0)
    _check_int("arity", arity, 1)
    _check_int("max_operands", max_operands, 2)
    if pipeline_chunks is not None:
        _check_int("pipeline_chunks", pipeline_chunks, 1)
    if not 0 <= root < n_ranks:
        raise PlanError(f"collective root {root} is not a rank of a group of {n_ranks}")
    supported = supported_algorithms(kind)
    if algorithm not in supported:
        names = ", ".join(a.value for a in supported)
        raise PlanError(
            f"no {algorithm.value} algorithm for {kind.value}; supported algorithms: {names}"
        )
    grid = _grid(algorithm, n_ranks, grid_shape)
    rooted = kind in (K.BROADCAST, K.REDUCE) or (
        kind is K.ALL_REDUCE and algorithm in (A.TREE, A.ROOT)
    )
    schedule_root = root if rooted else None
    if n_ranks == 1:
        return Schedule(kind, algorithm, 1, total_bytes, 1, (), schedule_root)

    n, s = n_ranks, total_bytes
    if algorithm is A.RING:
        n_chunks, transfers = _ring(kind, n, s, root, pipeline_chunks)
    elif algorithm is A.BIRING:
        n_chunks, transfers = _biring(kind, n, s, root, pipeline_chunks)
    elif algorithm is A.MESH2D:
        assert grid is not None
        n_chunks, transfers = _mesh2d(kind, grid, s, root, pipeline_chunks)
    elif algorithm is A.TREE:
        n_chunks, transfers = _tree(kind, n, s, root, arity, pipeline_chunks)
    elif algorithm is A.DIRECT:
        n_chunks, transfers = _direct(kind, n, s, root)
    else:
        n_chunks, transfers = _root(kind, n, s, root, max_operands)
    ordered = tuple(sorted(transfers, key=lambda t: (t.step, t.src, t.dst, t.chunks)))
    return Schedule(kind, algorithm, n, s, n_chunks, ordered, schedule_root)


# --- argument checks ------------------------------------------------------------------


def _enum(cls: type[E], value: E | str) -> E:
    try:
        return cls(value)
    except ValueError:
        names = ", ".join(m.value for m in cls)
        raise PlanError(f"unknown {cls.__name__} {value!r}; expected one of: {names}") from None


def _check_int(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlanError(f"collective option {name} must be an integer >= {minimum}, not {value!r}")


def _grid(
    algorithm: Algorithm, n_ranks: int, grid_shape: tuple[int, int] | None
) -> tuple[int, int] | None:
    if algorithm is not A.MESH2D:
        return None
    if grid_shape is None:
        if n_ranks == 1:
            return (1, 1)
        raise PlanError(
            f"the mesh2d algorithm needs grid_shape=(rows, cols) with rows * cols = {n_ranks}"
        )
    rows, cols = grid_shape
    if rows < 1 or cols < 1 or rows * cols != n_ranks:
        raise PlanError(
            f"mesh2d grid_shape {tuple(grid_shape)} does not cover the group: "
            f"rows * cols must equal n_ranks = {n_ranks}"
        )
    return (rows, cols)


def _n_pieces(requested: int | None, default: int, total_bytes: int) -> int:
    """Pipeline depth, capped so that no piece is empty when there are bytes to send."""
    k = default if requested is None else requested
    return max(1, min(k, total_bytes))


def _singles(chunks: range | list[int]) -> list[tuple[int, ...]]:
    return [(c,) for c in chunks]


# --- algorithms -------------------------------------------------------------------------

Built = tuple[int, list[Transfer]]


def _ring(kind: CollectiveKind, n: int, s: int, root: int, pipeline: int | None) -> Built:
    order = list(range(n))
    if kind in (K.ALL_REDUCE, K.REDUCE_SCATTER, K.ALL_GATHER):
        sizes = chunk_sizes(kind, n, s, n)
        pieces = _singles(range(n))
        out: list[Transfer] = []
        if kind is not K.ALL_GATHER:
            out += pat.ring_reduce_scatter(order, pieces, sizes, 0)
        if kind is not K.REDUCE_SCATTER:
            ag_start = 0 if kind is K.ALL_GATHER else n - 1
            out += pat.ring_all_gather(order, pieces, sizes, ag_start)
        return n, out
    if kind is K.ALL_TO_ALL:
        return n * n, _ring_all_to_all(n, s, both_ways=False)
    k = _n_pieces(pipeline, n, s)
    sizes = chunk_sizes(kind, n, s, k)
    pieces = _singles(range(k))
    if kind is K.BROADCAST:
        return k, pat.tree_broadcast(pat.chain(n, root, +1), pieces, sizes, 0)
    return k, pat.tree_reduce(pat.chain_into(n, root, +1), pieces, sizes, 0)


def _biring(kind: CollectiveKind, n: int, s: int, root: int, pipeline: int | None) -> Built:
    if kind in (K.ALL_REDUCE, K.REDUCE_SCATTER, K.ALL_GATHER):
        # Rank i's block is chunks 2i (clockwise ring) and 2i + 1 (counter-clockwise).
        sizes = chunk_sizes(kind, n, s, 2 * n)
        cw = list(range(n))
        ccw = [(-p) % n for p in range(n)]
        rings = ((cw, [(2 * r,) for r in cw]), (ccw, [(2 * r + 1,) for r in ccw]))
        out: list[Transfer] = []
        for order, pieces in rings:
            if kind is not K.ALL_GATHER:
                out += pat.ring_reduce_scatter(order, pieces, sizes, 0)
            ag_start = 0 if kind is K.ALL_GATHER else n - 1
            if kind is not K.REDUCE_SCATTER:
                out += pat.ring_all_gather(order, pieces, sizes, ag_start)
        return 2 * n, out
    if kind is K.ALL_TO_ALL:
        return n * n, _ring_all_to_all(n, s, both_ways=True)
    k = _n_pieces(pipeline, n, s)
    sizes = chunk_sizes(kind, n, s, 2 * k)
    even, odd = _singles(range(0, 2 * k, 2)), _singles(range(1, 2 * k, 2))
    if kind is K.BROADCAST:
        return 2 * k, pat.tree_broadcast(pat.chain(n, root, +1), even, sizes, 0) + (
            pat.tree_broadcast(pat.chain(n, root, -1), odd, sizes, 0)
        )
    return 2 * k, pat.tree_reduce(pat.chain_into(n, root, +1), even, sizes, 0) + (
        pat.tree_reduce(pat.chain_into(n, root, -1), odd, sizes, 0)
    )


def _ring_all_to_all(n: int, s: int, *, both_ways: bool) -> list[Transfer]:
    """Store and forward around the ring: block i -> j travels (j - i) mod n hops
    forward, or with ``both_ways`` the shorter way round (ties go forward). At step
    s a rank forwards, in one transfer per direction, every block that left its
    source s hops ago and has further to go."""
    sizes = chunk_sizes(K.ALL_TO_ALL, n, s, n * n)
    out = []
    for step in range(n - 1):
        for r in range(n):
            fwd_src, back_src = (r - step) % n, (r + step) % n
            fwd, back = [], []
            for d in range(step + 1, n):
                if not both_ways or d <= n - d:
                    fwd.append(fwd_src * n + (fwd_src + d) % n)
                if both_ways and d < n - d:
                    back.append(back_src * n + (back_src - d) % n)
            if fwd:
                out.append(make_transfer(step, r, (r + 1) % n, sorted(fwd), sizes, False))
            if back:
                out.append(make_transfer(step, r, (r - 1) % n, sorted(back), sizes, False))
    return out


def _mesh2d(
    kind: CollectiveKind, grid: tuple[int, int], s: int, root: int, pipeline: int | None
) -> Built:
    rows, cols = grid
    n = rows * cols
    if kind is K.ALL_TO_ALL:
        return n * n, _mesh2d_all_to_all(rows, cols, s)
    if kind in (K.BROADCAST, K.REDUCE):
        tree = pat.grid_tree(rows, cols, root)
        k = _n_pieces(pipeline, max(pat.depths(tree)) + 1, s)
        sizes = chunk_sizes(kind, n, s, k)
        build = pat.tree_broadcast if kind is K.BROADCAST else pat.tree_reduce
        return k, build(tree, _singles(range(k)), sizes, 0)
    # Chunk i belongs to rank i; column b's block holds the chunks of column b's ranks,
    # so a row phase moves whole column blocks and a column phase single chunks.
    sizes = chunk_sizes(kind, n, s, n)
    row_orders = [[a * cols + b for b in range(cols)] for a in range(rows)]
    col_orders = [[a * cols + b for a in range(rows)] for b in range(cols)]
    col_block = [tuple(a * cols + b for a in range(rows)) for b in range(cols)]
    row_pieces = col_block
    out: list[Transfer] = []
    step = 0

    def phase(orders: list[list[int]], gather: bool, per_column: bool) -> None:
        nonlocal step
        for order in orders:
            pieces = [(r,) for r in order] if per_column else row_pieces
            build = pat.ring_all_gather if gather else pat.ring_reduce_scatter
            out.extend(build(order, pieces, sizes, step))
        step += len(orders[0]) - 1

    if kind is K.ALL_GATHER:
        phase(col_orders, gather=True, per_column=True)
        phase(row_orders, gather=True, per_column=False)
    else:
        phase(row_orders, gather=False, per_column=False)
        phase(col_orders, gather=False, per_column=True)
        if kind is K.ALL_REDUCE:
            phase(col_orders, gather=True, per_column=True)
            phase(row_orders, gather=True, per_column=False)
    return n, out


def _mesh2d_all_to_all(rows: int, cols: int, s: int) -> list[Transfer]:
    """Two direct phases: along the row to the destination's column, then along the
    column to the destination's row (one transfer per rank pair per phase)."""
    n = rows * cols
    sizes = chunk_sizes(K.ALL_TO_ALL, n, s, n * n)
    out = []
    for a in range(rows):
        for b in range(cols):
            src = a * cols + b
            for b2 in range(cols):
                if b2 != b:
                    blocks = [src * n + a2 * cols + b2 for a2 in range(rows)]
                    out.append(make_transfer(0, src, a * cols + b2, blocks, sizes, False))
    second = 1 if cols > 1 else 0
    for a in range(rows):
        for b in range(cols):
            here = a * cols + b
            for a2 in range(rows):
                if a2 != a:
                    dst = a2 * cols + b
                    blocks = [(a * cols + b1) * n + dst for b1 in range(cols)]
                    out.append(make_transfer(second, here, dst, blocks, sizes, False))
    return out


def _tree(
    kind: CollectiveKind, n: int, s: int, root: int, arity: int, pipeline: int | None
) -> Built:
    tree = pat.heap_tree(n, root, arity)
    k = _n_pieces(pipeline, 1, s)
    sizes = chunk_sizes(kind, n, s, k)
    pieces = _singles(range(k))
    if kind is K.BROADCAST:
        return k, pat.tree_broadcast(tree, pieces, sizes, 0)
    up = pat.tree_reduce(tree, pieces, sizes, 0)
    if kind is K.REDUCE:
        return k, up
    # The root sends piece j down at height + j, right after it has added it.
    return k, up + pat.tree_broadcast(tree, pieces, sizes, pat.heights(tree)[root])


def _direct(kind: CollectiveKind, n: int, s: int, root: int) -> Built:
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    if kind is K.ALL_TO_ALL:
        sizes = chunk_sizes(kind, n, s, n * n)
        return n * n, [make_transfer(0, i, j, [i * n + j], sizes, False) for i, j in pairs]
    if kind in (K.BROADCAST, K.REDUCE):
        sizes = chunk_sizes(kind, n, s, 1)
        others = [r for r in range(n) if r != root]
        if kind is K.BROADCAST:
            return 1, [make_transfer(0, root, r, [0], sizes, False) for r in others]
        return 1, [make_transfer(0, r, root, [0], sizes, True) for r in others]
    sizes = chunk_sizes(kind, n, s, n)
    out = []
    if kind is not K.ALL_GATHER:  # everybody adds its piece of j into j
        out += [make_transfer(0, i, j, [j], sizes, True) for i, j in pairs]
    if kind is not K.REDUCE_SCATTER:  # j hands its (reduced) piece to everybody
        step = 1 if kind is K.ALL_REDUCE else 0
        out += [make_transfer(step, j, i, [j], sizes, False) for i, j in pairs]
    return n, out


def _root(kind: CollectiveKind, n: int, s: int, root: int, max_operands: int) -> Built:
    """The seed machine: the replicas send whole buffers to the root, which adds its
    own copy and up to max_operands - 1 of them per step, then sends the sum back."""
    sizes = chunk_sizes(kind, n, s, 1)
    others = [r for r in range(n) if r != root]
    if kind is K.BROADCAST:
        return 1, [make_transfer(0, root, r, [0], sizes, False) for r in others]
    batch = max_operands - 1
    out = [make_transfer(i // batch, r, root, [0], sizes, True) for i, r in enumerate(others)]
    if kind is K.ALL_REDUCE:
        back = (len(others) + batch - 1) // batch
        out += [make_transfer(back, root, r, [0], sizes, False) for r in others]
    return 1, out

"""Plain data for collective schedules: kinds, algorithms, transfers, schedules.

A schedule is a list of point-to-point transfers between the ranks of a group, each
tagged with a step. Steps run one after another; transfers of one step may run
concurrently and read the state *before* the step.

Units and conventions
---------------------
``total_bytes`` (``S``) is the size of one rank's buffer:

* ALL_REDUCE, BROADCAST, REDUCE: the buffer being reduced / broadcast.
* REDUCE_SCATTER: the input buffer; rank ``i`` ends with block ``i`` of it.
* ALL_GATHER: the output buffer; rank ``i`` contributes block ``i`` of it.
* ALL_TO_ALL: each rank's send buffer; block ``j`` of rank ``i``'s buffer goes to ``j``.

Blocks and chunks (exact byte accounting, no rounding loss):

* ``split_even(S, n)`` cuts ``S`` bytes into ``n`` parts whose sizes differ by at most
  one byte; the first ``S % n`` parts get the extra byte. Sizes always sum to ``S``.
* REDUCE_SCATTER / ALL_GATHER: ``n_chunks`` is a multiple ``m * n_ranks``; the buffer
  is cut into ``n_ranks`` rank blocks, block ``i`` into ``m`` chunks, and chunk
  ``i * m + k`` is the k-th piece of block ``i``. Rank ``i`` owns chunks
  ``[i * m, (i + 1) * m)`` (see ``Schedule.owned_chunks``), whatever the algorithm.
* ALL_TO_ALL: ``n_chunks == n_ranks ** 2``; chunk ``i * n + j`` is the block that
  rank ``i`` sends to rank ``j``, of size ``split_even(S, n)[j]``.
* ALL_REDUCE / BROADCAST / REDUCE: the buffer is cut directly into ``n_chunks`` chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from waferflow.errors import PlanError


class CollectiveKind(Enum):
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all-to-all"


class Algorithm(Enum):
    """Declaration order is the chooser's tie-break order."""

    RING = "ring"  # one unidirectional ring in rank order 0 -> 1 -> ... -> n-1 -> 0
    BIRING = "biring"  # two opposite rings, each carrying half the data
    MESH2D = "mesh2d"  # ranks as an r x c row-major grid: rows, then columns, then rows
    TREE = "tree"  # k-ary heap tree rooted at the root: reduce up, broadcast down
    DIRECT = "direct"  # every rank talks to every other rank directly, in one step
    ROOT = "root"  # the seed machine: everybody sends to the root, which adds and returns


def split_even(total: int, parts: int) -> tuple[int, ...]:
    """``total`` bytes cut into ``parts`` sizes differing by at most one (sum exact)."""
    base, extra = divmod(total, parts)
    return tuple(base + 1 if i < extra else base for i in range(parts))


def chunk_sizes(
    kind: CollectiveKind, n_ranks: int, total_bytes: int, n_chunks: int
) -> tuple[int, ...]:
    """Byte size of every chunk of a schedule (see the module docstring)."""
    if kind is CollectiveKind.ALL_TO_ALL:
        if n_chunks != n_ranks * n_ranks:
            raise PlanError(
                f"an all-to-all schedule needs n_ranks**2 = {n_ranks**2} chunks, not {n_chunks}"
            )
        return split_even(total_bytes, n_ranks) * n_ranks
    if kind in (CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_GATHER):
        if n_chunks % n_ranks:
            raise PlanError(
                f"a {kind.value} schedule needs a multiple of n_ranks = {n_ranks} chunks, "
                f"not {n_chunks}"
            )
        per_rank = n_chunks // n_ranks
        return tuple(
            size
            for block in split_even(total_bytes, n_ranks)
            for size in split_even(block, per_rank)
        )
    return split_even(total_bytes, n_chunks)


@dataclass(frozen=True, slots=True)
class Transfer:
    """``src`` sends chunks ``chunks`` (``bytes`` in total) to ``dst`` during ``step``.

    With ``reduce`` the receiver adds the chunks into its own copy; otherwise it
    overwrites its copy. Ranks are indices into the group.
    """

    step: int
    src: int
    dst: int
    bytes: int
    chunks: tuple[int, ...]
    reduce: bool


@dataclass(frozen=True)
class Schedule:
    """A collective as step-tagged transfers (build with ``build_schedule``, verify with
    ``check_schedule``). ``root`` is set for BROADCAST / REDUCE and for the rooted
    all-reduce algorithms (TREE, ROOT), else None."""

    kind: CollectiveKind
    algorithm: Algorithm
    n_ranks: int
    total_bytes: int
    n_chunks: int
    transfers: tuple[Transfer, ...]
    root: int | None = None

    @cached_property
    def chunk_bytes(self) -> tuple[int, ...]:
        """Size of each chunk in bytes. Sums to ``total_bytes`` (to n_ranks x total_bytes
        for ALL_TO_ALL, which has one block per source and destination)."""
        return chunk_sizes(self.kind, self.n_ranks, self.total_bytes, self.n_chunks)

    @property
    def n_steps(self) -> int:
        return 1 + max((t.step for t in self.transfers), default=-1)

    def steps(self) -> tuple[tuple[Transfer, ...], ...]:
        """Transfers grouped by step: entry ``s`` holds the transfers of step ``s``."""
        groups: list[list[Transfer]] = [[] for _ in range(self.n_steps)]
        for t in self.transfers:
            if t.step < 0:
                raise PlanError(f"transfer {t} has a negative step")
            groups[t.step].append(t)
        return tuple(tuple(g) for g in groups)

    def owned_chunks(self, rank: int) -> tuple[int, ...]:
        """The chunks of rank ``rank``'s block (REDUCE_SCATTER output, ALL_GATHER input)."""
        per_rank = self.n_chunks // self.n_ranks
        return tuple(range(rank * per_rank, (rank + 1) * per_rank))

    def bytes_sent(self) -> tuple[int, ...]:
        """Bytes each rank sends over the whole schedule."""
        sent = [0] * self.n_ranks
        for t in self.transfers:
            sent[t.src] += t.bytes
        return tuple(sent)

    def total_bytes_sent(self) -> int:
        return sum(t.bytes for t in self.transfers)

    def max_add_operands(self) -> int:
        """The widest add any rank performs: 1 (its own copy) + the number of reduce
        transfers delivering the same chunk to it in the same step; 1 if none."""
        fan_in: dict[tuple[int, int, int], int] = {}
        for t in self.transfers:
            if t.reduce:
                for c in t.chunks:
                    key = (t.step, t.dst, c)
                    fan_in[key] = fan_in.get(key, 0) + 1
        return 1 + max(fan_in.values(), default=0)


def make_transfer(
    step: int, src: int, dst: int, chunks: Sequence[int], sizes: Sequence[int], reduce: bool
) -> Transfer:
    """A transfer whose byte count is the exact sum of its chunks' sizes."""
    chunk_tuple = tuple(chunks)
    return Transfer(step, src, dst, sum(sizes[c] for c in chunk_tuple), chunk_tuple, reduce)

"""Symbolic execution of a schedule: does it compute the collective it claims?

Every rank holds, per chunk, the set of contributions (ranks whose input is summed
into its copy), kept as a bit mask; 0 means the rank holds nothing for the chunk.
Initial state: for reducing kinds every rank holds its own contribution everywhere;
for ALL_GATHER a rank holds only its own block; for BROADCAST only the root holds the
buffer; for ALL_TO_ALL rank i holds the blocks i -> j (chunks i * n + j).

A step reads the state before the step (so a rank cannot forward in step s what it
receives in step s) and then applies its transfers: a copy overwrites the receiver's
chunk with the sender's, a reduce adds the sender's chunk into the receiver's. Several
reduce transfers into the same (rank, chunk) in one step form one multi-operand add;
a copy together with any other write to the same (rank, chunk) in one step is an
error, and so is adding a contribution the receiver already holds (double counting).
"""

from __future__ import annotations

from waferflow.errors import PlanError
from waferflow.mapper.collectives.schedule import CollectiveKind, Schedule, Transfer, chunk_sizes

K = CollectiveKind


def check_schedule(schedule: Schedule) -> None:
    """Raise PlanError describing the first violation; return None if the schedule is
    well formed, causal, never double counts and meets the collective's postcondition."""
    what = f"{schedule.kind.value} {schedule.algorithm.value} schedule"
    _check_shape(schedule, what)
    state = _initial_state(schedule)
    for step, group in enumerate(schedule.steps()):
        _apply_step(state, step, group, what)
    _check_postcondition(schedule, state, what)


def _ranks(mask: int) -> list[int]:
    return [r for r in range(mask.bit_length()) if mask >> r & 1]


def _check_shape(s: Schedule, what: str) -> None:
    if s.n_ranks < 1 or s.n_chunks < 1 or s.total_bytes < 0:
        raise PlanError(
            f"{what}: needs n_ranks >= 1, n_chunks >= 1 and total_bytes >= 0, got "
            f"{s.n_ranks}, {s.n_chunks}, {s.total_bytes}"
        )
    sizes = chunk_sizes(s.kind, s.n_ranks, s.total_bytes, s.n_chunks)
    needs_root = s.kind in (K.BROADCAST, K.REDUCE)
    if (needs_root and s.root is None) or (s.root is not None and not 0 <= s.root < s.n_ranks):
        raise PlanError(f"{what}: root {s.root} is not a rank of the group of {s.n_ranks}")
    for t in s.transfers:
        where = f"{what}: transfer {t}"
        if t.step < 0:
            raise PlanError(f"{where} has a negative step")
        if not (0 <= t.src < s.n_ranks and 0 <= t.dst < s.n_ranks):
            raise PlanError(f"{where} names a rank outside 0..{s.n_ranks - 1}")
        if t.src == t.dst:
            raise PlanError(f"{where} sends to itself")
        if not t.chunks or len(set(t.chunks)) != len(t.chunks):
            raise PlanError(f"{where} must carry a non-empty set of distinct chunks")
        if not all(0 <= c < s.n_chunks for c in t.chunks):
            raise PlanError(f"{where} names a chunk outside 0..{s.n_chunks - 1}")
        expected = sum(sizes[c] for c in t.chunks)
        if t.bytes != expected:
            raise PlanError(f"{where} claims {t.bytes} bytes but its chunks hold {expected}")


def _initial_state(s: Schedule) -> list[list[int]]:
    n, m = s.n_ranks, s.n_chunks
    if s.kind in (K.ALL_REDUCE, K.REDUCE_SCATTER, K.REDUCE):
        return [[1 << r] * m for r in range(n)]
    state = [[0] * m for _ in range(n)]
    if s.kind is K.ALL_GATHER:
        for r in range(n):
            for c in s.owned_chunks(r):
                state[r][c] = 1 << r
    elif s.kind is K.BROADCAST:
        assert s.root is not None
        state[s.root] = [1 << s.root] * m
    else:  # ALL_TO_ALL
        for i in range(n):
            for j in range(n):
                state[i][i * n + j] = 1 << i
    return state


def _apply_step(state: list[list[int]], step: int, group: tuple[Transfer, ...], what: str) -> None:
    copies: dict[tuple[int, int], tuple[int, Transfer]] = {}
    adds: dict[tuple[int, int], list[tuple[int, Transfer]]] = {}
    for t in group:
        for c in t.chunks:
            held = state[t.src][c]
            if not held:
                raise PlanError(
                    f"{what}: at step {step} rank {t.src} sends chunk {c} to rank {t.dst} "
                    f"but does not hold it yet"
                )
            key = (t.dst, c)
            if t.reduce:
                adds.setdefault(key, []).append((held, t))
            elif key in copies:
                raise PlanError(
                    f"{what}: at step {step} ranks {copies[key][1].src} and {t.src} both "
                    f"overwrite chunk {c} of rank {t.dst}"
                )
            else:
                copies[key] = (held, t)
    for key, (held, t) in copies.items():
        if key in adds:
            raise PlanError(
                f"{what}: at step {step} chunk {key[1]} of rank {key[0]} is both overwritten "
                f"(by rank {t.src}) and added into (by rank {adds[key][0][1].src})"
            )
        state[key[0]][key[1]] = held
    for (dst, c), incoming in adds.items():
        acc = state[dst][c]
        if not acc:
            raise PlanError(
                f"{what}: at step {step} rank {incoming[0][1].src} adds chunk {c} into rank "
                f"{dst}, which does not hold that chunk"
            )
        for held, t in incoming:
            if acc & held:
                raise PlanError(
                    f"{what}: at step {step} rank {t.src} adds chunk {c} into rank {dst}, "
                    f"counting the contributions of ranks {_ranks(acc & held)} twice"
                )
            acc |= held
        state[dst][c] = acc


def _check_postcondition(s: Schedule, state: list[list[int]], what: str) -> None:
    n = s.n_ranks
    everyone = (1 << n) - 1
    wanted: list[tuple[int, int, int]] = []  # (rank, chunk, mask it must hold)
    if s.kind is K.ALL_REDUCE:
        wanted = [(r, c, everyone) for r in range(n) for c in range(s.n_chunks)]
    elif s.kind is K.REDUCE_SCATTER:
        wanted = [(r, c, everyone) for r in range(n) for c in s.owned_chunks(r)]
    elif s.kind is K.ALL_GATHER:
        owners = [(c, o) for o in range(n) for c in s.owned_chunks(o)]
        wanted = [(r, c, 1 << o) for r in range(n) for c, o in owners]
    elif s.kind is K.BROADCAST:
        assert s.root is not None
        wanted = [(r, c, 1 << s.root) for r in range(n) for c in range(s.n_chunks)]
    elif s.kind is K.REDUCE:
        assert s.root is not None
        wanted = [(s.root, c, everyone) for c in range(s.n_chunks)]
    else:  # ALL_TO_ALL: rank j ends with block i -> j of every i
        wanted = [(j, i * n + j, 1 << i) for j in range(n) for i in range(n)]
    for rank, chunk, mask in wanted:
        got = state[rank][chunk]
        if got != mask:
            held = f"contributions of ranks {_ranks(got)}" if got else "nothing"
            raise PlanError(
                f"{what}: rank {rank} ends holding {held} for chunk {chunk}; it must hold "
                f"the contributions of ranks {_ranks(mask)}"
            )

"""Steepest-descent local search for assignments: move an actor to a core with room,
or swap two actors, whichever lowers ``sum(bytes x hops)`` most; repeat until no move
helps. Cheap (sparse, vectorised), deterministic, and a much better starting point
for the CP-SAT neighbourhood search than the greedy placement alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from waferflow.mapper.problem import AssignProblem


def swap_descent(
    problem: AssignProblem, cores: tuple[int, ...], max_passes: int = 20
) -> tuple[int, ...]:
    grid = problem.grid
    n = problem.n_actors
    cols = grid.cols
    pairs = problem.pair_bytes
    if not pairs:
        return cores
    pos = np.array(cores, dtype=np.int64)
    ea = np.array([a for a, _ in pairs] + [b for _, b in pairs], dtype=np.int64)
    eb = np.array([b for _, b in pairs] + [a for a, _ in pairs], dtype=np.int64)
    ew = np.array(list(pairs.values()) * 2, dtype=np.float64)
    order = np.argsort(ea, kind="stable")
    ea, eb, ew = ea[order], eb[order], ew[order]
    start = np.searchsorted(ea, np.arange(n + 1))
    mem = np.array(problem.actor_mem, dtype=np.int64)
    m = problem.max_actors_per_core
    alive = np.zeros(grid.num_cores, dtype=bool)
    alive[list(grid.alive_cores)] = True
    if problem.allowed is None:
        ok_core = None
    else:
        ok_core = np.zeros((n, grid.num_cores), dtype=bool)
        for a, cs in enumerate(problem.allowed):
            ok_core[a, list(cs)] = True
    count = np.bincount(pos, minlength=grid.num_cores)
    load = np.bincount(pos, weights=mem, minlength=grid.num_cores).astype(np.int64)
    all_cores = np.arange(grid.num_cores)
    cr, cc = np.divmod(all_cores, cols)

    def dist(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        return np.abs(p // cols - q // cols) + np.abs(p % cols - q % cols)

    scale = float(ew.max())
    for _ in range(max_passes):
        moved = False
        for a in range(n):
            s, e = start[a], start[a + 1]
            if s == e:
                continue
            nb, w = eb[s:e], ew[s:e]
            pa = pos[a]
            here = float(w @ dist(np.full(len(nb), pa), pos[nb]))
            # cost of a at every core, given its partners where they are
            at = (
                w[:, None]
                * (
                    np.abs(cr[None, :] - (pos[nb] // cols)[:, None])
                    + np.abs(cc[None, :] - (pos[nb] % cols)[:, None])
                )
            ).sum(0)
            # moves to a core with a free slot and room in memory
            room = alive & (count < m) & (load + mem[a] <= problem.core_sram)
            if ok_core is not None:
                room &= ok_core[a]
            room[pa] = False
            best_delta, best = 0.0, None
            if room.any():
                c = int(np.argmin(np.where(room, at, np.inf)))
                best_delta, best = float(at[c] - here), ("move", c)
            # swaps: a goes to p_j, j goes to p_a
            pj = pos
            d_a = at[pj] - here  # a's change
            # j's change: its partners see it at pa instead of pj (a itself moves to pj)
            cur_j = np.zeros(n)
            new_j = np.zeros(n)
            np.add.at(cur_j, ea, ew * dist(pos[ea], pos[eb]))
            np.add.at(new_j, ea, ew * dist(np.full(len(ea), pa), pos[eb]))
            d_j = new_j - cur_j
            # the a-j flow itself: counted in both with a stale partner position; it keeps its length
            w_aj = np.zeros(n)
            w_aj[nb] = w
            d_pair = dist(np.full(n, pa), pj)
            delta = d_a + d_j + 2 * w_aj * d_pair
            valid = pj != pa
            if ok_core is not None:
                valid &= ok_core[a, pj] & ok_core[np.arange(n), pa]
            valid &= load[pj] - mem + mem[a] <= problem.core_sram
            valid &= load[pa] - mem[a] + mem <= problem.core_sram
            delta = np.where(valid, delta, np.inf)
            j = int(np.argmin(delta))
            if delta[j] < best_delta:
                best_delta, best = float(delta[j]), ("swap", j)
            if best is None or best_delta >= -1e-9 * scale:
                continue
            kind, k = best
            if kind == "move":
                count[pa] -= 1
                load[pa] -= mem[a]
                pos[a] = k
                count[k] += 1
                load[k] += mem[a]
            else:
                pj_k = pos[k]
                load[pa] += mem[k] - mem[a]
                load[pj_k] += mem[a] - mem[k]
                pos[a], pos[k] = pj_k, pa
            moved = True
        if not moved:
            break
    return tuple(int(c) for c in pos)


def swap_descent_dist(
    pairs: Sequence[tuple[int, int, float]],
    cores: tuple[int, ...],
    dist: np.ndarray,
    max_passes: int = 20,
) -> tuple[int, ...]:
    """Steepest descent over swaps of two actors' cores and moves to a free core,
    one actor per core, under ``sum(bytes x dist[core_a, core_b])`` for any distance
    matrix (a switched fabric's switch hops). Deterministic: ties go to the lowest
    index."""
    n, n_cores = len(cores), dist.shape[0]
    if not pairs or n < 2:
        return cores
    w = np.zeros((n, n))
    for a, b, x in pairs:
        w[a, b] += x
        w[b, a] += x
    pos = np.array(cores, dtype=np.int64)
    for _ in range(max_passes):
        moved = False
        for a in range(n):
            # cost of a at every core, its partners where they are
            at = w[a] @ dist[pos]  # (n_cores,)
            here = at[pos[a]]
            free = np.ones(n_cores, dtype=bool)
            free[pos] = False
            best, delta = -1, 0.0
            if free.any():
                c = int(np.argmin(np.where(free, at, np.inf)))
                best, delta = n + c, float(at[c] - here)
            # swap with j: a's change plus j's (j's partners see it at pos[a]); the a-j
            # flow keeps its length, counted once in each term with a stale end
            at_j = (w * (dist[pos[a]][pos][None, :] - dist[pos][:, pos])).sum(1)
            d = at[pos] - here + at_j + 2 * w[a] * dist[pos[a], pos]
            d[a] = np.inf
            j = int(np.argmin(d))
            if d[j] < delta:
                best, delta = j, float(d[j])
            if best < 0 or delta >= -1e-9 * max(1.0, abs(here)):
                continue
            if best >= n:
                pos[a] = best - n
            else:
                pos[a], pos[best] = pos[best], pos[a]
            moved = True
        if not moved:
            break
    return tuple(int(c) for c in pos)

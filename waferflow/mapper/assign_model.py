"""The CP-SAT actor-assignment model, over all actors or over an LNS neighbourhood.

Variables: ``x[a, c]`` (actor ``a`` on core ``c``) for each candidate core; each actor's
``row_a = sum(row(c) x[a, c])`` and ``col_a`` likewise. Constraints: one core per actor;
per core at most ``max_actors_per_core`` actors and at most its SRAM in bytes (after
the actors that stay fixed). Objective: ``sum(bytes x (|row_a - row_b| + |col_a -
col_b|))`` with the absolute values as ``add_abs_equality``; a flow to a fixed actor
is linear in ``x``. Redundant: distinct cores are at least one hop apart, and an actor's
distances to its ``k`` partners add up to at least the ``k`` nearest ring distances.
Byte counts are scaled to integers rounding down, so the solver's bound stays valid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from waferflow.mapper._ortools import cp_model
from waferflow.mapper.problem import AssignProblem

_RESOLUTION = 1e6


@dataclass
class AssignModel:
    model: cp_model.CpModel
    x: dict[tuple[int, int], cp_model.IntVar]
    free: list[int]
    unit: float  # bytes x hops per integer objective step
    techniques: tuple[str, ...]

    def solution(self, solver: cp_model.CpSolver) -> dict[int, int]:
        out: dict[int, int] = {}
        for (a, c), v in self.x.items():
            if solver.boolean_value(v):
                out[a] = c
        return out


def ring_sum(k: int, per_cell: int) -> int:
    """Least total distance of ``k`` distinct places around a core (4d places at distance d)."""
    total, d, left = 0, 1, 4 * per_cell
    for _ in range(k):
        if left == 0:
            d += 1
            left = 4 * d * per_cell
        total += d
        left -= 1
    return total


@dataclass(frozen=True)
class GridSymmetry:
    """Reflections of the grid that map its dead cores onto themselves."""

    mirror_cols: bool
    mirror_rows: bool
    transpose: bool

    @classmethod
    def of(cls, problem: AssignProblem) -> GridSymmetry:
        g = problem.grid
        if problem.allowed is not None:
            return cls(False, False, False)
        d = g.dead
        return cls(
            {(r, g.cols - 1 - c) for r, c in d} == d,
            {(g.rows - 1 - r, c) for r, c in d} == d,
            g.rows == g.cols and {(c, r) for r, c in d} == d,
        )

    def canonical(
        self, problem: AssignProblem, anchor: int, cores: tuple[int, ...]
    ) -> tuple[int, ...]:
        g = problem.grid
        rc = [divmod(c, g.cols) for c in cores]
        ar, ac = rc[anchor]
        if self.mirror_cols and 2 * ac > g.cols - 1:
            rc = [(r, g.cols - 1 - c) for r, c in rc]
        ar, ac = rc[anchor]
        if self.mirror_rows and 2 * ar > g.rows - 1:
            rc = [(g.rows - 1 - r, c) for r, c in rc]
        ar, ac = rc[anchor]
        if self.transpose and ac > ar:
            rc = [(c, r) for r, c in rc]
        return tuple(r * g.cols + c for r, c in rc)


def anchor_actor(problem: AssignProblem) -> int:
    vol = [0.0] * problem.n_actors
    for (a, b), byt in problem.pair_bytes.items():
        vol[a] += byt
        vol[b] += byt
    return max(range(problem.n_actors), key=lambda a: (vol[a], -a))


def build_assign_model(
    problem: AssignProblem,
    free: list[int],
    cand: dict[int, list[int]],
    current: tuple[int, ...],
    *,
    symmetry: GridSymmetry | None = None,
) -> AssignModel:
    """Free actors ``free`` may move to their candidate cores; all others stay at
    ``current`` (which also hints the free ones)."""
    grid = problem.grid
    cols = grid.cols
    m = cp_model.CpModel()
    free_set = set(free)
    pairs = problem.pair_bytes
    top = max(pairs.values(), default=1.0)
    unit = top / _RESOLUTION if top > 0 else 1.0
    techniques = ["redundant:one-hop", "redundant:ring-sums"]
    # what the fixed actors leave on each core
    slots: dict[int, int] = {}
    mem: dict[int, int] = {}
    for a, c in enumerate(current):
        if a not in free_set:
            slots[c] = slots.get(c, 0) + 1
            mem[c] = mem.get(c, 0) + problem.actor_mem[a]
    x: dict[tuple[int, int], cp_model.IntVar] = {}
    by_core: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
    row: dict[int, cp_model.IntVar] = {}
    col: dict[int, cp_model.IntVar] = {}
    for a in free:
        lits = []
        for c in sorted(set(cand[a])):
            if slots.get(c, 0) >= problem.max_actors_per_core:
                continue
            if mem.get(c, 0) + problem.actor_mem[a] > problem.core_sram:
                continue
            v = m.new_bool_var(f"x{a}_{c}")
            x[(a, c)] = v
            by_core.setdefault(c, []).append((a, v))
            lits.append((c, v))
        m.add_exactly_one(v for _, v in lits)
        row[a] = m.new_int_var(0, grid.rows - 1, f"r{a}")
        col[a] = m.new_int_var(0, cols - 1, f"c{a}")
        m.add(row[a] == sum((c // cols) * v for c, v in lits))
        m.add(col[a] == sum((c % cols) * v for c, v in lits))
    for c, lst in sorted(by_core.items()):
        left = problem.max_actors_per_core - slots.get(c, 0)
        if len(lst) > left:
            m.add(sum(v for _, v in lst) <= left)
        room = problem.core_sram - mem.get(c, 0)
        if sum(problem.actor_mem[a] for a, _ in lst) > room:
            m.add(sum(problem.actor_mem[a] * v for a, v in lst) <= room)
    terms = []
    dists: dict[int, list] = {a: [] for a in free}
    hint_vals: list[tuple[cp_model.IntVar, int]] = []
    for (a, b), byt in pairs.items():
        wgt = math.floor(byt / unit)
        if a in free_set and b in free_set:
            dr = m.new_int_var(0, grid.rows - 1, f"dr{a}_{b}")
            dc = m.new_int_var(0, cols - 1, f"dc{a}_{b}")
            m.add_abs_equality(dr, row[a] - row[b])
            m.add_abs_equality(dc, col[a] - col[b])
            if problem.max_actors_per_core == 1:
                m.add(dr + dc >= 1)
            dists[a].append(dr + dc)
            dists[b].append(dr + dc)
            ra, ca = divmod(current[a], cols)
            rb, cb = divmod(current[b], cols)
            hint_vals += [(dr, abs(ra - rb)), (dc, abs(ca - cb))]
            if wgt:
                terms.append(wgt * (dr + dc))
        elif a in free_set or b in free_set:
            f, other = (a, b) if a in free_set else (b, a)
            ro, co = divmod(current[other], cols)
            if wgt:
                terms.extend(
                    wgt * (abs(c // cols - ro) + abs(c % cols - co)) * x[(f, c)]
                    for c in sorted(set(cand[f]))
                    if (f, c) in x and (c // cols, c % cols) != (ro, co)
                )
    if problem.max_actors_per_core == 1:
        for a in free:
            if len(dists[a]) >= 5:
                m.add(sum(dists[a]) >= ring_sum(len(dists[a]), 1))
    m.minimize(sum(terms) if terms else 0)
    if symmetry is not None and len(free) == problem.n_actors:
        g = anchor_actor(problem)
        if symmetry.mirror_cols:
            m.add(2 * col[g] <= cols - 1)
            techniques.append("symmetry:mirror-cols")
        if symmetry.mirror_rows:
            m.add(2 * row[g] <= grid.rows - 1)
            techniques.append("symmetry:mirror-rows")
        if symmetry.transpose:
            m.add(col[g] <= row[g])
            techniques.append("symmetry:transpose")
    for a in free:
        for c in sorted(set(cand[a])):
            if (a, c) in x:
                m.add_hint(x[(a, c)], c == current[a])
        m.add_hint(row[a], current[a] // cols)
        m.add_hint(col[a], current[a] % cols)
    for v, val in hint_vals:
        m.add_hint(v, val)
    return AssignModel(m, x, free, unit, tuple(techniques))

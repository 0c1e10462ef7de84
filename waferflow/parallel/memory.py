"""``plan-memory``: per-core liveness of a parallel plan, and the fit check.

A core runs its actors one after another (the plan's order), so liveness is exact
at the grain of actors:

* **resident** for the whole step: the sources its actors use (their shard): weights,
  optimizer state (buffers the optimizer reads: AdamW's two moments), inputs;
* **buffers**: every value an actor produces lives from that actor to the last actor
  on the core that reads it (the producer alone when it is only sent away); a value
  received from another core lives from its first reader to its last; gradients
  accumulated over micro-batches are one buffer from the first micro-batch's
  producer to the optimizer. So GPipe holds every micro-batch's activations until
  its backward, 1F1B at most ``p - s`` of them on stage ``s``;
* with **recompute**, a forward value is freed after its forward readers and lives
  again from the first backward reader of its micro-batch (whose actor carries the
  recomputed FLOPs); the stage's received inputs are kept.

Approximations: a buffer is allocated whole at its producer's start (no finer
grain inside an actor); received values are allocated when first read, not when they
arrive (the simulator's ``peak_mem_bytes`` counts arrival); no allocator
fragmentation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain, count
from operator import attrgetter

import numpy as np

from waferflow.errors import PlanError
from waferflow.ir.graph import Phase
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Coord, Wafer
from waferflow.parallel.assemble import ActorMeta

CATEGORIES = ("weights", "optimizer", "inputs", "gradients", "activations")


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


@dataclass(frozen=True)
class CoreMemory:
    core: int
    coord: Coord
    peak_bytes: int
    capacity_bytes: int
    breakdown: tuple[tuple[str, int], ...]  # bytes per category at the peak
    peak_actor: str = ""
    stage: int = -1
    resident: tuple[tuple[str, int], ...] = ()  # sources kept all step, per category
    # live bytes per category when the core's first optimizer actor starts: what the
    # update holds (gradients waiting for it; with ZeRO, shards); empty in inference
    at_update: tuple[tuple[str, int], ...] = ()
    # the most each category holds at any one time (resident sources included)
    most: tuple[tuple[str, int], ...] = ()

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.capacity_bytes

    @property
    def overflow(self) -> int:
        return self.peak_bytes - self.capacity_bytes

    def part(self, category: str) -> int:
        return dict(self.breakdown).get(category, 0)

    def resident_part(self, category: str) -> int:
        return dict(self.resident).get(category, 0)

    def update_part(self, category: str) -> int:
        return dict(self.at_update).get(category, 0)

    def most_part(self, category: str) -> int:
        return dict(self.most).get(category, 0)

    def describe(self, unit: str = "core") -> str:
        parts = ", ".join(f"{c} {fmt_bytes(b)}" for c, b in self.breakdown if b)
        return (
            f"{unit} {self.coord} (stage {self.stage}): needs {fmt_bytes(self.peak_bytes)} "
            f"({parts or 'nothing'}), has {fmt_bytes(self.capacity_bytes)}"
        )


@dataclass(frozen=True)
class MemoryReport:
    cores: tuple[CoreMemory, ...]
    recompute: bool = False
    plan_name: str = ""
    wafer_name: str = ""
    suggestions: tuple[str, ...] = field(default=())
    unit: str = "core"  # what each entry is: a core, or on a coarse view a node (Wafer.unit)

    @property
    def fits(self) -> bool:
        return all(c.fits for c in self.cores)

    @property
    def peak_bytes(self) -> int:
        return max((c.peak_bytes for c in self.cores), default=0)

    def offenders(self, k: int = 5) -> list[CoreMemory]:
        bad = [c for c in self.cores if not c.fits]
        return sorted(bad, key=lambda c: (-c.overflow, c.core))[:k]

    def top(self, k: int = 5) -> list[CoreMemory]:
        return sorted(self.cores, key=lambda c: (-c.peak_bytes, c.core))[:k]

    def rows(self, k: int = 8) -> tuple[list[str], list[list[str]]]:
        """Header and rows of the ``k`` fullest cores: peak and what it is made of."""
        head = [self.unit, "stage", "planned peak", "capacity", *CATEGORIES]
        body = []
        for c in self.top(k):
            body.append([str(c.coord), str(c.stage), fmt_bytes(c.peak_bytes),
                         fmt_bytes(c.capacity_bytes), *(fmt_bytes(c.part(x)) for x in CATEGORIES)])  # fmt: skip
        return head, body

    def table(self, k: int = 8) -> str:
        """The ``k`` fullest cores: peak and what it is made of."""
        head, body = self.rows(k)
        rows = [head, *body]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True)) for r in rows]
        more = len(self.cores) - min(k, len(self.cores))
        if more > 0:
            lines.append(f"... and {more} more {self.unit}(s)")
        return "\n".join(lines)

    def summary(self) -> str:
        state = "fits" if self.fits else "DOES NOT FIT"
        used = sum(c.peak_bytes for c in self.cores)
        return (
            f"memory (planned, by liveness): {state}; peak {fmt_bytes(self.peak_bytes)} per "
            f"{self.unit} ({'recompute' if self.recompute else 'no recompute'}), "
            f"{fmt_bytes(used)} over {len(self.cores):,} {self.unit}s"
        )

    def refusal(self, k: int = 5) -> str:
        bad = [c for c in self.cores if not c.fits]
        lines = [
            f"plan {self.plan_name} does not fit wafer {self.wafer_name!r}: {len(bad)} of "
            f"{len(self.cores)} {self.unit}s need more SRAM than they have; the worst:"
        ]
        lines += [f"  {c.describe(self.unit)}" for c in self.offenders(k)]
        lines.append("  " + ("; ".join(self.suggestions) if self.suggestions else ""))
        return "\n".join(x for x in lines if x.strip())


def suggestions(
    worst: CoreMemory, *, recompute: bool, gpipe: bool = False, microbatches: int = 1
) -> tuple[str, ...]:
    """What could make the worst core fit, from what fills it."""
    tips = []
    fixed = worst.part("weights") + worst.part("optimizer") + worst.part("gradients")
    if fixed > worst.capacity_bytes:
        tips.append("weights, gradients and optimizer state alone exceed a core: raise tp or pp")
    if worst.part("activations") > 0:
        ways = [] if recompute else ["recompute=true"]
        if gpipe and microbatches > 1:
            ways.append("schedule=1f1b")
        ways.append("more micro-batches (smaller ones)")
        tips.append("for activations try " + ", ".join(ways))
    tips.append(
        "or give each rank more of the wafer: fewer ranks (dp x tp x pp), or span=N for "
        "N x N nodes per rank (span=auto, the default, takes the largest the ranks leave room for)"
    )
    return tuple(tips)


def plan_memory(
    plan: Plan,
    meta: Sequence[ActorMeta],
    wafer: Wafer,
    *,
    recompute: bool = False,
    plan_name: str = "",
    gpipe: bool = False,
    microbatches: int = 1,
) -> MemoryReport:
    """Peak bytes per core of ``plan`` (see the module docstring)."""
    cores: list[CoreMemory] = []
    codes = _Codes()
    for core, ids in plan.order:
        if not ids or wafer.is_switch_node(core):
            continue  # a switch unit streams what it adds or copies: no buffers of its own
        cores.append(_core(core, ids, plan, meta, wafer, recompute, codes))
    bad = [c for c in cores if not c.fits]
    tips = ()
    if bad:
        worst = max(bad, key=lambda c: c.overflow)
        tips = suggestions(worst, recompute=recompute, gpipe=gpipe, microbatches=microbatches)
    return MemoryReport(
        tuple(cores), recompute, plan_name or plan.name, wafer.name, tips, unit=wafer.unit
    )


# The liveness is computed on arrays rather than actor by actor (a plan has 10^5
# actors): the core's touches (an actor's makings, then its reads) in order give each
# buffer's live interval(s), and running sums per category of the bytes allocated and
# freed at each position give the peak. Within a position frees come first, so a
# category's most is its value after some position, and the peak is the first
# position with the largest total.

_OTHER, _BACKWARD, _FORWARD = 0, 1, 2  # an actor's block kind, from its first letter
_ACTIVATIONS = CATEGORIES.index("activations")
_FIELDS = attrgetter("block", "produces", "uses", "resident")
_PHASE = attrgetter("phase")


@dataclass
class _Codes:
    """Small ints for the strings of one plan, shared by its cores: block -> kind,
    category -> row (CATEGORIES first; any other category after them, counted in
    the peak but not reported)."""

    blocks: dict[str, int] = field(default_factory=dict)
    cats: dict[str, int] = field(default_factory=lambda: {c: i for i, c in enumerate(CATEGORIES)})

    def kinds(self, blocks: Sequence[str]) -> np.ndarray:
        for b in set(blocks).difference(self.blocks):
            first = b[:1]
            self.blocks[b] = _BACKWARD if first == "B" else _FORWARD if first == "F" else _OTHER
        return np.fromiter(map(self.blocks.__getitem__, blocks), np.int8, len(blocks))

    def rows(self, cats: Sequence[str]) -> np.ndarray:
        for c in set(cats).difference(self.cats):
            self.cats[c] = len(self.cats)
        return np.fromiter(map(self.cats.__getitem__, cats), np.intp, len(cats))


@dataclass(frozen=True)
class _Buffers:
    """A core's buffers, an entry each: bytes, category row, the positions (indices
    into the core's actors) of its first touch, its last, its last outside a backward
    block, its first and last inside one (-1: none), and whether a forward actor made it."""

    nbytes: np.ndarray
    cat: np.ndarray
    start: np.ndarray
    last: np.ndarray
    fwd_last: np.ndarray
    bwd_first: np.ndarray
    bwd_last: np.ndarray
    made_in_f: np.ndarray


def _first(kid: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each key among the touches in ``mask`` and its first such touch."""
    cand = np.flatnonzero(mask)
    key, at = np.unique(kid[cand], return_index=True)
    return key, cand[at]


def _buffers(
    produces: Sequence[list],
    uses: Sequence[list],
    received: Callable[[int], dict],
    kind: np.ndarray,
    codes: _Codes,
) -> _Buffers:
    """The buffers of actors ``0..n-1`` (actor ``i`` makes ``produces[i]``, then reads
    ``uses[i]``; ``received(i)`` is what it received). A buffer is allocated by its
    first making, or by the first read of a value the reader received; a read before
    either is of a value not held here."""
    n = len(kind)
    pkeys, pbytes, pcats = list(zip(*chain.from_iterable(produces), strict=True)) or [(), (), ()]
    ucount = list(map(len, uses))
    np_, t = len(pkeys), len(pkeys) + sum(ucount)
    at = np.arange(n)
    pos = np.concatenate((np.repeat(at, list(map(len, produces))), np.repeat(at, ucount)))
    nbytes = np.zeros(t, np.int64)
    nbytes[:np_] = pbytes
    cat = np.full(t, _ACTIVATIONS, np.intp)
    cat[:np_] = codes.rows(pcats)
    # keys as ints (each the index of its first occurrence in this listing)
    keys = [*pkeys, *chain.from_iterable(uses)]
    ids: dict = {}
    kid = np.fromiter(map(ids.setdefault, keys, count()), np.intp, t)
    # the touches in order: by actor, an actor's makings before its reads
    order = np.argsort(np.concatenate((2 * pos[:np_], 2 * pos[np_:] + 1)), kind="stable")
    kid, pos, nbytes, cat = kid[order], pos[order], nbytes[order], cat[order]
    made = order < np_
    # a buffer's birth is its key's first making, or an earlier read of it that its
    # actor received; only the reads before a making look at what was received (few)
    key, birth = _first(kid, made)
    born = np.full(t, t, np.intp)
    born[key] = birth
    early = np.flatnonzero(~made & (np.arange(t) < born[kid]))
    if len(early):
        got, sizes = [], []
        for i, j, a in zip(early.tolist(), order[early].tolist(), pos[early].tolist(), strict=True):
            b = received(a).get(keys[j])
            if b is not None:
                got.append(i)
                sizes.append(b)
        if got:
            nbytes[got] = sizes
            allocs = made.copy()
            allocs[got] = True
            key, birth = _first(kid, allocs)
            born[key] = birth
    row = np.full(t, -1, np.intp)
    row[key] = np.arange(len(key))
    use = np.flatnonzero(np.arange(t) >= born[kid])  # the touches from each birth on
    b, p = row[kid[use]], pos[use]
    size = nbytes[birth]
    mk = made[use]
    np.maximum.at(size, b[mk], nbytes[use][mk])  # a larger making grows the buffer
    start = pos[birth]
    last = start.copy()
    np.maximum.at(last, b, p)
    bwd = kind[p] == _BACKWARD
    fwd_last = np.full(len(key), -1, np.int64)
    np.maximum.at(fwd_last, b[~bwd], p[~bwd])
    bwd_last = np.full(len(key), -1, np.int64)
    np.maximum.at(bwd_last, b[bwd], p[bwd])
    bwd_first = np.full(len(key), n, np.int64)
    np.minimum.at(bwd_first, b[bwd], p[bwd])
    bwd_first[bwd_last < 0] = -1
    return _Buffers(
        nbytes=size, cat=cat[birth], start=start, last=last, fwd_last=fwd_last,
        bwd_first=bwd_first, bwd_last=bwd_last,
        made_in_f=made[birth] & (kind[start] == _FORWARD),
    )  # fmt: skip


def _intervals(
    bufs: _Buffers, recompute: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Live intervals [from, to) with their bytes and category rows: with recompute a
    forward value is freed after its forward readers and lives again over its
    backward readers."""
    again = bufs.made_in_f & (bufs.bwd_first >= 0) & recompute
    fwd_end = np.where(bufs.fwd_last >= 0, bufs.fwd_last, bufs.start) + 1
    return (
        np.concatenate((bufs.start, bufs.bwd_first[again])),
        np.concatenate((np.where(again, fwd_end, bufs.last + 1), bufs.bwd_last[again] + 1)),
        np.concatenate((bufs.nbytes, bufs.nbytes[again])),
        np.concatenate((bufs.cat, bufs.cat[again])),
    )


def _core(
    core: int,
    ids: Sequence[int],
    plan: Plan,
    meta: Sequence[ActorMeta],
    wafer: Wafer,
    recompute: bool,
    codes: _Codes,
) -> CoreMemory:
    blocks, produces, uses, res = zip(*map(_FIELDS, map(meta.__getitem__, ids)), strict=True)
    n = len(ids)
    resident: dict[str, tuple[int, str]] = {}
    for name, nbytes, c in chain.from_iterable(res):
        old = resident.get(name)
        if old is None or old[0] < nbytes:
            resident[name] = (nbytes, c)
    res_total = sum(b for b, _ in resident.values())
    res_cat = dict.fromkeys(CATEGORIES, 0)
    for nbytes, c in resident.values():
        res_cat[c] = res_cat.get(c, 0) + nbytes
    bufs = _buffers(produces, uses, lambda i: meta[ids[i]].received, codes.kinds(blocks), codes)
    starts, ends, sizes, rows = _intervals(bufs, recompute)
    # bytes allocated and freed per category row and position (0..n)
    width = n + 1
    made = np.zeros(len(codes.cats) * width, np.int64)
    np.add.at(made, rows * width + starts, sizes)
    freed = np.zeros(len(codes.cats) * width, np.int64)
    np.add.at(freed, rows * width + ends, sizes)
    made, freed = made.reshape(-1, width), freed.reshape(-1, width)
    by_cat = np.cumsum(made - freed, axis=1)  # live bytes after each position
    live = by_cat.sum(axis=0)
    best = int(live.max())
    best_pos = int(live.argmax()) if best > 0 else 0
    best_cat = by_cat[:, best_pos].tolist() if best > 0 else [0] * len(codes.cats)
    most = np.maximum(by_cat.max(axis=1), 0).tolist()
    at_update: dict[str, int] = {}
    phases = list(map(_PHASE, map(plan.actors.__getitem__, ids)))
    if Phase.OPT in phases:  # buffers made before its first actor and read from it on
        update = phases.index(Phase.OPT)
        held = (made[:, :update].sum(axis=1) - freed[:, : update + 1].sum(axis=1)).tolist()
        at_update = {c: res_cat[c] + held[i] for i, c in enumerate(CATEGORIES)}
    coord = divmod(core, wafer.cols)
    return CoreMemory(
        core=core,
        coord=coord,
        peak_bytes=res_total + best,
        capacity_bytes=wafer.core_sram_bytes(coord),
        breakdown=tuple((c, best_cat[i] + res_cat[c]) for i, c in enumerate(CATEGORIES)),
        peak_actor=plan.actors[ids[min(best_pos, n - 1)]].name,
        stage=plan.actors[ids[0]].stage,
        resident=tuple((c, res_cat[c]) for c in CATEGORIES),
        at_update=tuple((c, at_update[c]) for c in CATEGORIES) if at_update else (),
        most=tuple((c, most[i] + res_cat[c]) for i, c in enumerate(CATEGORIES)),
    )


def check_fits(report: MemoryReport) -> None:
    """Raise PlanError with the needed vs available bytes of the worst cores."""
    if not report.fits:
        raise PlanError(report.refusal())


__all__ = [
    "CATEGORIES",
    "CoreMemory",
    "MemoryReport",
    "check_fits",
    "fmt_bytes",
    "plan_memory",
    "suggestions",
]

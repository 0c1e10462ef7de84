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

from collections.abc import Sequence
from dataclasses import dataclass, field

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
    for core, ids in plan.order:
        if not ids or wafer.is_switch_node(core):
            continue  # a switch unit streams what it adds or copies: no buffers of its own
        cores.append(_core(core, ids, plan, meta, wafer, recompute))
    bad = [c for c in cores if not c.fits]
    tips = ()
    if bad:
        worst = max(bad, key=lambda c: c.overflow)
        tips = suggestions(worst, recompute=recompute, gpipe=gpipe, microbatches=microbatches)
    return MemoryReport(
        tuple(cores), recompute, plan_name or plan.name, wafer.name, tips, unit=wafer.unit
    )


def _core(
    core: int,
    ids: Sequence[int],
    plan: Plan,
    meta: Sequence[ActorMeta],
    wafer: Wafer,
    recompute: bool,
) -> CoreMemory:
    resident: dict[str, tuple[int, str]] = {}
    # per buffer, in order of allocation: [first position, bytes, category, last use,
    # last use outside a backward block, first and last use inside one (-1: none),
    # made in a forward block] (one record, so that a use costs one lookup)
    bufs: dict[tuple, list] = {}
    for pos, aid in enumerate(ids):
        m = meta[aid]
        backward = m.block.startswith("B")
        forward = m.block.startswith("F")
        for name, nbytes, c in m.resident:
            old = resident.get(name)
            if old is None or old[0] < nbytes:
                resident[name] = (nbytes, c)
        touched = []  # the buffers this actor makes or reads
        for key, nbytes, c in m.produces:
            b = bufs.get(key)
            if b is None:
                b = bufs[key] = [pos, nbytes, c, pos, -1, -1, -1, forward]
            elif b[1] < nbytes:
                b[1] = nbytes
            touched.append(b)
        received = m.received
        for key in m.uses:
            b = bufs.get(key)
            if b is None:
                nbytes = received.get(key)
                if nbytes is None:
                    continue  # produced elsewhere and not held here
                b = bufs[key] = [pos, nbytes, "activations", pos, -1, -1, -1, False]
            touched.append(b)
        for b in touched:
            b[3] = pos
            if backward:
                b[6] = pos
                if b[5] < 0:
                    b[5] = pos
            else:
                b[4] = pos
    events: list[tuple[int, int, str]] = []  # (position, +/- bytes, category)
    for start, nbytes, c, last, fwd_last, bwd_first, bwd_last, made_in_f in bufs.values():
        if recompute and made_in_f and bwd_first >= 0:
            events.append((start, nbytes, c))
            events.append(((fwd_last if fwd_last >= 0 else start) + 1, -nbytes, c))
            events.append((bwd_first, nbytes, c))
            events.append((bwd_last + 1, -nbytes, c))
        else:
            events.append((start, nbytes, c))
            events.append((last + 1, -nbytes, c))
    update = next((pos for pos, aid in enumerate(ids) if plan.actors[aid].phase is Phase.OPT), None)
    events.sort()  # ties at one position sum alike in any order
    live = 0
    by_cat = dict.fromkeys(CATEGORIES, 0)
    best = 0
    best_cat = dict(by_cat)
    best_pos = 0
    most = dict(by_cat)
    # at one position frees sort first, so a category's running sum there falls, then
    # rises to its value after the position: its most is seen event by event
    i, n = 0, len(events)
    while i < n:
        pos = events[i][0]
        while i < n and events[i][0] == pos:
            _, d, c = events[i]
            live += d
            v = by_cat[c] = by_cat.get(c, 0) + d
            if v > most.get(c, 0):
                most[c] = v
            i += 1
        if live > best:
            best, best_cat, best_pos = live, dict(by_cat), pos
    res_total = sum(b for b, _ in resident.values())
    res_cat = dict.fromkeys(CATEGORIES, 0)
    for nbytes, c in resident.values():
        res_cat[c] = res_cat.get(c, 0) + nbytes
    breakdown = {c: best_cat.get(c, 0) + res_cat[c] for c in CATEGORIES}
    at_update: dict[str, int] = {}
    if update is not None:  # buffers made before L's first actor and read from it on
        at_update = dict(res_cat)
        for p, d, c in events:
            if p < update or (d < 0 and p == update):  # freed once L's first actor starts
                at_update[c] = at_update.get(c, 0) + d
    coord = divmod(core, wafer.cols)
    stage = plan.actors[ids[0]].stage
    peak_actor = plan.actors[ids[min(best_pos, len(ids) - 1)]].name if ids else ""
    return CoreMemory(
        core=core,
        coord=coord,
        peak_bytes=res_total + best,
        capacity_bytes=wafer.core_sram_bytes(coord),
        breakdown=tuple((c, breakdown.get(c, 0)) for c in CATEGORIES),
        peak_actor=peak_actor,
        stage=stage,
        resident=tuple((c, res_cat[c]) for c in CATEGORIES),
        at_update=tuple((c, at_update[c]) for c in CATEGORIES) if at_update else (),
        most=tuple((c, most.get(c, 0) + res_cat[c]) for c in CATEGORIES),
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

"""Where each rank of a parallel plan runs: ``Layout`` maps (stage, rank) to a core.

Ranks of a stage are numbered row-major over the stage's mesh (``dp`` major, ``tp``
minor), so a tensor-parallel group is a run of consecutive ranks. The default
layout (``strip_layout``) is simple and deterministic, a stand-in until the mapper
fills the same table:

* each stage is a vertical strip as wide as a tensor-parallel group, stages side by
  side from the left (wrapping into further bands of rows when they do not fit);
* within a strip a tensor-parallel group is one row, data-parallel replicas are
  stacked downwards; dead cores are skipped (the strip grows downwards), and so are
  the nodes of a coarse view short of cores while the rest is enough
  (``Wafer.nodes_below``, ``CAPACITY_TIERS``);
* when strips do not fit the wafer, ranks follow a boustrophedon walk of the alive
  cores, stage after stage; so do the ranks of a plan whose stages have different
  numbers of ranks (``cut=layer``).
"""

from __future__ import annotations

from dataclasses import dataclass

from waferflow.errors import PlanError
from waferflow.ir.target.wafer import CAPACITY_TIERS, Coord, Wafer


@dataclass(frozen=True)
class Layout:
    """``cores[stage][rank]`` is the core id (row-major) running that rank."""

    cores: tuple[tuple[int, ...], ...]
    kind: str = "strips"

    def core(self, stage: int, rank: int) -> int:
        return self.cores[stage][rank]

    @property
    def num_stages(self) -> int:
        return len(self.cores)

    def all_cores(self) -> list[int]:
        return [c for stage in self.cores for c in stage]

    def check(self, wafer: Wafer, pp: int, ranks: int, widths: tuple[int, ...] = ()) -> None:
        """Raise PlanError unless every (stage, rank) has its own alive core; a stage has
        ``ranks`` ranks, or ``widths[stage]`` when given."""
        want = list(widths) if widths else [ranks] * pp
        if [len(s) for s in self.cores] != want:
            shape = f"{pp} stage(s) of {ranks} rank(s)" if not widths else f"stages of {want}"
            raise PlanError(
                f"layout lists {[len(s) for s in self.cores]} ranks per stage; the plan has {shape}"
            )
        flat = self.all_cores()
        if len(set(flat)) != len(flat):
            raise PlanError("layout puts two ranks on the same core; give each rank its own")
        for c in flat:
            coord = divmod(c, wafer.cols)
            if not 0 <= c < wafer.num_cores or coord in wafer.dead_cores:
                raise PlanError(
                    f"layout uses core {coord}, which is not an alive core of {wafer.name}"
                )

    def describe(self, wafer: Wafer) -> str:
        lines = [f"layout ({self.kind}):"]
        for s, ranks in enumerate(self.cores):
            coords = ", ".join(f"{divmod(c, wafer.cols)}" for c in ranks)
            lines.append(f"  stage {s}: {coords}")
        return "\n".join(lines)


def snake(wafer: Wafer) -> list[int]:
    """Alive core ids in boustrophedon order (row 0 left to right, row 1 back, ...)."""
    # imported here: waferflow.passes imports every pass, and some import this package
    from waferflow.passes.lower_plan import snake_cores

    return snake_cores(wafer)


def strip_layout(
    wafer: Wafer, pp: int, ranks: int, width: int, widths: tuple[int, ...] = ()
) -> Layout:
    """The default layout (module docstring); ``width`` is the tensor-parallel degree
    (the size of the innermost mesh dimension). ``widths``: ranks per stage when the
    stages differ (a per-layer plan): they follow the snake, stage after stage."""
    if widths and len(set(widths)) > 1:
        return _snake_widths(wafer, widths)
    need = pp * ranks
    if need > wafer.num_alive:
        raise PlanError(
            f"the plan needs {need} cores ({pp} stage(s) x {ranks} rank(s)) but wafer "
            f"{wafer.name!r} has {wafer.num_alive} alive; lower dp x tp x pp or use a bigger "
            "wafer"
        )
    width = max(1, width)
    # nodes of a coarse view short of cores are skipped while the rest is enough
    skips = [w for t in CAPACITY_TIERS if need <= wafer.num_alive - len(w := wafer.nodes_below(t))]
    # a rank on a short node slows its group: a snake over strong nodes beats strips
    # that need short ones, so strips without skipping are tried only when nothing can go
    for skip in skips or [frozenset()]:
        strips = _strips(wafer, pp, ranks, width, skip)
        if strips is not None:
            return Layout(strips, "strips")
    skip = skips[0] if skips else frozenset()
    order = [c for c in snake(wafer) if wafer.coord(c) not in skip]
    return Layout(tuple(tuple(order[s * ranks : (s + 1) * ranks]) for s in range(pp)), "snake")


def _snake_widths(wafer: Wafer, widths: tuple[int, ...]) -> Layout:
    need = sum(widths)
    if need > wafer.num_alive:
        raise PlanError(
            f"the plan needs {need} cores (stages of {'+'.join(map(str, widths))} rank(s)) but "
            f"wafer {wafer.name!r} has {wafer.num_alive} alive; use a bigger wafer"
        )
    order = snake(wafer)
    out: list[tuple[int, ...]] = []
    for w in widths:
        out.append(tuple(order[:w]))
        order = order[w:]
    return Layout(tuple(out), "snake")


def _strips(
    wafer: Wafer, pp: int, ranks: int, width: int, skip: frozenset[Coord]
) -> tuple[tuple[int, ...], ...] | None:
    if width > wafer.cols:
        return None
    per_band = wafer.cols // width
    dead = wafer.dead_cores | skip
    out: list[tuple[int, ...]] = []
    top = 0
    for band_start in range(0, pp, per_band):
        bottom = top
        for s in range(band_start, min(pp, band_start + per_band)):
            c0 = (s - band_start) * width
            cores: list[int] = []
            r = top
            while len(cores) < ranks:
                if r >= wafer.rows:
                    return None
                cores.extend(
                    r * wafer.cols + c for c in range(c0, c0 + width) if (r, c) not in dead
                )
                r += 1
            out.append(tuple(cores[:ranks]))
            bottom = max(bottom, r)
        top = bottom
    return tuple(out)


__all__ = ["Layout", "snake", "strip_layout"]

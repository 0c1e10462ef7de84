"""Which rank of a parallel plan each core runs: its stage, and its place along the data-
and tensor-parallel axes (for picture labels and trace track names).

The source is the plan's ``Layout`` (``cores[stage][rank]``) and its mesh (ranks of a
stage numbered row-major, dp major, tp minor); nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from waferflow.ir.sharding import MeshAxis
from waferflow.parallel.driver import ParallelResult


@dataclass(frozen=True, slots=True)
class CoreRank:
    """The rank a core runs. ``dp`` / ``tp`` are its positions along those axes, None
    when the axis has degree 1 or when dp and tp share one dimension (a per-layer
    pattern, where only ``rank`` means something)."""

    stage: int
    rank: int  # within the stage
    ranks: int  # ranks per stage
    dp: int | None = None
    tp: int | None = None

    @property
    def label(self) -> str:
        """``'dp1 tp3'``, ``'rank 5'`` (per-layer patterns) or ``''`` (one rank a stage)."""
        parts = [f"{n}{v}" for n, v in (("dp", self.dp), ("tp", self.tp)) if v is not None]
        if parts:
            return " ".join(parts)
        return f"rank {self.rank}" if self.ranks > 1 else ""

    @property
    def long_label(self) -> str:
        """``'stage 0 dp1 tp3'``."""
        return f"stage {self.stage} {self.label}".rstrip()

    def to_json(self) -> list[Any]:
        return [self.stage, self.rank, self.ranks, self.dp, self.tp]

    @staticmethod
    def from_json(raw: Any) -> CoreRank:
        stage, rank, ranks, dp, tp = raw
        return CoreRank(int(stage), int(rank), int(ranks),
                        None if dp is None else int(dp), None if tp is None else int(tp))  # fmt: skip


def core_ranks(result: ParallelResult) -> dict[int, CoreRank]:
    """Core id -> the rank it runs, for every core of the plan's layout."""
    mesh = result.spec.mesh()
    aliased = mesh.aliased
    out: dict[int, CoreRank] = {}
    for stage, cores in enumerate(result.layout.cores):
        for rank, core in enumerate(cores):
            axes = {}
            for axis in (MeshAxis.DP, MeshAxis.TP):
                keep = not aliased and mesh.degree(axis) > 1
                axes[axis] = mesh.index(rank, axis) if keep else None
            out[core] = CoreRank(stage, rank, len(cores), axes[MeshAxis.DP], axes[MeshAxis.TP])
    return out


def ranks_to_json(ranks: Mapping[int, CoreRank]) -> dict[str, list[Any]]:
    return {str(core): r.to_json() for core, r in sorted(ranks.items())}


def ranks_from_json(raw: Mapping[str, Any]) -> dict[int, CoreRank]:
    return {int(core): CoreRank.from_json(v) for core, v in raw.items()}


__all__ = ["CoreRank", "core_ranks", "ranks_from_json", "ranks_to_json"]

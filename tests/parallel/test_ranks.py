"""Which rank each core runs, from a plan's layout and mesh."""

from __future__ import annotations

from types import SimpleNamespace

from waferflow.parallel import Layout, parse_plan
from waferflow.parallel.ranks import CoreRank, core_ranks, ranks_from_json, ranks_to_json


def _ranks(plan: str, cores: tuple[tuple[int, ...], ...]) -> dict[int, CoreRank]:
    result = SimpleNamespace(spec=parse_plan(plan), layout=Layout(cores))
    return core_ranks(result)  # type: ignore[arg-type]


def test_dp_major_tp_minor() -> None:
    ranks = _ranks("dp=2,tp=3,pp=2", ((10, 11, 12, 13, 14, 15), (20, 21, 22, 23, 24, 25)))
    assert ranks[10] == CoreRank(0, 0, 6, dp=0, tp=0)
    assert ranks[15] == CoreRank(0, 5, 6, dp=1, tp=2)
    assert ranks[23] == CoreRank(1, 3, 6, dp=1, tp=0)
    assert (ranks[15].label, ranks[15].long_label) == ("dp1 tp2", "stage 0 dp1 tp2")


def test_axes_of_degree_one_and_per_layer_patterns() -> None:
    assert _ranks("tp=2", ((4, 5),))[5].label == "tp1"
    assert _ranks("dp=2", ((4, 5),))[5].label == "dp1"
    assert _ranks("pp=2", ((4,), (5,)))[5].label == ""
    assert _ranks("pp=2", ((4,), (5,)))[5].long_label == "stage 1"
    # dp and tp share the one dimension of a per-layer pattern: only the rank means much
    assert _ranks("layers=ddt,ways=2", ((4, 5),))[5] == CoreRank(0, 1, 2)
    assert _ranks("layers=ddt,ways=2", ((4, 5),))[5].label == "rank 1"


def test_json_round_trip() -> None:
    ranks = _ranks("dp=2,tp=2,pp=2", ((0, 1, 2, 3), (4, 5, 6, 7)))
    raw = ranks_to_json(ranks)
    assert raw["5"] == [1, 1, 4, 0, 1]
    assert ranks_from_json(raw) == ranks

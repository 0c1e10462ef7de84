"""``search_plans`` (``--plan auto``): the kept plan is the exact check's best, the
search is deterministic, and a wafer too small for every plan is refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from waferflow.backend_sim.analytic import estimate
from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.target import get_wafer
from waferflow.parallel import build_parallel_plan
from waferflow.parallel import search as search_mod
from waferflow.parallel.plan_spec import SPAN_AUTO, parse_plan
from waferflow.parallel.search import PlanSearch, SearchRow, model_figures, search_plans


@pytest.fixture(scope="module")
def found(gpt2_tiny: Graph) -> PlanSearch:
    return search_plans(gpt2_tiny, get_wafer("mesh16x16"))


def _estimated(graph: Graph, plan: str) -> tuple[bool, float]:
    r = build_parallel_plan(graph, get_wafer("mesh16x16"), plan, check_memory=False)
    assert r.wafer is not None
    return r.memory.fits, estimate(r.plan, r.wafer).step_time


def test_kept_plan_fits_and_is_fastest_of_fitting_builds(
    gpt2_tiny: Graph, found: PlanSearch
) -> None:
    kept = found.kept
    assert [r.kept for r in found.rows].count(True) == 1
    assert found.best.span != SPAN_AUTO
    assert str(parse_plan(kept.plan)) == kept.plan
    fits, step = _estimated(gpt2_tiny, str(found.best))
    assert fits and kept.fits
    assert step == pytest.approx(kept.step_seconds)
    fitting = [r for r in found.rows if r.built and r.fits]
    assert len(fitting) >= 2 and found.built <= 12
    assert all(kept.step_seconds <= r.step_seconds for r in fitting if r.step_seconds)
    # an independent rebuild of another fitting row agrees with its table entry
    other = next(r for r in fitting if not r.kept)
    fits2, step2 = _estimated(gpt2_tiny, other.plan)
    assert fits2 and step2 == pytest.approx(other.step_seconds) and step2 >= step


def test_screen_sees_everything_and_table_reports_it(found: PlanSearch) -> None:
    assert found.screened == len(found.rows) > found.built
    assert found.built + found.ruled_out == sum(1 for r in found.rows if r.built or r.note)
    plans = [parse_plan(r.plan) for r in found.rows]
    assert len(set(plans)) == len(plans)
    assert all(p.microbatches >= p.pp and p.num_ranks <= 256 for p in plans)
    text = found.table()
    assert f"*  {found.kept.plan}" in text
    assert "not built" in text.splitlines()[-1]
    assert found.summary().startswith(f"plan auto: kept {found.best} (estimated ")
    assert f"of {found.screened} screened, {found.built} built" in found.summary()


def test_search_is_deterministic(gpt2_tiny: Graph, found: PlanSearch) -> None:
    again = search_plans(gpt2_tiny, get_wafer("mesh16x16"))
    assert again.table(all_rows=True) == found.table(all_rows=True)
    assert again.best == found.best


def test_max_ranks_bounds_every_candidate(gpt2_tiny: Graph) -> None:
    s = search_plans(gpt2_tiny, get_wafer("mesh16x16"), top=1, max_ranks=2)
    assert all(r.ranks <= 2 for r in s.rows)
    assert s.best.num_ranks <= 2


def test_wafer_too_small_is_refused_with_need_and_have(gpt2_tiny: Graph) -> None:
    small = replace(get_wafer("mesh4x4"), sram_bytes=128 * 1024)  # 2 MiB in all
    assert model_figures(gpt2_tiny).state_bytes < small.total_sram()
    with pytest.raises(PlanError) as info:
        search_plans(gpt2_tiny, small, top=1)
    msg = str(info.value)
    assert "fits in SRAM" in msg and "needs" in msg and "has 128.00 KiB" in msg
    assert "bigger wafer" in msg


def test_model_state_beyond_the_whole_wafer_is_refused_before_building(gpt2_tiny: Graph) -> None:
    tiny = replace(get_wafer("mesh4x4"), sram_bytes=1024)
    with pytest.raises(PlanError, match="more than all the SRAM of 'mesh4x4'"):
        search_plans(gpt2_tiny, tiny, top=1)


def test_rough_screen_never_decides_alone(
    gpt2_tiny: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The screen claims every candidate fits and ranks one rank (7.4 MiB of state and
    # activations, 2.5 MiB of SRAM in its 9x9 block of 32 KiB nodes) first: its build
    # does not fit, so the next one, which does, is kept.
    first, second = "dp=1,tp=1,pp=1,microbatches=1", "dp=1,tp=1,pp=3,microbatches=8"
    real = search_mod.rough_row

    def optimistic(*args: Any, **kw: Any) -> SearchRow:
        row = real(*args, **kw)
        order = {first: 0.0, second: 1e-12}.get(row.plan, 1.0 + row.rough_seconds)
        return replace(row, rough_bytes=0, rough_fits=True, rough_seconds=order)

    monkeypatch.setattr(search_mod, "rough_row", optimistic)
    wafer = replace(get_wafer("mesh16x16"), sram_bytes=32 * 1024)
    s = search_plans(gpt2_tiny, wafer, top=1)
    assert [r.plan for r in s.rows[:2]] == [first, second]
    # (ruled out by the memory bound of parallel.held, or built: it does not fit)
    assert s.rows[0].built or s.rows[0].ruled_out
    assert s.rows[0].fits is False and not s.rows[0].kept
    assert s.kept.plan == second and s.built + s.ruled_out == 2
    r = build_parallel_plan(gpt2_tiny, wafer, str(s.best), check_memory=False)
    assert r.memory.fits

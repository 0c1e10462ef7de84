"""``compile(..., plan="auto")``: the searched plan is the one compiled, on its view."""

from __future__ import annotations

import waferflow as wf


def test_plan_auto_compiles_the_kept_candidate_on_its_view() -> None:
    c = wf.compile("hf:gpt2-tiny", wafer="mesh16x16", mode="train", batch=4, plan="auto",
                   place="none")  # fmt: skip
    assert c.search is not None and c.parallel is not None
    assert c.parallel.spec == c.search.best
    assert c.search.kept.fits and c.parallel.memory.fits
    # the plan runs on the view its span makes, and the report names it
    assert c.wafer.name == f"mesh16x16@{c.parallel.spec.span}x" or c.parallel.spec.span == 1
    report = c.simulate()
    assert report.step_time > 0
    assert abs(report.step_time - c.search.kept.step_seconds) <= 0.5 * report.step_time

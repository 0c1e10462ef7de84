"""Every published run of the authors' simulator, reproduced from the plan alone.

The tolerance is zero: batch time (Total_time, actor 1's last stamp) and actor 1's
report fields must equal the published figures to the nanosecond."""

from __future__ import annotations

import pytest

from waferflow.backend_amcoda import (
    PUBLISHED,
    PublishedRun,
    generate_experiment,
    parse_seed_plan,
    published,
    seed_cnn_layers,
    simulate_experiment,
)
from waferflow.backend_amcoda.reference import (
    AUTHORS_TO_WAFERFLOW,
    COMMIT,
    NOT_STORED,
    PLAN_STRINGS,
    REPO,
)

TOLERANCE_NS = 0
CNN = seed_cnn_layers()


@pytest.mark.parametrize("run", PUBLISHED, ids=lambda r: f"{r.plan}@{r.mem_ports}")
def test_published_run_is_reproduced(run: PublishedRun) -> None:
    exp = generate_experiment(
        CNN, PLAN_STRINGS[run.plan], mem_ports=run.mem_ports or 4, authors_slip=run.authors_slip
    )
    r = simulate_experiment(exp, emulate_lost_completions=run.lost_completion)
    assert abs(r.actor1_last_ns - run.total_ns) <= TOLERANCE_NS
    assert r.complete != run.lost_completion
    if run.compute_ns is not None:
        a1 = r.actor(1)
        assert (a1.compute_ns, a1.comm_ns, a1.overlap_ns) == (
            run.compute_ns,
            run.comm_ns,
            run.overlap_ns,
        )


def test_the_slip_is_what_separates_the_4way_runs_from_their_plans() -> None:
    """Without the slip the plans described are about 10% faster than published."""
    for plan in ("ddd4", "ddt4"):
        pub = published(plan, 4)
        assert pub is not None and pub.authors_slip
        exp = generate_experiment(CNN, PLAN_STRINGS[plan])
        gap = (pub.total_ns - simulate_experiment(exp).batch_ns) / pub.total_ns
        assert 0.09 < gap < 0.11


def test_reference_data_is_well_formed() -> None:
    keys = [(r.plan, r.mem_ports) for r in PUBLISHED]
    assert len(keys) == len(set(keys)) == 19
    for r in PUBLISHED:
        assert r.source.startswith("file_") and r.url.startswith(
            f"https://github.com/{REPO}/blob/{COMMIT}/"
        )
        mapped = AUTHORS_TO_WAFERFLOW[r.authors_name]
        if r.authors_name.startswith("basic"):
            assert mapped == r.plan and r.mem_ports is None
        else:  # file_dis_<R>_<pattern>: R ways
            assert r.plan == f"{mapped}{r.source.split('_')[2]}"
        parse_seed_plan(PLAN_STRINGS[r.plan], CNN)
    assert AUTHORS_TO_WAFERFLOW["ddm"] == "ddt" and AUTHORS_TO_WAFERFLOW["dmm"] == "dtt"
    assert published("pipe", 1) is published("pipe", 4)  # no MemWidth folder
    assert published("ddt2", 4) is not None and published("ddd2", 2) is None
    for plan, mw in NOT_STORED:
        assert published(plan, mw) is None


@pytest.mark.parametrize(
    ("plan", "mem_ports", "actor_id", "fields"),
    [
        # file_basic_Gpipe_4/report/report_3.txt (conv3)
        ("gpipe=4", 4, 3, (9_049_380, 1_009_370, 439_080, 12_051_120)),
        # file_dis_2_ddm/MemWidth_4/report/report_5.txt (conv3 part 0)
        ("layers=ddt,ways=2", 4, 5, (4_893_700, 504_700, 125_450, 9_656_300)),
    ],
)
def test_other_actors_reports(plan: str, mem_ports: int, actor_id: int, fields: tuple) -> None:
    """Compute, communication, overlap and last stamp of actors other than actor 1."""
    r = simulate_experiment(generate_experiment(CNN, plan, mem_ports=mem_ports))
    a = r.actor(actor_id)
    assert (a.compute_ns, a.comm_ns, a.overlap_ns, a.last_ns) == fields

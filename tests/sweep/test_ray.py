"""The Ray path: the same jobs as Ray tasks on a local Ray instance (started once for
this module, bounded in memory) give the same rows as local worker processes, timings
aside; plan auto is never slower than the best uniform plan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from waferflow.sweep import load_sweep, run_sweep
from waferflow.sweep.job import TIMING_COLUMNS

ray = pytest.importorskip(
    "ray", reason="Ray is not installed here (pip install 'waferflow[distributed]')"
)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    ray.init(num_cpus=2, object_store_memory=80 * 2**20, include_dashboard=False,
             log_to_driver=False)  # fmt: skip
    yield ray
    ray.shutdown()


def _strip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def test_ray_rows_equal_local_rows(local_ray: Any, write_sweep) -> None:
    body = '[grid]\nplan = ["auto", "dp=1,tp=2"]'
    local = run_sweep(load_sweep(write_sweep(body, name="local")), jobs=2, quiet=True,
                      plots=False)  # fmt: skip
    on_ray = run_sweep(load_sweep(write_sweep(body, name="ray")), ray=True, quiet=True,
                       plots=False)  # fmt: skip
    assert local_ray.is_initialized()  # the sweep used this instance and left it running
    assert len(on_ray.rows) == 2 and on_ray.failed == 0
    assert _strip(on_ray.rows) == _strip(local.rows)
    auto = on_ray.rows[0]
    assert auto["plan"] == "auto" and "algo=ring" in auto["uniform_best_plan"]
    assert auto["uniform_plans_fit"] >= 2
    assert auto["auto_vs_uniform"] <= 1.0
    assert auto["step_time_s"] <= auto["uniform_best_step_s"]

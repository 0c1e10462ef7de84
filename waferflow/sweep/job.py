"""One sweep job in a worker: compile + simulate through the public API, as a row.

``run_job`` never raises: a job that fails records its error in its row (``status``
``failed``), so that one bad point does not stop the sweep. Rows are plain dicts of
JSON values, the same whichever process or machine ran the job; the only columns that
differ between runs are the wall times in ``TIMING_COLUMNS``.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any

from waferflow.errors import WaferflowError
from waferflow.sweep.spec import NONE_PLAN, Job, override_columns, wafer_of
from waferflow.workers import PLACE_JOBS_ENV

INPUT_COLUMNS = ("key", "index", "model", "mode", "batch", "seq", "dtype", "optimizer",
                 "wafer")  # fmt: skip
INPUT_TAIL = ("coarsen", "plan", "place", "place_time", "seed", "uniform")  # after overrides
OUTPUT_COLUMNS = (
    "status",  # ok | failed
    "error",
    "chosen_plan",  # the plan compiled (plan auto: what the search kept; span resolved)
    "view",  # the wafer view the plan runs on
    "cores_alive",
    "actors",
    "cores_used",
    "step_time_s",
    "flop_utilisation",
    "peak_mem_bytes",  # the fullest core's simulated peak
    "node_sram_bytes",  # one node of the view
    "fits",
    "busiest_link",
    "busiest_link_utilisation",
    "busiest_link_bytes",
    "placement",  # the kept placement method, or "default layout"
    "uniform_best_plan",
    "uniform_best_step_s",
    "uniform_plans_tried",
    "uniform_plans_fit",
    "auto_vs_uniform",  # step_time_s / uniform_best_step_s (plan auto; <= 1)
    "search_step_s",  # plan auto: the search's own plan, simulated on the default layout
    "auto_kept",  # search | uniform: which side the kept plan came from
    "compile_s",
    "simulate_s",
    "version",
)
TIMING_COLUMNS = ("compile_s", "simulate_s")


def input_columns(job: Job, key: str) -> dict[str, Any]:
    row: dict[str, Any] = {"key": key}
    for name in INPUT_COLUMNS[1:]:
        row[name] = getattr(job, name)
    try:
        row.update(override_columns(job, wafer_of(job)))
    except WaferflowError:  # checked when the sweep was read; keep the values as given
        row.update(dict(job.override))
    for name in INPUT_TAIL:
        row[name] = getattr(job, name)
    if job.plan is None:
        row["plan"] = NONE_PLAN
    return row


def run_job(job: Job, key: str, version: str) -> dict[str, Any]:
    """Compile and simulate ``job``; its row (module docstring). Never raises."""
    row = input_columns(job, key)
    row.update(dict.fromkeys(OUTPUT_COLUMNS))
    row["version"] = version
    # the sweep runs its jobs side by side already: one process per job's placement
    os.environ.setdefault(PLACE_JOBS_ENV, "1")
    try:
        _same_version(version)
        row.update(_run(job))
        row["status"] = "ok"
    except WaferflowError as e:
        row.update(status="failed", error=str(e))
    except Exception as e:
        row.update(status="failed", error=f"internal error: {type(e).__name__}: {e}")
    finally:
        # compile runs with the cyclic collector paused (waferflow.perf) and a worker
        # runs job after job: free what this job left in cycles before the next
        gc.collect()
    return row


def _same_version(driver: str) -> None:
    """A Ray cluster's nodes may run another waferflow than the sweep's driver."""
    import waferflow

    if waferflow.__version__ != driver:
        raise WaferflowError(
            f"this worker runs waferflow {waferflow.__version__}, the sweep {driver}: "
            "install the same version on every node"
        )


def _run(job: Job) -> dict[str, Any]:
    import waferflow as wf

    auto = job.plan == "auto"
    t0 = time.perf_counter()
    compiled = wf.compile(
        job.model, wafer=wafer_of(job), coarsen=job.coarsen, mode=job.mode, batch=job.batch,
        seq=job.seq, dtype=job.dtype, optimizer=job.optimizer, plan=job.plan, place=job.place,
        place_time=job.place_time, seed=job.seed, keep_ir=False,
        uniform_baseline=auto and job.uniform,
    )  # fmt: skip
    t1 = time.perf_counter()
    report = compiled.simulate()
    t2 = time.perf_counter()
    res = report.result
    out: dict[str, Any] = {
        "chosen_plan": str(compiled.parallel.spec) if compiled.parallel else job.plan,
        "view": compiled.wafer.name,
        "cores_alive": compiled.wafer.num_alive,
        "actors": len(compiled.plan.actors),
        "cores_used": len(compiled.plan.cores),
        "step_time_s": report.step_time,
        "flop_utilisation": res.flop_utilisation,
        "peak_mem_bytes": res.peak_memory,
        "node_sram_bytes": compiled.wafer.sram_bytes,
        "fits": report.fits,
        "placement": compiled.placement.chosen if compiled.placement else "default layout",
        "compile_s": t1 - t0,
        "simulate_s": t2 - t1,
    }
    busiest = res.busiest_links(1)
    if busiest:
        link = busiest[0]
        out.update(busiest_link=f"{list(link.src)}->{list(link.dst)}",
                   busiest_link_utilisation=link.utilisation,
                   busiest_link_bytes=link.bytes)  # fmt: skip
    search = compiled.search
    if search is not None and search.uniform is not None:
        base = search.uniform
        best = base.best_seconds
        fit = sum(1 for r in base.rows if r.step_seconds is not None)
        out.update(
            uniform_best_plan=None if base.best is None else str(base.best),
            uniform_best_step_s=best,
            uniform_plans_tried=len(base.rows),
            uniform_plans_fit=fit,
            auto_vs_uniform=None if not best else report.step_time / best,
            auto_kept="uniform" if search.uniform_kept else "search",
            search_step_s=search.searched_seconds,
        )
    return out


__all__ = ["INPUT_COLUMNS", "OUTPUT_COLUMNS", "TIMING_COLUMNS", "input_columns", "run_job"]

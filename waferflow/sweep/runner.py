"""Run a sweep's jobs: local worker processes (default) or Ray tasks; resume; outputs.

Local: a ``ProcessPoolExecutor`` of ``jobs`` processes, no server. A worker
that dies (killed, out of memory) breaks the pool; the jobs it held are then rerun one
at a time, each alone in a fresh worker, so that only the job that kills its worker
is recorded as failed. Ray: the same ``run_job`` as Ray tasks, on a local Ray
instance started for the sweep (and stopped after it), on the instance this process
already started, or on an existing cluster (``address``).

Either way, each finished row goes to the journal at once (``store.Journal``), and
the tables and plots are rewritten from it when the run ends, also when it is
interrupted: rerunning the sweep recomputes only the jobs that have no row.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from waferflow.errors import WaferflowError
from waferflow.fileio import write_bytes, write_text
from waferflow.sweep.job import INPUT_COLUMNS, INPUT_TAIL, OUTPUT_COLUMNS, run_job
from waferflow.sweep.progress import Progress
from waferflow.sweep.spec import Job, Sweep
from waferflow.sweep.store import CSV, PARQUET, Journal, csv_text, parquet_bytes

RAY_INSTALL = "pip install 'waferflow[distributed]'"
WATCH_SECONDS = 1.0  # how often a local worker checks that the sweep still runs
Done = Callable[[Job, dict[str, Any]], None]


@dataclass
class SweepResult:
    """What a run of a sweep left in its folder."""

    sweep: Sweep
    columns: list[str]
    rows: list[dict[str, Any]]  # every finished job of the sweep, in job order
    ran: int = 0  # jobs computed in this run
    skipped: int = 0  # jobs whose rows were already there
    failed: int = 0  # rows (of this run or before) with status failed
    outputs: list[Path] = field(default_factory=list)

    @property
    def unfinished(self) -> int:
        return len(self.sweep.jobs) - len(self.rows)


def version() -> str:
    import waferflow

    return waferflow.__version__


def columns(sweep: Sweep) -> list[str]:
    return [*INPUT_COLUMNS, *sweep.override_paths, *INPUT_TAIL, *OUTPUT_COLUMNS]


def run_sweep(
    sweep: Sweep,
    *,
    jobs: int = 1,
    ray: bool = False,
    ray_address: str | None = None,
    retry_failed: bool = False,
    plots: bool = True,
    quiet: bool = False,
    stream: TextIO | None = None,
) -> SweepResult:
    """Run every job of ``sweep`` that has no row in its folder yet (module docstring)."""
    if jobs < 1:
        raise WaferflowError(f"--jobs {jobs}: give at least 1 worker")
    ver = version()
    keys = {job.index: job.key(ver) for job in sweep.jobs}
    journal = Journal(sweep.output)
    pending = [
        j for j in sweep.jobs
        if keys[j.index] not in journal.rows
        or (retry_failed and journal.rows[keys[j.index]].get("status") != "ok")
    ]  # fmt: skip
    skipped = len(sweep.jobs) - len(pending)
    prog = Progress(len(pending), stream=stream, enabled=not quiet)
    where = "Ray" if ray or ray_address else f"{jobs} local worker process(es)"
    before = f", {skipped} already done in {sweep.output}" if skipped else ""
    prog.say(f"sweep {sweep.name}: {len(sweep.jobs)} jobs{before}; {len(pending)} to run "
             f"on {where}")  # fmt: skip
    ran = 0

    def done(job: Job, row: dict[str, Any]) -> None:
        nonlocal ran
        row["index"] = job.index
        journal.append(keys[job.index], row)
        ran += 1
        prog.finished(job.label(), row)

    try:
        if pending and (ray or ray_address):
            _run_ray(pending, keys, ver, jobs, ray_address, done)
        elif pending:
            _run_local(pending, keys, ver, jobs, done)
    finally:
        prog.close()
        result = _write_outputs(sweep, journal, keys, plots=plots)
        result.ran, result.skipped = ran, skipped
    return result


def _write_outputs(sweep: Sweep, journal: Journal, keys: dict[int, str], *, plots: bool) -> SweepResult:  # fmt: skip
    cols = columns(sweep)
    rows = []
    for job in sweep.jobs:
        row = journal.rows.get(keys[job.index])
        if row is not None:
            rows.append({**row, "index": job.index})
    out = [write_text(sweep.output / CSV, csv_text(cols, rows))]
    data = parquet_bytes(cols, rows)
    if data is not None:
        out.append(write_bytes(sweep.output / PARQUET, data))
    if plots and rows:
        from waferflow.sweep.plots import plot_sweep

        out += plot_sweep(sweep, rows)
    failed = sum(1 for r in rows if r.get("status") != "ok")
    return SweepResult(sweep, cols, rows, failed=failed, outputs=out)


# --- local worker processes ------------------------------------------------------------


def _crashed(job: Job, key: str, ver: str, why: str) -> dict[str, Any]:
    from waferflow.sweep.job import input_columns

    row = input_columns(job, key)
    row.update(dict.fromkeys(OUTPUT_COLUMNS))
    row.update(status="failed", error=why, version=ver)
    return row


# Imported once by the fork server, before it forks each worker: a worker (and a pool
# made again after a worker died) starts without importing torch again.
PRELOAD = ["waferflow.sweep.job", "waferflow.api", "waferflow.frontend"]


def _context() -> multiprocessing.context.BaseContext:
    """Workers fork from a clean server process (never from this one, which may hold
    threads: Ray's, tqdm's); spawned where there is no fork server (Windows)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _watch_driver(pid: int, stop: Any) -> None:
    """In each worker: exit when the sweep's process is gone (killed with SIGKILL, it
    cannot tell its workers) or has been interrupted (``stop`` set), rather than run
    the jobs already queued to it or linger holding a model's memory."""

    def watch() -> None:
        while not stop.wait(WATCH_SECONDS):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:  # alive, someone else's: cannot happen for our parent
                pass
        os._exit(1)

    threading.Thread(target=watch, name="waferflow-sweep-watch", daemon=True).start()


def _run_local(pending: list[Job], keys: dict[int, str], ver: str, jobs: int, done: Done) -> None:
    ctx = _context()
    stop = ctx.Event()  # set when interrupted: every worker exits at once
    queue: list[Job] = list(pending)
    suspects: list[Job] = []  # held by a worker that died: rerun one at a time, alone
    while queue or suspects:
        if queue:
            batch, queue, alone = queue, [], False
        else:
            batch, alone = [suspects.pop(0)], True
        pool = ProcessPoolExecutor(max_workers=1 if alone else min(jobs, len(batch)),
                                   mp_context=ctx, initializer=_watch_driver,
                                   initargs=(os.getpid(), stop))  # fmt: skip
        try:
            futures: dict[Future[dict[str, Any]], Job] = {
                pool.submit(run_job, j, keys[j.index], ver): j for j in batch
            }
            while futures:
                finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                for f in sorted(finished, key=lambda f: futures[f].index):
                    job = futures.pop(f)
                    try:
                        row = f.result()
                    except BrokenProcessPool:
                        if alone:
                            done(job, _crashed(job, keys[job.index], ver,
                                               "the worker process died running this job "
                                               "(killed, or out of memory?)"))  # fmt: skip
                        else:
                            suspects.append(job)
                        continue
                    done(job, row)
        except BaseException:  # interrupted: stop the workers, running jobs and all
            stop.set()  # else a worker would run the job queued to it, and exit would wait
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        suspects.sort(key=lambda j: j.index)


# --- Ray -------------------------------------------------------------------------------


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise WaferflowError(
            f"--ray needs Ray, which is not installed: {RAY_INSTALL} "
            "(or run without --ray: local worker processes, --jobs N)"
        ) from None
    return ray


def _run_ray(pending: list[Job], keys: dict[int, str], ver: str, jobs: int,
             address: str | None, done: Done) -> None:  # fmt: skip
    ray = import_ray()
    address = address or os.environ.get("RAY_ADDRESS") or None  # as ray.init would
    started = False
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                # Ray runs its workers at niceness 15 by default: on a busy machine they
                # would get a fraction of the CPU that local worker processes get
                ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False,
                         _system_config={"worker_niceness": 0})  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise WaferflowError(f"could not start or reach {where}: {e}") from None
        started = True
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_job)
        refs = {task.remote(j, keys[j.index], ver): j for j in pending}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    row = ray.get(ref)
                except ray.exceptions.RayError as e:  # the worker died or could not start
                    first = str(e).strip().splitlines()
                    row = _crashed(job, keys[job.index], ver,
                                   f"Ray task failed: {first[0] if first else type(e).__name__}")  # fmt: skip
                done(job, row)
    finally:
        if started:
            ray.shutdown()


__all__ = ["RAY_INSTALL", "SweepResult", "columns", "import_ray", "run_sweep"]

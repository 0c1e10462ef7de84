"""Running sweeps in local worker processes: a failing job (or a job whose worker
dies) is recorded in its row and the sweep goes on; a rerun computes only the jobs
without a row; the command writes the CSV and the plots and prints the table."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from waferflow.cli import main
from waferflow.sweep import load_sweep, run_sweep
from waferflow.sweep.store import CSV, JOURNAL

KILLER = """
import multiprocessing
import os

import torch


def factory(batch=1, seq=1):
    if multiprocessing.current_process().name != "MainProcess":
        os._exit(3)  # dies in a sweep worker (the sweep file's check runs it in the main process)
    return torch.nn.Linear(8, 8), (torch.randn(2, 8),)
"""


def test_failures_are_recorded_and_the_sweep_goes_on(write_sweep, tmp_path: Path) -> None:
    (tmp_path / "killer.py").write_text(KILLER)
    path = write_sweep(
        """
[[points]]
model = "killer.py:factory"
[[points]]
plan = "dp=1,tp=3"
[[points]]
plan = "none"
"""
    )
    sweep = load_sweep(path)
    result = run_sweep(sweep, jobs=1, plots=False, quiet=True)
    rows = {r["index"]: r for r in result.rows}
    assert result.ran == 3 and result.failed == 2 and len(rows) == 3
    assert rows[0]["status"] == "failed" and "worker process died" in rows[0]["error"]
    assert rows[1]["status"] == "failed" and "tp=3" in rows[1]["error"]
    assert rows[2]["status"] == "ok" and rows[2]["step_time_s"] > 0  # not blamed for the crash
    assert rows[2]["error"] is None and rows[0]["step_time_s"] is None
    # failed rows count as finished; --retry-failed runs them again
    assert run_sweep(sweep, jobs=1, plots=False, quiet=True).ran == 0
    again = run_sweep(load_sweep(path), jobs=1, plots=False, quiet=True, retry_failed=True)
    assert again.ran == 2 and again.skipped == 1


SLEEPER = """
import multiprocessing
import time

import torch


def factory(batch=1, seq=1):
    if multiprocessing.current_process().name != "MainProcess":
        time.sleep(3600)  # a job that runs long in a sweep worker
    return torch.nn.Linear(8, 8), (torch.randn(2, 8),)
"""


def test_interrupted_sweep_keeps_its_rows_and_stops_its_workers(
    write_sweep, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the first row: the row is kept, the tables are written, and the
    worker exits at once instead of running the hour-long job already queued to it."""
    psutil = pytest.importorskip("psutil")
    from waferflow.sweep.progress import Progress

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    path = write_sweep('[[points]]\nplan = "none"\n[[points]]\nmodel = "sleeper.py:factory"')
    finished = Progress.finished

    def ctrl_c(self: Progress, label: str, row: dict) -> None:
        finished(self, label, row)
        raise KeyboardInterrupt

    monkeypatch.setattr(Progress, "finished", ctrl_c)
    me = psutil.Process()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(load_sweep(path), jobs=1, plots=False, quiet=True)
    rows = _rows(path.parent / "s.sweep" / CSV)
    assert [(r["index"], r["status"]) for r in rows] == [("0", "ok")]
    # the workers are the fork server's children; the wait is only a guard against a hang
    workers = [p for p in me.children(recursive=True) if p.ppid() != me.pid]
    _, alive = psutil.wait_procs(workers, timeout=300)
    assert alive == []


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_rerun_computes_only_unfinished_jobs(write_sweep, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    path = write_sweep('[grid]\nplan = ["none", "dp=1,tp=2"]')
    first = run_sweep(load_sweep(path), jobs=1, plots=False, quiet=True)
    assert (first.ran, first.skipped, first.failed) == (2, 0, 0)
    out = path.parent / "s.sweep"
    table = (out / CSV).read_bytes()
    # killed while the second row was being written: half a line in the journal
    lines = (out / JOURNAL).read_bytes().splitlines(keepends=True)
    (out / JOURNAL).write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])
    second = run_sweep(load_sweep(path), jobs=1, plots=False, quiet=True)
    assert (second.ran, second.skipped) == (1, 1)
    assert _strip(_rows(out / CSV)) == _strip(_rows_of(table))
    # a third plan: only its job runs; through the command, with the table and plots
    path.write_text(path.read_text().replace('"dp=1,tp=2"]', '"dp=1,tp=2", "dp=1,tp=4"]'))
    code = main(["sweep", str(path), "-q"])
    stdout = capsys.readouterr().out
    assert code == 0
    assert "sweep s: 3 jobs; 3 ok, 0 failed, 0 not run (1 run now, 2 done before)" in stdout
    rows = _rows(out / CSV)
    assert [r["plan"] for r in rows] == ["none", "dp=1,tp=2", "dp=1,tp=4"]
    assert [r["chosen_plan"] for r in rows][1:] == [
        "dp=1,tp=2,pp=1,microbatches=1,span=2", "dp=1,tp=4,pp=1,microbatches=1,span=1"
    ]  # fmt: skip
    plot = out / "plots" / "step_time_vs_plan.png"
    assert f"wrote {plot}" in stdout and plot.read_bytes()[:4] == b"\x89PNG"


def _rows_of(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(data.decode().splitlines()))


def _strip(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    from waferflow.sweep.job import TIMING_COLUMNS

    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def test_dry_run_lists_jobs_and_runs_nothing(write_sweep, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    path = write_sweep('[grid]\noverride.link.bandwidth = ["50 GB/s", "100 GB/s"]')
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "sweep s: 2 jobs" in out and "link.bandwidth=100 GB/s" in out
    assert not (path.parent / "s.sweep").exists()


def test_bad_sweep_file_is_one_message(write_sweep, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_sweep("[grid]\nbatch = [0]")
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("waferflow: error: ") and "grid.batch[0] = 0" in err
    assert "Traceback" not in err


def test_ray_missing_says_how_to_install(write_sweep, monkeypatch, capsys) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["sweep", str(write_sweep("")), "--ray"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'waferflow[distributed]'" in err

"""Progress on stderr: one line per finished job when not a terminal (done, failed,
left, ETA), a tqdm bar on a terminal with a line for each failure."""

from __future__ import annotations

import io

from waferflow.sweep.progress import Progress, describe_row

OK = {"index": 0, "status": "ok", "step_time_s": 2.5e-6, "chosen_plan": "dp=2",
      "auto_vs_uniform": None}  # fmt: skip
BAD = {"index": 1, "status": "failed", "error": "plan tp=3: no\nsecond line"}


def test_plain_lines_one_per_job_with_counts_and_eta() -> None:
    out = io.StringIO()
    p = Progress(3, stream=out, tty=False)
    p.finished("job a", OK)
    p.finished("job b", BAD)
    p.close()
    first, second = out.getvalue().splitlines()
    assert first.startswith("sweep: job 0 (job a): step 0.0025 ms, plan dp=2 | 1 done, 0 failed")
    assert "2 left, ETA " in first
    assert second.startswith("sweep: job 1 (job b): FAILED: plan tp=3: no | 1 done, 1 failed")
    assert "1 left, ETA" in second


def test_a_bar_on_a_terminal_and_a_line_per_failure() -> None:
    out = io.StringIO()
    p = Progress(2, stream=out, tty=True)
    p.finished("job a", OK)
    p.finished("job b", BAD)
    p.close()
    text = out.getvalue()
    assert "2/2" in text and "failed=1" in text
    assert "job 1 (job b): FAILED: plan tp=3: no\n" in text


def test_quiet_prints_nothing_and_ratio_is_described() -> None:
    out = io.StringIO()
    p = Progress(1, stream=out, enabled=False, tty=True)
    p.say("hello")
    p.finished("job a", OK)
    assert out.getvalue() == ""
    assert describe_row({**OK, "auto_vs_uniform": 0.95}).endswith("0.950x the best uniform plan")

"""Progress: lines when not a terminal (start, events, heartbeat, end), nothing
without a reporter or with mode off, and the same results with or without it."""

from __future__ import annotations

import io

from waferflow import progress
from waferflow.progress import phase, reporting


def test_lines_for_each_event() -> None:
    out = io.StringIO()
    with reporting("auto", stream=out, interval=3600):  # a StringIO is not a terminal
        with phase("search", total=4, unit="plans") as p:
            p.status("building dp=2")
            p.advance(1)  # throttled: no line within the interval
            p.advance(1, status="building dp=4")
        with phase("sim"):
            pass
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("waferflow: t=") and "phase=search start done=0/4 plans" in lines[0]
    assert "| building dp=2" in lines[1]
    assert "phase=search end done=2/4 plans took=" in lines[2]
    assert [x.split("phase=")[1].split()[:2] for x in lines[3:]] == [
        ["sim", "start"],
        ["sim", "end"],
    ]


def test_heartbeat_prints_the_innermost_phase_after_the_interval() -> None:
    out = io.StringIO()
    with (
        reporting("lines", stream=out, interval=0.0),
        phase("placement", total=5) as outer,
        phase("cp-sat") as inner,
    ):
        inner.status("floorplan, 50% of the budget")
        reporter = progress._current
        assert reporter is not None and outer is not inner
        reporter.beat()
    beats = [x for x in out.getvalue().splitlines() if " running" in x]
    assert beats and "phase=cp-sat running" in beats[-1] and "50% of the budget" in beats[-1]


def test_silent_without_a_reporter_or_when_off() -> None:
    with phase("x", total=2) as p:
        p.advance(1, status="y")  # nothing open: nothing to show, nothing fails
    out = io.StringIO()
    with reporting("off", stream=out), phase("x") as p:
        p.advance(1)
    assert out.getvalue() == ""


def test_estimate_of_what_is_left() -> None:
    p = progress.Phase("x", total=4)
    assert p.left() is None  # nothing done yet: no rate
    p.done, p.started = 1, p.started - 10.0
    left = p.left()
    assert left is not None and 29.0 <= left <= 31.0  # 10 s per unit, 3 units left


def test_simulation_is_the_same_with_progress_shown() -> None:
    from waferflow.backend_sim import simulate
    from waferflow.ir.dtypes import DType, TensorType
    from waferflow.ir.graph import Cost, Graph
    from waferflow.ir.opkind import OpKind
    from waferflow.ir.target import get_wafer
    from waferflow.passes.lower_plan import lower_to_plan

    g = Graph("mm")
    t = TensorType((64, 64), DType.F32)
    x = g.add_op(OpKind.INPUT, (), [t], names=["x"]).result
    w = g.add_op(OpKind.PARAM, (), [t], names=["w"]).result
    y = g.add_op(OpKind.MATMUL, [x, w], [t], cost=Cost(2 * 64**3, 32768, 16384), names=["y"])
    g.set_outputs([y.result])
    wafer = get_wafer("mesh4x4")
    plan = lower_to_plan(g, wafer, name="mm")
    quiet = simulate(plan, wafer)
    out = io.StringIO()
    with reporting("lines", stream=out, interval=0.0):
        shown = simulate(plan, wafer)
    assert shown.step_time == quiet.step_time and shown.summary() == quiet.summary()
    assert "phase=simulate start" in out.getvalue()


def test_bars_show_on_a_terminal_that_reports_no_size() -> None:
    """stderr on a pseudo-terminal opened without a size (0 x 0, as under a test
    harness or some CI shells): tqdm would draw empty bars and hide every bar below
    row 0, so nothing showed."""
    import os
    import pty
    import select
    import subprocess
    import sys

    code = (
        "from waferflow.progress import phase, reporting\n"
        "with reporting('auto'), phase('placement', 2, 'steps') as p:\n"
        "    p.advance(1)\n"
    )
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=slave)
    os.close(slave)
    seen = b""
    try:
        while True:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the process ended and closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
    finally:
        proc.wait()
        os.close(master)
    assert proc.returncode == 0
    assert b"placement:" in seen and b"/2 [" in seen

"""Without numba the simulator still runs: ``engine="auto"`` takes the pure-Python
loop (the same result as with numba), ``engine="compiled"`` says numba is missing.
Runs wherever the suite runs, numba installed or not."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from waferflow.backend_sim import SimConfig, simulate

from ._helpers import NS, ring_allreduce_plan, wafer

# numba made unimportable before waferflow loads it, as on a machine without it
SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["numba"] = None
    from waferflow.backend_sim import SimConfig, engine_jit, simulate
    from waferflow.errors import ConfigError
    from tests.backend_sim._helpers import NS, ring_allreduce_plan, wafer
    assert not engine_jit.AVAILABLE
    w = wafer(2, 4, lat=3 * NS)
    plan = ring_allreduce_plan([0, 1, 2, 3, 7, 6, 5, 4], 64_000)
    res = simulate(plan, w, SimConfig(packet_bytes=512))
    print(res.step_time_ps, res.events)
    try:
        simulate(plan, w, SimConfig(packet_bytes=512, engine="compiled"))
    except ConfigError as err:
        print(err)
    """
)


def test_without_numba_auto_runs_python_and_compiled_says_why() -> None:
    w = wafer(2, 4, lat=3 * NS)
    plan = ring_allreduce_plan([0, 1, 2, 3, 7, 6, 5, 4], 64_000)
    ref = simulate(plan, w, SimConfig(packet_bytes=512, engine="python"))
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.splitlines()
    assert out[0] == f"{ref.step_time_ps} {ref.events}"
    assert "numba is not installed" in out[1]

"""Design-space sweeps: ``waferflow sweep sweep.toml`` (docs/sweeps.md).

    from waferflow.sweep import load_sweep, run_sweep
    result = run_sweep(load_sweep("examples/sweep_d2d.toml"), jobs=2)   # or ray=True
    result.rows        # one dict per job, as in results.csv

``spec`` reads and checks sweep files, ``job`` runs one job in a worker through the
public API (``waferflow.compile``, ``CompiledPlan.simulate``), ``runner`` runs them in
local processes or on Ray and resumes, ``store`` keeps the rows (journal, CSV,
Parquet), ``plots`` draws the summary. Nothing here is imported by ``waferflow``
itself; Ray, matplotlib and pyarrow are imported only when a sweep runs.
"""

from waferflow.sweep.runner import RAY_INSTALL, SweepResult, import_ray, run_sweep
from waferflow.sweep.spec import Job, Sweep, load_sweep

__all__ = ["RAY_INSTALL", "Job", "Sweep", "SweepResult", "import_ray", "load_sweep", "run_sweep"]

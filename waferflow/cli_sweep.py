"""``waferflow sweep SWEEP.toml``: run a design-space sweep (docs/sweeps.md).

    waferflow sweep examples/sweep_d2d.toml               # local worker processes
    waferflow sweep examples/sweep_d2d.toml --jobs 2
    waferflow sweep examples/sweep_d2d.toml --ray         # a local Ray instance
    waferflow sweep sweep.toml --ray-address ray://head:10001   # an existing cluster
    waferflow sweep sweep.toml --dry-run                  # check the file, list the jobs

Nothing heavy is imported until the command runs (Ray, matplotlib, pyarrow only then).
"""

from __future__ import annotations

import argparse
from typing import Any

MAX_TABLE_ROWS = 60


def add_sweep_command(sub: Any) -> None:
    p = sub.add_parser(
        "sweep", help="run a design-space sweep (models x wafers x plans) from a TOML file",
        description="Run every job of a sweep file (models x wafers x plans x modes x batch "
        "sizes; a product or listed points): in local worker processes by default, or as "
        "Ray tasks. Rows go to OUT/results.csv (and .parquet with pyarrow), plots to "
        "OUT/plots. A rerun skips the jobs already done. See docs/sweeps.md.",
    )  # fmt: skip
    p.add_argument("sweep", metavar="SWEEP.toml", help="the sweep file")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="results folder (default: the file's `output`, else NAME.sweep)")  # fmt: skip
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                   help="worker processes (local) or CPUs of the local Ray instance (default 1)")  # fmt: skip
    p.add_argument("--ray", action="store_true",
                   help="run the jobs as Ray tasks on a local Ray instance started for the sweep "
                   "(needs `pip install 'waferflow[distributed]'`)")  # fmt: skip
    p.add_argument("--ray-address", metavar="ADDR",
                   help="run on an existing Ray cluster (e.g. ray://head:10001, or auto)")  # fmt: skip
    p.add_argument("--retry-failed", action="store_true",
                   help="run the jobs whose rows recorded an error again")  # fmt: skip
    p.add_argument("--no-plots", action="store_true", help="write the tables only")
    p.add_argument("--dry-run", action="store_true",
                   help="check the file and list the jobs; run nothing")  # fmt: skip
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from waferflow.fileio import check_input
    from waferflow.sweep import import_ray, load_sweep, run_sweep

    check_input(args.sweep, "sweep file")

    if args.ray or args.ray_address:
        import_ray()  # says how to install it, before anything is read or run
    sweep = load_sweep(args.sweep, output=args.output)
    from waferflow.fileio import check_output

    # before any job runs: a file there, or a folder that cannot be written, would
    # otherwise fail only when the first row is kept
    check_output(sweep.output, "-o" if args.output is not None else "output", folder=True)
    if args.dry_run:
        print(f"sweep {sweep.name}: {len(sweep.jobs)} jobs, results in {sweep.output}")
        for job in sweep.jobs:
            print(f"  {job.index:>4}  {job.label()}")
        return 0
    result = run_sweep(sweep, jobs=args.jobs, ray=args.ray, ray_address=args.ray_address,
                       retry_failed=args.retry_failed, plots=not args.no_plots,
                       quiet=args.quiet)  # fmt: skip
    print(summary_table(result))
    return 0


def summary_table(result: Any) -> str:
    """The sweep's rows as aligned text (the varied inputs, the plan, the step), then
    plan auto against the best uniform plan, then the files written."""
    from waferflow.sweep.progress import describe_row

    sweep = result.sweep
    lines = [
        f"sweep {sweep.name}: {len(sweep.jobs)} jobs; {len(result.rows) - result.failed} ok, "
        f"{result.failed} failed, {result.unfinished} not run ({result.ran} run now, "
        f"{result.skipped} done before)"
    ]
    shown = result.rows[:MAX_TABLE_ROWS]
    varied = list(sweep.varied)
    head = ["job", *varied, "result"]
    body = [[str(r["index"]), *(_short(r.get(v)) for v in varied), describe_row(r)] for r in shown]
    lines += _align([head, *body])
    if len(result.rows) > len(shown):
        lines.append(f"({len(result.rows) - len(shown)} more rows in the CSV)")
    auto = [r for r in result.rows if r.get("auto_vs_uniform") is not None]
    if auto:
        lines.append("plan auto vs the best uniform plan (simulated step times):")
        head = ["job", *varied, "auto plan", "ms", "best uniform plan", "ms", "ratio"]
        body = [[str(r["index"]), *(_short(r.get(v)) for v in varied), str(r["chosen_plan"]),
                 f"{r['step_time_s'] * 1e3:.4g}", str(r["uniform_best_plan"]),
                 f"{r['uniform_best_step_s'] * 1e3:.4g}", f"{r['auto_vs_uniform']:.3f}x"]
                for r in auto]  # fmt: skip
        lines += _align([head, *body])
    lines += [f"wrote {p}" for p in result.outputs]
    return "\n".join(lines)


def _short(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]  # fmt: skip


__all__ = ["add_sweep_command", "cmd_sweep", "summary_table"]

"""The AMCoDA backend's commands: ``waferflow emit`` and ``waferflow check-amcoda``.

    waferflow emit "layers=ddt,ways=4" --target amcoda -o exp/ddt4 [--mem-ports N] [--seed S]
    waferflow emit exp/ddt4/predicted.json --target amcoda -o exp/ddt4-again
    waferflow check-amcoda exp/ddt4

``add_amcoda_commands(subparsers)`` adds both to the ``waferflow`` parser; ``main``
runs them on their own (``python -m waferflow.cli_amcoda ...``). ``compile_seed_plan``
is the entry point for ``waferflow compile ... --wafer amcoda --plan ... --emit amcoda``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from waferflow.backend_amcoda.checker import check_experiment, format_issues
from waferflow.backend_amcoda.layers import Cnn, seed_cnn_layers
from waferflow.backend_amcoda.program import MAX_ACTORS
from waferflow.backend_amcoda.report import (
    SeedCompileResult,
    cnn_from_json,
    compile_seed_plan,
    load_plan_file,
    run_total_time,
)
from waferflow.errors import ConfigError, WaferflowError
from waferflow.fileio import loads_json, read_text

__all__ = [
    "SeedCompileResult",
    "add_amcoda_commands",
    "compile_seed_plan",
    "load_cnn",
    "main",
]

EXIT_USER_ERROR = 2
SEED_MODEL = "cnn:amcoda"


def load_cnn(model: str, batch: int | None = None) -> Cnn:
    """The CNN to compile: ``cnn:amcoda`` is the seed CNN (built by hand, equal to the
    traced zoo model); a ``.json`` file holds a CNN (``cnn_to_json``) or a plan file
    with one; anything else is traced through the frontend (imports torch)."""
    if batch is not None and (batch < 1 or isinstance(batch, bool)):
        raise ConfigError(f"--batch must be a positive integer, got {batch}")
    if model == SEED_MODEL:
        return seed_cnn_layers(batch or 32)
    if model.endswith(".json"):
        doc: Any = loads_json(read_text(model, "model file"), model)
        if isinstance(doc, dict) and "model" in doc:
            doc = doc["model"]
        cnn = cnn_from_json(doc, model)
        return cnn if batch is None else Cnn(batch, cnn.layers)
    from waferflow.backend_amcoda.layers import cnn_layers_from_graph
    from waferflow.frontend import load_model, trace

    b = load_model(model, batch=batch)
    graph = trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn, name=b.name)
    return cnn_layers_from_graph(graph)


def _is_plan_file(text: str) -> bool:
    return text.endswith(".json") or Path(text).is_file()


def _compile_from_args(args: argparse.Namespace) -> SeedCompileResult:
    if _is_plan_file(args.plan):
        if args.batch is not None or args.model != SEED_MODEL:
            raise ConfigError(
                f"{args.plan} fixes the model and batch; drop --model/--batch or give a plan string"
            )
        pf = load_plan_file(args.plan)
        ports = args.mem_ports if args.mem_ports is not None else (pf.mem_ports or 4)
        return compile_seed_plan(
            pf.cnn, pf.plan, mem_ports=ports, hazard_guard=args.hazard_guard or pf.hazard_guard
        )
    cnn = load_cnn(args.model, args.batch)
    ports = args.mem_ports if args.mem_ports is not None else 4
    return compile_seed_plan(cnn, args.plan, mem_ports=ports, hazard_guard=args.hazard_guard)


def cmd_emit(args: argparse.Namespace) -> int:
    from waferflow.fileio import check_output

    if args.target != "amcoda":  # argparse restricts it; kept for callers building Namespaces
        raise ConfigError(f"--target {args.target!r}: the only emit target is amcoda")
    check_output(args.output, "-o", folder=True)  # a file there is refused, not replaced
    result = _compile_from_args(args)
    print(result.summary())
    root = result.emit(args.output, seed=args.seed)
    exp = result.experiment
    settings = loads_json(read_text(root / "settings.json", "settings file"), "settings.json")
    print(
        f"wrote {root}: {exp.n_actors} host scripts and their input files; basic.h: "
        f"test_actor_num {settings['test_actor_num']}, test_time {settings['test_time']} ns, "
        f'SU_write_num = SU_read_num = {exp.mem_ports}, file_name "{root.name}"'
    )
    if not args.no_check:
        issues = check_experiment(root)
        print(f"check-amcoda: {format_issues(issues).splitlines()[-1]}")
        if any(i.is_error for i in issues):
            print(format_issues(issues), file=sys.stderr)
            return EXIT_USER_ERROR
    return 0


def cmd_check_amcoda(args: argparse.Namespace) -> int:
    if not args.exp_dir:  # Path("") is the current folder
        raise ConfigError("check-amcoda: the experiment folder's path is empty: give it")
    root = Path(args.exp_dir)
    if not root.is_dir():
        raise ConfigError(f"{root}: no such experiment folder")
    issues = check_experiment(root, simulate=not args.static, data_files=not args.no_data)
    bad = [i for i in issues if i.is_error or args.strict]
    if issues:
        print(format_issues(issues))
    total = run_total_time(root)
    if total is not None:
        print(f"report/report_1.txt: Total_time {total} ns")
    if not bad:
        print(f"{root}: clean")
        return 0
    return EXIT_USER_ERROR


def _mem_ports(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= n <= MAX_ACTORS:
        raise argparse.ArgumentTypeError(f"MemWidth must be 1..{MAX_ACTORS}, got {n}")
    return n


def add_amcoda_commands(subparsers: Any) -> None:
    """Add ``emit`` and ``check-amcoda`` to a ``parser.add_subparsers()`` object."""
    from waferflow.cli_args import seed_type

    p = subparsers.add_parser(
        "emit",
        help="write a plan as a target's programs (amcoda: an experiment folder)",
        description="Compile a seed plan for the AMCoDA machine and write the experiment "
        "folder its authors' SystemC simulator runs: script/host_<i>.txt, the input files, "
        "empty result/ and report/, settings.json (basic.h settings) and predicted.json.",
    )
    p.add_argument(
        "plan",
        metavar="PLAN",
        help="a seed plan ('pipe', 'gpipe=2', 'layers=ddt,ways=4') or a plan JSON file "
        "(SeedCompileResult.save_plan, or an emitted folder's predicted.json)",
    )
    p.add_argument("--target", choices=["amcoda"], default="amcoda", help="(default: amcoda)")
    p.add_argument("-o", "--output", required=True, metavar="EXP_DIR", help="folder to write")
    p.add_argument(
        "--model",
        default=SEED_MODEL,
        help="the CNN: cnn:amcoda (default), a zoo name or file.py:factory (traced), or a "
        "CNN .json",
    )
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the model's)")
    p.add_argument("--mem-ports", type=_mem_ports, default=None, metavar="N",
                   help="MemWidth: concurrent streams per actor each way (default 4)")  # fmt: skip
    p.add_argument("--seed", type=seed_type, default=0,
                   help="seed of the input values (default 0)")  # fmt: skip
    p.add_argument("--hazard-guard", action="store_true",
                   help="turn mid-program STORE/LOADs into 1-operand ADDs (§6.3 b)")  # fmt: skip
    p.add_argument("--no-check", action="store_true", help="do not check the written folder")
    p.set_defaults(func=cmd_emit)

    p = subparsers.add_parser(
        "check-amcoda",
        help="check an AMCoDA experiment folder without running it",
        description="Check an AMCoDA experiment folder against the program format and the "
        "machine's rules without running the authors' simulator. Exit 0 when no error is "
        "found, 2 otherwise; each issue names the actor's script, the line and the rule.",
    )
    p.add_argument("exp_dir", metavar="EXP_DIR")
    p.add_argument("--static", action="store_true",
                   help="static rules only; do not run waferflow's cycle model")  # fmt: skip
    p.add_argument("--no-data", action="store_true",
                   help="count the input files' numbers without parsing them")  # fmt: skip
    p.add_argument("--strict", action="store_true", help="fail on warnings too")
    p.set_defaults(func=cmd_check_amcoda)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="waferflow", description=__doc__.split("\n\n")[0])
    add_amcoda_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except WaferflowError as err:
        print(f"waferflow: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as err:
        from waferflow.fileio import os_error_text

        print(f"waferflow: error: {os_error_text(err)}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())

"""The ``waferflow`` command: trace, optimise, compile, simulate, inspect wafers.

Each subcommand lives in a small function; heavy imports (torch) happen inside them so
that ``--help`` is instant. User errors (``WaferflowError``) print one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from waferflow.cli_args import positive_int, seconds, seed_type
from waferflow.errors import WaferflowError

EXIT_USER_ERROR = 2


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        metavar="MODEL",
        help="a zoo name (hf:gpt2, hf:llama-7b, cnn:amcoda, ...; see `waferflow models`) "
        "or path/to/file.py:factory",
    )
    p.add_argument("--mode", choices=["infer", "train"], default="infer",
                   help="trace inference only, or the whole training step (default: infer)")  # fmt: skip
    p.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd",
                   help="optimizer whose update is traced in train mode (default: sgd)")  # fmt: skip
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the model's)")
    p.add_argument("--seq", type=int, default=None, help="sequence length for language models")
    p.add_argument("--dtype", choices=["f32", "bf16", "f16"], default=None,
                   help="cast the model's parameters and floating inputs (default: as built, f32)")  # fmt: skip
    p.add_argument("--moe-skew", type=float, default=1.0, metavar="S",
                   help="mixture-of-experts load assumption: the busiest expert gets S times "
                   "the mean share of tokens; every expert is sized for it (default 1: uniform)")  # fmt: skip


def _check_model(args: argparse.Namespace) -> None:
    """The model name and the options every model command shares (trace, compile,
    place), before torch is imported: a typo, or an option the trace would ignore
    (--optimizer without --mode train, --moe-skew on a model without experts), fails
    in a second."""
    from waferflow.frontend.options import check_trace_options

    check_trace_options(args.model, mode=args.mode, optimizer=args.optimizer,
                        moe_skew=args.moe_skew)  # fmt: skip


def _trace_model(args: argparse.Namespace):  # -> Graph
    _check_model(args)
    from waferflow.frontend import trace_model

    return trace_model(args.model, mode=args.mode, optimizer=args.optimizer, batch=args.batch,
                       seq=args.seq, dtype=args.dtype, moe_skew=args.moe_skew)  # fmt: skip


def _read_graph(path: str):  # -> Graph
    """IR text or JSON from a file (by its extension) or, for ``-``, from stdin (JSON
    when it starts with ``{``); bytes go through the one reader (``waferflow.fileio``).
    Input that is not IR (a plan, a trace, an empty or binary file, a folder) is one
    error saying what it looks like (``waferflow.filekind``)."""
    from waferflow.fileio import decode_text, read_stream
    from waferflow.filekind import IR, read_expected, refine
    from waferflow.ir.parser import parse_graph
    from waferflow.ir.serialize import loads_graph

    if path == "-":
        raw = getattr(sys.stdin, "buffer", None)  # bytes, unless stdin is already text
        data = read_stream(raw, "<stdin>", "IR") if raw is not None else None
        text = decode_text(data, "<stdin>") if data is not None else sys.stdin.read()
        source, as_json = "<stdin>", text.lstrip().startswith("{")
    else:
        text = read_expected(path, "IR file", "write one with `waferflow trace`", IR)
        source, as_json = path, Path(path).suffix == ".json"
    try:
        return loads_graph(text, source=source) if as_json else parse_graph(text, source=source)
    except WaferflowError as err:
        raise refine(err, text, source, IR) from None


_PICTURE = (".png", ".svg")
_HTML = (".html", ".htm")


def _check_outputs(*outputs: tuple[str | None, str, tuple[str, ...]]) -> None:
    """(path, option, suffixes) of every output a command will write, checked before
    any work (``fileio.check_output``); unset options are skipped, and an empty one is
    refused (it would be skipped too, silently). Two outputs of one run may not share
    a path: the second would replace the first."""
    from waferflow.fileio import check_output

    seen: dict[Path, str] = {}
    for path, option, suffixes in outputs:
        if path is None or path == "-":
            continue
        check_output(path, option, suffixes=suffixes)
        where = Path(path).absolute()
        if where in seen:
            raise WaferflowError(
                f"{seen[where]} and {option} both write {path}: the second would replace the "
                "first; give each its own file"
            )
        seen[where] = option


def _write_text(path: str, text: str) -> None:
    from waferflow.fileio import write_text

    write_text(path, text)


def _refuse_unused(args: argparse.Namespace, option: str, needed: str, dest: str) -> None:
    """``option``, given, modifies ``needed`` (argument ``dest``); without it, it would
    be ignored, so it is refused, not dropped (as --optimizer is in inference)."""
    if getattr(args, dest) is None:
        raise WaferflowError(
            f"{option} applies only with {needed}, which is not given, so it would be "
            f"ignored: add {needed}, or drop {option}"
        )


# -- subcommands ---------------------------------------------------------------------------


def cmd_trace(args: argparse.Namespace) -> int:
    from waferflow.ir.printer import print_graph
    from waferflow.ir.serialize import dumps_graph
    from waferflow.ir.summary import summarize

    _check_outputs((args.output, "-o", ()))
    graph = _trace_model(args)
    if args.output is not None and args.output != "-":  # '-': stdout, as for opt
        text = dumps_graph(graph) if args.output.endswith(".json") else print_graph(graph)
        _write_text(args.output, text)
        print(summarize(graph))
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(print_graph(graph))
    return 0


def cmd_opt(args: argparse.Namespace) -> int:
    """Like mlir-opt: the final IR to stdout (or -o, in the format its extension names),
    dumps, diagnostics and timing to stderr; the input and output verified."""
    from waferflow.ir.printer import print_graph
    from waferflow.ir.serialize import dumps_graph
    from waferflow.passes import PassContext, PassManager, parse_pipeline

    passes = parse_pipeline(args.pipeline)  # a bad pipeline fails before any input is read
    _check_outputs((args.output, "-o", ()))
    wafer = None
    if args.wafer is not None:  # an empty name is refused by the wafer lookup
        from waferflow.api import resolve_wafer

        wafer = resolve_wafer(args.wafer, args.coarsen)
    elif args.coarsen != 1:
        raise WaferflowError("--coarsen needs --wafer (the wafer to coarsen)")
    needy = [p.name for p in passes if p.needs_wafer]
    if needy and wafer is None:
        raise WaferflowError(
            f"pass(es) {', '.join(dict.fromkeys(needy))} need a target wafer: give --wafer "
            "<preset or TOML> (see `waferflow wafers`)"
        )
    pm = PassManager(
        passes,
        verify=not args.no_verify,
        verify_each=args.verify_each and not args.no_verify,
        print_ir_after_all=args.print_ir_after_all,
        print_ir_after=frozenset(args.print_ir_after or ()),
        print_ir_before_all=args.print_ir_before_all,
        print_ir_before=frozenset(args.print_ir_before or ()),
        print_ir_after_change=args.print_ir_after_change,
        print_ir_after_failure=args.print_ir_after_failure,
        time_passes=args.time_passes,
        out=sys.stderr,
    )
    graph = _read_graph(args.input)
    ctx = PassContext(wafer=wafer, seed=args.seed)
    try:
        result = pm.run(graph, ctx)
    finally:
        for diagnostic in ctx.diagnostics:
            print(diagnostic, file=sys.stderr)
    if args.output == "-":
        sys.stdout.write(print_graph(result))
        return 0
    text = dumps_graph(result) + "\n" if args.output.endswith(".json") else print_graph(result)
    _write_text(args.output, text)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_passes(args: argparse.Namespace) -> int:
    from waferflow.passes import describe_passes

    print(describe_passes())
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from waferflow.frontend import list_models

    for spec, description in list_models():
        print(f"{spec:<20} {description}")
    return 0


def cmd_wafers(args: argparse.Namespace) -> int:
    from waferflow.ir.target import get_wafer, list_presets

    if args.action == "show":
        if not args.name:
            raise WaferflowError("`waferflow wafers show` needs a preset name or a TOML path")
        print(get_wafer(args.name).describe())
        return 0
    if args.name is not None:  # `wafers list NAME`: the name would be ignored
        raise WaferflowError(
            f"`waferflow wafers list` takes no name, got {args.name!r}: use "
            f"`waferflow wafers show {args.name}` to see one wafer"
        )
    rows = [get_wafer(name).summary_row() for name in list_presets()]
    header = ("name", "grid", "cores", "topology", "peak", "SRAM", "link BW")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _check_link_tracks(args: argparse.Namespace) -> None:
    if args.link_tracks:
        _refuse_unused(args, "--link-tracks", "--trace", "trace")


def cmd_simulate(args: argparse.Namespace) -> int:
    from waferflow.api import load_plan

    _check_link_tracks(args)
    _check_outputs((args.trace, "--trace", ()), (args.html, "--html", _HTML))

    compiled = load_plan(args.plan, wafer=args.wafer)
    report = compiled.simulate()
    print(report)
    for path in _write_report_outputs(args, report):
        print(f"wrote {path}")
    return 0


_TRACE_HINT = " (open in ui.perfetto.dev or chrome://tracing)"


def _write_report_outputs(args: argparse.Namespace, report, where=Path) -> list[str]:  # fmt: skip
    """The outputs ``compile`` and ``simulate`` share: --trace (with --link-tracks) and
    --html; ``where(path)`` is the path to write each to (``compile`` stages them)."""
    written = []
    if args.trace is not None:
        path = report.to_chrome_trace(where(args.trace), link_tracks=args.link_tracks)
        written.append(f"{path}{_TRACE_HINT}")
    if args.html is not None:
        written.append(str(report.to_html(where(args.html))))
    return written


def _add_report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", metavar="TRACE.json",
                   help="write a Perfetto / Chrome trace: actors, waits, message flows, "
                   "memory and link-load counters")  # fmt: skip
    p.add_argument("--link-tracks", action="store_true",
                   help="trace: also one track per used link, with each message on it")  # fmt: skip
    p.add_argument("--html", metavar="REPORT.html",
                   help="write an offline HTML report: summary, tables and pictures")  # fmt: skip


def cmd_viz(args: argparse.Namespace) -> int:
    from waferflow.api import load_plan

    _check_outputs((args.output, "-o", _PICTURE))

    compiled = load_plan(args.plan, wafer=args.wafer)
    if args.kind == "placement":
        out = compiled.plot_placement(args.output)
    else:
        report = compiled.simulate()
        plot = {
            "links": report.plot_links,
            "timeline": report.plot_timeline,
            "memory": report.plot_memory,
        }[args.kind]
        out = plot(args.output)
    print(f"wrote {out}")
    return 0


def _with_streams(wafer, ports: int | None):  # (Wafer, int) -> Wafer
    """The wafer with ``ports`` stream slots per core (the seed machine's MemWidth)."""
    import dataclasses

    if ports is None:
        return wafer
    if ports < 1:
        raise WaferflowError(f"--mem-ports must be at least 1, got {ports}")
    if wafer.flow is None:
        raise WaferflowError(
            f"--mem-ports sets the stream slots of a wafer with flow control; {wafer.name} "
            "has none ([flow] in its TOML)"
        )
    return dataclasses.replace(wafer, flow=dataclasses.replace(wafer.flow, max_streams=ports))


def _is_seed_like(wafer) -> bool:  # (Wafer) -> bool
    """A wafer the seed's program format can run on: a crossbar with req/ack."""
    from waferflow.ir.target import Topology

    flow = wafer.flow
    return wafer.topology is Topology.CROSSBAR and flow is not None and flow.handshake


def _emit_seed(args: argparse.Namespace, compiled, folder=None) -> str:  # fmt: skip
    """``--emit amcoda``: the seed machine's experiment folder for the compiled plan
    (written to ``folder`` when given, else to --emit-dir)."""
    from waferflow.backend_amcoda.from_plan import seed_programs

    if compiled.parallel is None or compiled.graph is None:
        raise WaferflowError(
            "--emit amcoda writes the seed's programs for a parallel plan: give --plan "
            "(pipe, gpipe=M or layers=<d|t...>,ways=R)"
        )
    flow = compiled.wafer.flow
    ports = flow.max_streams if flow is not None and flow.max_streams else 4
    result = seed_programs(
        compiled.graph, compiled.parallel.spec, mem_ports=ports, hazard_guard=args.hazard_guard
    )
    print(result.summary())
    if folder is None:
        return str(result.emit(args.emit_dir, seed=args.seed))
    return str(result.emit(folder, seed=args.seed, name=Path(args.emit_dir).name))


def _add_place_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--place", choices=["auto", "cpsat", "none"], default="auto",
                   help="placement: CP-SAT (auto: for parallel plans) or the default layout")  # fmt: skip
    p.add_argument("--place-time", type=seconds, default=10.0, metavar="SECONDS",
                   help="CP-SAT deterministic seconds for the whole placement, all its "
                        "solvers together (default 10)")  # fmt: skip


def cmd_place(args: argparse.Namespace) -> int:
    from pathlib import Path as _Path

    from waferflow.api import resolve_wafer, uniform_stages
    from waferflow.ir.target.islands import connected_view
    from waferflow.parallel.search import resolve_plan
    from waferflow.passes.place import place_compare, place_state
    from waferflow.passes.place_result import PlaceOptions

    _check_model(args)
    _check_outputs((args.export_model, "--export-model", ()))
    wafer, notes = connected_view(resolve_wafer(args.wafer, args.coarsen))
    from waferflow.api import check_inputs

    check_inputs(args.model, wafer, plan=args.plan, mode=args.mode, optimizer=args.optimizer,
                 dtype=args.dtype, moe_skew=args.moe_skew)  # fmt: skip
    for note in notes:
        print(note)
    options = PlaceOptions(
        time_limit=args.place_time,
        seed=args.seed,
        export_model=_Path(args.export_model) if args.export_model else None,
    )
    graph = _trace_model(args)
    plan, search = resolve_plan(graph, wafer, args.plan)
    if plan and not uniform_stages(graph, plan):
        raise WaferflowError(
            f"plan {plan!r} has stages with different numbers of ranks (a per-layer plan), "
            "which the CP-SAT floorplan does not place yet; `waferflow compile --place none` "
            "runs it on the default layout"
        )
    if search is not None:
        print(search.table())
        print(search.summary())
    if search is not None and search.state is not None:  # placed as the search built it
        print(place_state(*search.state, options))
    else:
        print(place_compare(graph, wafer, plan, options))
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from waferflow.api import compile as wf_compile
    from waferflow.api import resolve_wafer
    from waferflow.ir.summary import summarize

    _check_model(args)
    _check_link_tracks(args)
    if args.hazard_guard:
        _refuse_unused(args, "--hazard-guard", "--emit amcoda", "emit")
    if args.emit_dir is not None:
        _refuse_unused(args, "--emit-dir", "--emit amcoda", "emit")
    _check_outputs(
        (args.output, "-o", ()), (args.trace, "--trace", ()), (args.html, "--html", _HTML),
        (args.png, "--png", _PICTURE), (args.report, "--report", ()),
    )  # fmt: skip
    if args.emit_dir is not None:
        from waferflow.fileio import check_output

        check_output(args.emit_dir, "--emit-dir", folder=True)
    if args.print_ir_after:  # checked before tracing, in the option's own spelling
        from waferflow.passes import DEFAULT_PIPELINE, check_pass_names, parse_pipeline

        pipeline = parse_pipeline(args.passes or DEFAULT_PIPELINE)
        check_pass_names(args.print_ir_after, pipeline, "--print-ir-after")
    wafer = _with_streams(resolve_wafer(args.wafer, args.coarsen), args.mem_ports)
    if args.emit and not args.emit_dir:
        raise WaferflowError(f"--emit {args.emit} needs --emit-dir DIR (the experiment folder)")
    if args.emit and args.mode != "train":
        raise WaferflowError("--emit amcoda writes training programs: add --mode train")
    if args.emit and not _is_seed_like(wafer):
        raise WaferflowError(
            f"--emit amcoda writes programs for the seed machine, a crossbar with req/ack "
            f"flow control; {wafer.name} is not one (use --wafer amcoda, or a TOML with "
            'preset = "amcoda")'
        )

    compiled = wf_compile(
        args.model,
        wafer=wafer,
        mode=args.mode,
        optimizer=args.optimizer,
        plan=args.plan,
        passes=args.passes,
        batch=args.batch,
        seq=args.seq,
        dtype=args.dtype,
        moe_skew=args.moe_skew,
        print_ir_after=tuple(args.print_ir_after or ()),
        place=args.place,
        place_time=args.place_time,
        seed=args.seed,
    )
    detail = not args.quiet  # -q: the report only
    if compiled.graph is not None and detail:
        print(summarize(compiled.graph))
    for note in compiled.notes if detail else ():
        print(note)
    if compiled.search is not None and detail:
        print(compiled.search.table())
        print(compiled.search.summary())
    if compiled.placement is not None and detail:
        print(compiled.placement)
    report = compiled.simulate()
    print(report)
    if compiled.parallel is not None and detail:
        from waferflow.parallel import format_report

        print(format_report(compiled.parallel, compiled.wafer, report.result), end="")
    from waferflow.fileio import Staged, write_text

    with Staged() as staged:  # nothing is written unless every output is
        if args.output:
            compiled.save(staged.path(args.output))
        _write_report_outputs(args, report, staged.path)
        if args.png:
            compiled.plot_placement(staged.path(args.png))
        if args.emit == "amcoda":
            _emit_seed(args, compiled, staged.folder(args.emit_dir))
        if args.report:
            text = f"# {compiled.name} on {compiled.wafer.name}\n\n```\n{report}\n```\n"
            write_text(staged.path(args.report), text)
        for path in staged.commit():
            if detail:
                print(
                    f"wrote {path}{_TRACE_HINT if args.trace and path == Path(args.trace) else ''}"
                )
    return 0


# -- parser ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="waferflow",
        description="Compile PyTorch models onto wafer-scale dataflow chips and score the result.",
        epilog="Run `waferflow COMMAND --help` for the options of one command. Exit status: "
        "0 done, 2 input refused with one message (docs/errors.md), 130 interrupted (Ctrl-C); "
        "outputs are written only when the run succeeds (a sweep keeps each finished row "
        "at once, and writes its tables also when interrupted: docs/sweeps.md).",
    )
    from waferflow import __version__

    parser.add_argument("--version", action="version", version=f"waferflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("trace", help="trace a model into waferflow IR",
                       description="Trace a model (on meta tensors) into waferflow IR text.")  # fmt: skip
    _add_model_args(p)
    p.add_argument("-o", "--output", help="write the IR here (.wf text, or .json); default: stdout")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("opt", help="run a pass pipeline over an IR file (like mlir-opt)",
                       description="Run a pass pipeline over IR (text or JSON), like mlir-opt: "
                       "the final IR goes to stdout (or -o), IR dumps, diagnostics and timing "
                       "to stderr; the input and output are verified.")  # fmt: skip
    p.add_argument("input", metavar="FILE", nargs="?", default="-",
                   help="IR text (.wf) or JSON (.json); '-' or nothing: stdin")  # fmt: skip
    p.add_argument("-p", "--pipeline", required=True,
                   help="comma-separated passes with options, e.g. "
                   "'canonicalize,dce,fuse-elementwise{max=8}' (see `waferflow passes`)")  # fmt: skip
    p.add_argument("--wafer", help="target wafer, a preset or TOML (the parallel passes, "
                   "place and route need one; see `waferflow passes`)")  # fmt: skip
    p.add_argument("--coarsen", type=positive_int, default=1, metavar="K",
                   help="work on the wafer's K x K coarse view (default 1)")  # fmt: skip
    p.add_argument("--seed", type=seed_type, default=0,
                   help="seed for passes that make random choices (default 0)")  # fmt: skip
    p.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="write the final IR here: .json as JSON, else text ('-', the "
                   "default: stdout)")  # fmt: skip
    p.add_argument("--print-ir-before-all", action="store_true",
                   help="print the IR before every pass (to stderr)")  # fmt: skip
    p.add_argument("--print-ir-before", action="append", metavar="PASS",
                   help="print the IR before this pass (repeatable)")  # fmt: skip
    p.add_argument("--print-ir-after-all", action="store_true",
                   help="print the IR after every pass (to stderr)")  # fmt: skip
    p.add_argument("--print-ir-after", action="append", metavar="PASS",
                   help="print the IR after this pass (repeatable)")  # fmt: skip
    p.add_argument("--print-ir-after-change", action="store_true",
                   help="with the --print-ir-after options: only when the pass changed it")  # fmt: skip
    p.add_argument("--print-ir-after-failure", action="store_true",
                   help="print the IR a failing pass left (or the verifier rejected)")  # fmt: skip
    p.add_argument("--time-passes", action="store_true",
                   help="print a timing table of the passes (to stderr)")  # fmt: skip
    p.add_argument("--verify-each", action="store_true",
                   help="also run the verifier after every pass")  # fmt: skip
    p.add_argument("--no-verify", action="store_true",
                   help="do not verify the input and the output")  # fmt: skip
    p.set_defaults(func=cmd_opt)

    p = sub.add_parser("passes", help="list the registered passes and their options")
    p.set_defaults(func=cmd_passes)

    p = sub.add_parser("models", help="list the model zoo")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("wafers", help="list the wafer presets, or show one in full",
                       description="List the wafer presets; `wafers show NAME|FILE.toml` prints "
                       "one in full (and validates a TOML file).")  # fmt: skip
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?", help="preset name or TOML path (for `show`)")
    p.set_defaults(func=cmd_wafers)

    p = sub.add_parser("simulate", help="simulate a saved plan and print the summary")
    p.add_argument("plan", metavar="PLAN.json")
    p.add_argument("--wafer", help="wafer preset or TOML (default: the one named in the plan)")
    _add_report_args(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("compile", help="trace, optimise, place, simulate: the whole path",
                       description="Trace a model, run the pass pipeline, place it on a wafer, "
                       "simulate one step and print the report.")  # fmt: skip
    _add_model_args(p)
    p.add_argument("--wafer", required=True, help="preset name (see `waferflow wafers`) or TOML")
    p.add_argument("--coarsen", type=positive_int, default=1, metavar="K",
                   help="plan on the coarse view: K x K cores as one node (default 1)")  # fmt: skip
    p.add_argument("--passes", help="override the pass pipeline")
    p.add_argument("--print-ir-after", action="append", metavar="PASS",
                   help="print the IR after this pass (repeatable)")  # fmt: skip
    p.add_argument(
        "--plan",
        help="parallel plan, e.g. 'dp=2,tp=4,pp=2,microbatches=4', or 'auto' "
        "(searched: a closed-form screen, then the best few built and estimated)",
    )
    p.add_argument("-o", "--output", metavar="PLAN.json", help="save the plan (with its wafer)")
    _add_report_args(p)
    p.add_argument("--png", metavar="PLACEMENT.png", help="draw the placement map (.png or .svg)")
    p.add_argument("--report", metavar="REPORT.md", help="write the report as Markdown")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print the report only: no progress, IR summary, tables or notes")  # fmt: skip
    p.add_argument("--emit", choices=["amcoda"],
                   help="also write the plan as the seed machine's programs (to --emit-dir)")  # fmt: skip
    p.add_argument("--emit-dir", metavar="EXP_DIR",
                   help="the experiment folder --emit amcoda writes")  # fmt: skip
    p.add_argument("--mem-ports", type=int, default=None, metavar="N",
                   help="stream slots per core, each way (the seed's MemWidth; default: the "
                   "wafer's flow.max_streams)")  # fmt: skip
    p.add_argument("--hazard-guard", action="store_true",
                   help="--emit amcoda: turn mid-program STORE/LOADs into 1-operand ADDs")  # fmt: skip
    p.add_argument("--seed", type=seed_type, default=0,
                   help="seed of the placement search and of generated data files")  # fmt: skip
    _add_place_args(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("place", help="place a model on a wafer and compare CP-SAT with baselines",
                       description="Place a model's plan with CP-SAT and print it beside "
                       "the baselines (strips, snake, work strips / row-major, greedy) and "
                       "the solver's bound.")  # fmt: skip
    _add_model_args(p)
    p.add_argument("--wafer", required=True, help="preset name or TOML")
    p.add_argument("--coarsen", type=positive_int, default=1, metavar="K",
                   help="place on the K x K coarse view (default 1)")  # fmt: skip
    p.add_argument(
        "--plan",
        help="parallel plan or 'auto' (searched); without it the one-actor-per-op plan is placed",
    )
    p.add_argument("--compare", action="store_true",
                   help="print every candidate (the default output; kept for clarity)")  # fmt: skip
    p.add_argument("--seed", type=seed_type, default=0, help="seed of the placement search")
    p.add_argument("--export-model", metavar="FILE",
                   help="write the CP-SAT model for reproduction")  # fmt: skip
    p.add_argument("--place-time", type=seconds, default=10.0, metavar="SECONDS",
                   help="CP-SAT deterministic seconds for the whole placement (default 10)")  # fmt: skip
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_place)

    p = sub.add_parser("viz", help="draw a saved plan: placement, links, timeline or memory",
                       description="Draw a picture of a saved plan (links, timeline and "
                       "memory simulate it first).")  # fmt: skip
    p.add_argument("plan", metavar="PLAN.json")
    p.add_argument("--kind", choices=["placement", "links", "timeline", "memory"],
                   default="placement", help="which picture (default: placement)")  # fmt: skip
    p.add_argument("--wafer", help="wafer preset or TOML (default: the one saved with the plan)")
    p.add_argument("-o", "--output", required=True, help="output file, .png or .svg")
    p.set_defaults(func=cmd_viz)
    from waferflow.cli_amcoda import add_amcoda_commands
    from waferflow.cli_sweep import add_sweep_command

    add_amcoda_commands(sub)
    add_sweep_command(sub)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an option the command does not know is reported with that
    command's usage (argparse alone would print the top-level one)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = getattr(args, "command", None)
        sub = _subparsers(parser).get(command) if command else None
        (sub or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    from waferflow.interrupt import EXIT_INTERRUPTED, install

    install()  # first: Ctrl-C from here on ends the run cleanly, imports included
    try:
        parser = build_parser()
        args = _parse(parser, argv)
        if args.command is None:  # bare `waferflow`: the help, as `--help` prints it
            parser.print_help()
            return 0
        from waferflow.progress import reporting

        with reporting("off" if getattr(args, "quiet", False) else "auto"):
            return int(args.func(args))
    except BrokenPipeError:  # `waferflow wafers | head`: the reader has what it wanted
        _quiet_stdout()
        return 0
    except WaferflowError as err:
        print(f"waferflow: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as err:  # unreadable input or unwritable output path
        from waferflow.fileio import os_error_text

        print(f"waferflow: error: {os_error_text(err)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("waferflow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the flush at exit does not fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())

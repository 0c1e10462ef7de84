"""The Python API: ``compile`` an ``nn.Module`` onto a wafer, ``simulate`` it, look at it.

    import waferflow as wf
    plan = wf.compile(model, example_inputs, wafer="mesh16x16", mode="train")
    report = plan.simulate()
    print(report)
    plan.save("model.plan.json"); wf.load_plan("model.plan.json")
    report.to_chrome_trace("trace.json"); report.to_html("report.html")
    plan.plot_placement("placement.png"); report.plot_links("links.png")

torch is imported only when a model is traced.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from waferflow.api_args import (
    check_compile_args,
    check_count,
    check_images,
    check_module_args,
    output,
    pass_names,
    plan_text,
)
from waferflow.backend_sim import SimResult, estimate, simulate
from waferflow.errors import ConfigError, FormatError, PlanError, WaferflowError
from waferflow.fileio import (
    loads_json,
    short,
    want,
    want_int,
    want_object,
    write_parts,
)
from waferflow.filekind import PLAN, Family, not_expected, read_expected, refine, sniff_doc
from waferflow.frontend.catalog import canonical_model, param_count
from waferflow.frontend.options import check_loss_fn, check_name
from waferflow.ir.graph import Graph
from waferflow.ir.parser import parse_graph
from waferflow.ir.plan import Plan, plan_from_doc, plan_json_parts, verify_plan
from waferflow.ir.summary import human_bytes
from waferflow.ir.target import Topology, Wafer, get_wafer, list_presets
from waferflow.ir.target.catalog import split_view
from waferflow.ir.target.islands import connected_view
from waferflow.ir.target.toml_io import parse_wafer_toml, wafer_to_toml
from waferflow.passes import (
    DEFAULT_PIPELINE,
    PassContext,
    PassManager,
    check_pass_names,
    parse_pipeline,
)
from waferflow.passes.lower_plan import lower_to_plan
from waferflow.perf import gc_paused

BUNDLE_FORMAT = "waferflow.compiled"
BUNDLE_VERSION = 1
_DUMP_HEADER = re.compile(r"^// -----// IR Dump After (\S+) .*//----- //$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class StepTiming:
    """Wall time of one compile step (trace, passes, lower, place, simulate, ...)."""

    step: str
    seconds: float


@dataclass(eq=False)
class Report:
    """The simulated step: a ``SimResult`` plus the plan and wafer it came from."""

    result: SimResult
    plan: Plan
    wafer: Wafer
    timings: tuple[StepTiming, ...] = ()
    # the plan's own liveness peak per core (parallel/memory.py, what compile checks),
    # when it fits: the simulator allocates some buffers at other times
    planned_peak: int | None = None
    # core -> the rank it runs (waferflow.parallel.ranks), when the plan is a parallel one
    ranks: Mapping[int, Any] | None = None
    placement: Any = None  # PlacedResult: the placement comparison, when CP-SAT placed it
    memory: Any = None  # MemoryReport: the plan's per-core memory, for a parallel plan

    @property
    def step_time(self) -> float:
        """Seconds per step."""
        return self.result.step_time

    @property
    def fits(self) -> bool:
        """Whether every core's simulated peak memory stays within its SRAM."""
        w = self.wafer
        return all(
            c.peak_mem_bytes <= w.core_sram_bytes(w.coord(c.core)) for c in self.result.cores
        )

    def summary(self) -> str:
        text = self.result.summary()
        if not self.fits and self.planned_peak is not None:
            text += (
                "\nnote: the simulated peak memory exceeds a core's SRAM, but the plan's "
                f"liveness, which compile checks, peaks at {human_bytes(self.planned_peak)} "
                "per core, which fits; the two allocate buffers at different times "
                "(docs/simulator.md, Memory)"
            )
        elif not self.fits:
            text += (
                "\nWARNING: the simulated peak memory exceeds a core's SRAM; this step "
                "time assumes memory the wafer does not have"
            )
        if self.timings:
            steps = ", ".join(f"{t.step} {t.seconds:.2f} s" for t in self.timings)
            text += f"\ncompile steps: {steps}"
        return text

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (
            f"<Report {self.plan.name!r} on {self.wafer.name!r}: step "
            f"{self.result.step_time * 1e3:.4g} ms, {len(self.plan.actors)} actors>"
        )

    def to_chrome_trace(
        self, path: str | Path, link_tracks: bool = False, *, options: Any = None
    ) -> Path:
        """Write a Chrome / Perfetto trace (open it in ui.perfetto.dev): tracks named by
        stage, rank and coordinate; actors, waits, message flows, memory and link-load
        counters (``backend_sim.trace``; ``options``: a ``TraceOptions``)."""
        from waferflow.backend_sim.trace import TraceOptions

        if options is not None and not isinstance(options, TraceOptions):
            raise WaferflowError(
                f"to_chrome_trace: options={short(options)}: give a "
                "waferflow.backend_sim.trace.TraceOptions, or None"
            )
        output(path, "to_chrome_trace")
        with gc_paused():  # 10^6 events as small objects: no cycles to collect
            return self.result.to_chrome_trace(
                path, link_tracks=link_tracks, options=options, ranks=self.ranks
            )

    def plot_links(self, path: str | Path, top_k: int = 5) -> Path:
        from waferflow.viz import link_view, plot_links

        check_count(top_k, "plot_links: top_k", 0)
        output(path, "plot_links")
        return plot_links(link_view(self.result, self.wafer), path, top_k=top_k)

    def plot_timeline(self, path: str | Path, max_tracks: int = 64) -> Path:
        from waferflow.viz import plot_timeline, timeline_view

        check_count(max_tracks, "plot_timeline: max_tracks", 1)
        output(path, "plot_timeline")
        with gc_paused():  # a span per actor and message
            view = timeline_view(self.plan, self.result, self.ranks)
            return plot_timeline(view, path, max_tracks=max_tracks)

    def plot_memory(self, path: str | Path) -> Path:
        from waferflow.viz import memory_view, plot_memory

        output(path, "plot_memory")
        return plot_memory(memory_view(self.result, self.wafer), path)

    def plot_placement(self, path: str | Path) -> Path:
        from waferflow.viz import placement_view, plot_placement

        output(path, "plot_placement")
        view = placement_view(self.plan, self.wafer, ranks=self.ranks)
        return plot_placement(view, path)

    def tables(self) -> list[Any]:
        """The fullest cores' memory and the placement comparison, as ``viz.Table``s
        (those that apply; the narrow one first, so that it sits beside the summary)."""
        from waferflow.viz.report_tables import memory_table, placement_table

        out = []
        if self.memory is not None:
            out.append(memory_table(self.memory))
        if self.placement is not None:
            out.append(placement_table(self.placement))
        return out

    def to_html(self, path: str | Path, images: Mapping[str, str | Path] | None = None) -> Path:
        """Write one offline HTML page: the summary, the placement comparison and the
        memory table beside it, and the placement, link, timeline and memory pictures in
        a grid. ``images`` (caption -> file) reuses pictures already drawn; by default
        they are drawn into a folder beside the page (``<name>_files``)."""
        from waferflow.viz import write_report_html

        out = output(path, "to_html")  # before the pictures are drawn
        pictures = None if images is None else check_images(images)
        if pictures is None:
            folder = out.with_name(out.stem + "_files")
            pictures = {
                "placement": self.plot_placement(folder / "placement.png"),
                "links": self.plot_links(folder / "links.png"),
                "timeline": self.plot_timeline(folder / "timeline.png"),
                "memory": self.plot_memory(folder / "memory.png"),
            }
        title = f"{self.plan.name} on {self.wafer.name}"
        return write_report_html(out, pictures, self.summary(), title=title, tables=self.tables())


@dataclass(eq=False)
class CompiledPlan:
    """A model compiled onto a wafer: the actor program, the wafer, the final IR and
    the IR after each pass (for debugging), and how long each step took."""

    plan: Plan
    wafer: Wafer
    graph: Graph | None = None
    ir_snapshots: tuple[tuple[str, str], ...] = ()
    timings: tuple[StepTiming, ...] = ()
    notes: tuple[str, ...] = field(default=())
    parallel: Any = None  # waferflow.parallel.ParallelResult when a parallel plan was built
    placement: Any = None  # waferflow.passes.place_result.PlacedResult when CP-SAT placed it
    search: Any = None  # waferflow.parallel.search.PlanSearch when the plan was "auto"
    # core -> the rank it runs (waferflow.parallel.ranks.CoreRank), for a parallel plan;
    # saved with the plan, so a loaded plan's pictures and traces still name ranks
    ranks: Mapping[int, Any] | None = None

    @property
    def name(self) -> str:
        return self.plan.name

    def simulate(self) -> Report:
        """Run the discrete-event simulation of one step. When placement simulated the
        kept plan to choose it, that run is reused (it is the same simulation)."""
        start = time.perf_counter()
        result = None
        placed = self.placement
        if placed is not None and placed.plan is self.plan and placed.run is not None:
            result = placed.simulation() if placed.run.wafer is self.wafer else None
        if result is None:
            result = simulate(self.plan, self.wafer)
        took = StepTiming("simulate", time.perf_counter() - start)
        par = self.parallel
        peak = par.memory.peak_bytes if par is not None and par.memory.fits else None
        return Report(
            result,
            self.plan,
            self.wafer,
            (*self.timings, took),
            peak,
            ranks=self.ranks,
            placement=self.placement,
            memory=par.memory if par is not None else None,
        )

    def estimate(self) -> Any:
        """The analytical estimate (no link contention): fast, for search."""
        return estimate(self.plan, self.wafer)

    def ir_after(self, pass_name: str) -> Graph:
        """The IR as it was right after pass ``pass_name`` (its last run)."""
        for name, text in reversed(self.ir_snapshots):
            if name == pass_name:
                return parse_graph(text, source=f"<IR after {pass_name}>")
        ran = ", ".join(n for n, _ in self.ir_snapshots) or "none were recorded"
        raise WaferflowError(f"no IR recorded after pass {pass_name!r}; passes that ran: {ran}")

    def save(self, path: str | Path) -> Path:
        """Write the plan and its wafer as one JSON file (``load_plan`` reads it back).
        The plan's own JSON text (``plan_to_json``: one actor or message per line) is
        written as it is produced, under ``"plan"``; the same plan gives the same bytes."""
        output(path, "save")
        head = {
            "format": BUNDLE_FORMAT,
            "version": BUNDLE_VERSION,
            "wafer_toml": wafer_to_toml(self.wafer),
            "notes": list(self.notes),
        }
        if self.ranks:
            from waferflow.parallel.ranks import ranks_to_json

            head["ranks"] = ranks_to_json(self.ranks)
        lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]

        def parts() -> Iterator[str]:
            yield "{\n" + "\n".join(lines) + '\n "plan": '
            for part in plan_json_parts(self.plan):  # its last part is "}\n"
                yield "}\n}\n" if part == "}\n" else part

        with gc_paused():  # a row per actor and message
            return write_parts(path, parts())

    def plot_placement(self, path: str | Path) -> Path:
        """The placement map: each core's stage (or layer), and its rank when known."""
        from waferflow.viz import placement_view, plot_placement

        output(path, "plot_placement")
        return plot_placement(placement_view(self.plan, self.wafer, ranks=self.ranks), path)

    def __repr__(self) -> str:
        return (
            f"<CompiledPlan {self.plan.name!r} on {self.wafer.name!r} "
            f"({self.wafer.rows}x{self.wafer.cols}): {len(self.plan.actors):,} actors on "
            f"{self.wafer.units(self.wafer.count_cores(self.plan.cores))}, "
            f"{len(self.plan.messages):,} messages>"
        )


_BUNDLE_KEYS = ("format", "version", "wafer_toml", "plan", "notes", "ranks")


def load_plan(path: str | Path, wafer: str | Path | Wafer | None = None) -> CompiledPlan:
    """Read a plan written by ``CompiledPlan.save`` (or a bare plan JSON, given a wafer).
    A file that is not a plan (IR text, a trace, a folder, a picture, ...) is one
    ``WaferflowError`` saying what it looks like (``waferflow.filekind``)."""
    if not isinstance(path, str | PathLike):
        raise WaferflowError(
            f"load_plan: path={short(path)} is not a file name: give a str or Path"
        )
    text = read_expected(path, "plan file", "write one with `waferflow compile -o`", PLAN)
    return loads_plan(text, str(path), Path(path).parent, wafer)


def loads_plan(
    text: str, source: str, base_dir: Path, wafer: str | Path | Wafer | None = None
) -> CompiledPlan:
    """``load_plan`` on the file's text: a bundle (plan, wafer TOML, notes) or a bare plan."""
    try:
        doc = loads_json(text, source)
    except WaferflowError as err:  # malformed JSON, or not JSON at all
        raise refine(err, text, source, PLAN) from None
    if (kind := sniff_doc(doc)).family is not Family.PLAN:  # a trace, a graph, ...
        raise not_expected(source, kind, PLAN)
    if isinstance(doc, dict) and doc.get("format") == BUNDLE_FORMAT:

        def err(path: str, message: str) -> FormatError:
            return FormatError(path, message, source)

        want_object(doc, "$", _BUNDLE_KEYS, ("format", "version", "wafer_toml", "plan"), error=err)
        version = doc["version"]
        if isinstance(version, bool) or version != BUNDLE_VERSION:
            raise err(
                "$.version", f"version {short(version)}; this waferflow reads {BUNDLE_VERSION}"
            )
        plan = plan_from_doc(doc["plan"], source=source, path="$.plan")
        toml = want(doc["wafer_toml"], "$.wafer_toml", str, "the wafer as TOML text", error=err)
        notes_raw = want(doc.get("notes", []), "$.notes", list, "an array of strings", error=err)
        notes = tuple(want(n, f"$.notes[{i}]", str, "a string", error=err) for i, n in enumerate(notes_raw))  # fmt: skip
        w = get_wafer(wafer) if wafer is not None else parse_wafer_toml(toml, f"{source}#wafer", base_dir)  # fmt: skip
        ranks = _read_ranks(doc.get("ranks"), err)
    else:
        plan = plan_from_doc(doc, source=source)
        w = _bare_plan_wafer(plan, source, wafer)
        notes = ()
        ranks = None
    if wafer is not None and not isinstance(wafer, Wafer):
        _check_view(plan, w, wafer, bundle=isinstance(doc, dict) and "wafer_toml" in doc)
    verify_plan(plan, w)
    return CompiledPlan(plan=plan, wafer=w, notes=notes, ranks=ranks)


def _bare_plan_wafer(plan: Plan, source: str, wafer: str | Path | Wafer | None) -> Wafer:
    """The wafer of a bare plan (no wafer TOML inside): ``wafer``, or the preset its
    ``wafer_name`` names; a name that is no preset (a wafer file's) asks for the file."""
    if wafer is not None:
        return get_wafer(wafer)
    try:
        return get_wafer(plan.wafer_name)
    except ConfigError:
        factor = split_view(plan.wafer_name)[1]
        view = "" if factor is None else f"@{factor}x"
        raise ConfigError(
            f"{source}: this bare plan names its wafer only, {plan.wafer_name!r}, which is "
            f"not a preset: give the wafer file it was made for, --wafer PATH.toml{view} "
            f"(load_plan(..., wafer='PATH.toml{view}')); plans saved by `waferflow compile -o` "
            "or CompiledPlan.save carry their wafer"
        ) from None


def _check_view(plan: Plan, w: Wafer, given: str | Path, *, bundle: bool) -> None:
    """A plan made for one view of a wafer (``NAME@Kx``, what ``--coarsen K`` or a
    plan's span compiles on) and given another: a ``PlanError`` whose hint is the
    user's own spelling of the wafer with the view that works (``w.toml@2x``, where
    the view's name, ``w@2x``, names no preset)."""
    if plan.wafer_name == w.name or "@" not in plan.wafer_name + w.name:
        return
    base, made = split_view(plan.wafer_name)
    factor = 1 if made is None else made
    spelled = split_view(str(given).strip())[0]  # the wafer the user named, without a view
    try:
        named: Wafer | None = get_wafer(spelled)
    except WaferflowError:
        named = None
    if named is not None and named.name.split("@")[0] == base and factor % named.coarsen_factor == 0:  # fmt: skip
        k = factor // named.coarsen_factor  # a file may itself describe a coarse view
        spec = spelled if k == 1 else f"{spelled}@{k}x"
        view = f"--wafer {spec} (load_plan(..., wafer={spec!r}))"
    elif base.lower() in list_presets():
        view = f"--wafer {plan.wafer_name}"
    else:
        view = f"--wafer PATH@{factor}x, PATH being the wafer file of {short(base)}"
    keep = "; or leave the wafer out: the plan file holds its own" if bundle else ""
    raise PlanError(
        f"plan {short(plan.name)} was made for wafer{'' if made is None else ' view'} "
        f"{short(plan.wafer_name)}, not {short(w.name)}; run it on that view: {view}{keep}"
    )


def _read_ranks(raw: Any, err: Callable[[str, str], FormatError]) -> dict[int, Any] | None:
    """A bundle's ``ranks``: core id -> [stage, rank, ranks, dp or null, tp or null]."""
    if raw is None:
        return None
    from waferflow.parallel.ranks import ranks_from_json

    for core, row in want_object(raw, "$.ranks", error=err).items():
        where = f"$.ranks.{core[:20]}"
        if not (core.isascii() and core.isdigit() and len(core) < 19):
            raise err(where, f"{short(core)} is not a core id")
        want(row, where, lambda v: isinstance(v, list) and len(v) == 5, "[stage, rank, ranks, dp, tp]", error=err)  # fmt: skip
        for i, v in enumerate(row):
            if not (i >= 3 and v is None):
                want_int(v, f"{where}[{i}]", error=err)
    return ranks_from_json(raw)


def resolve_wafer(wafer: str | Path | Wafer, coarsen: int = 1) -> Wafer:
    """The wafer (preset, TOML path or ``Wafer``) and its ``coarsen`` x ``coarsen``
    view; ``coarsen`` must be an integer >= 1."""
    w = get_wafer(wafer)
    if isinstance(coarsen, bool) or not isinstance(coarsen, int) or coarsen < 1:
        raise ConfigError(f"coarsen must be an integer >= 1, got {short(coarsen)}")
    return w.coarsen(coarsen)


@contextmanager
def _timed(timings: list[StepTiming], step: str, progress: Callable[[str], None] | None) -> Iterator[None]:  # fmt: skip
    from waferflow.progress import phase

    if progress is not None:
        progress(step)
    start = time.perf_counter()
    with phase(step):  # shown inside waferflow.progress.reporting (the CLI, the demo)
        yield
    timings.append(StepTiming(step, time.perf_counter() - start))


@gc_paused()  # millions of objects and no cycles to find: see waferflow.perf
def compile(
    model: Any,
    example_inputs: Any = None,
    *,
    wafer: str | Path | Wafer,
    mode: str = "infer",
    optimizer: str = "sgd",
    plan: str | None = None,
    passes: str | None = None,
    coarsen: int = 1,
    loss_fn: Callable[..., Any] | None = None,
    batch: int | None = None,
    seq: int | None = None,
    dtype: str | None = None,
    name: str | None = None,
    moe_skew: float = 1.0,
    place: str | None = "auto",
    place_time: float = 10.0,
    seed: int = 0,
    keep_ir: bool = True,
    print_ir_after: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
    uniform_baseline: bool = False,
) -> CompiledPlan:
    """Trace ``model`` and compile it onto ``wafer``.

    ``model`` is an ``nn.Module`` (with ``example_inputs``) or a zoo name such as
    ``"hf:gpt2"`` / ``"cnn:amcoda"`` / ``"path/file.py:factory"`` (then ``batch`` and
    ``seq`` size its inputs; ``dtype`` ``"bf16"`` / ``"f16"`` casts it; ``moe_skew`` is the
    mixture-of-experts load assumption, see ``trace``). ``wafer`` is a preset name, a TOML path or a ``Wafer``;
    ``coarsen=k`` plans on the k x k coarse view. ``passes`` overrides the pipeline.
    ``plan`` is a parallel plan (``"dp=2,tp=4,pp=2,microbatches=4"``) or ``"auto"``
    (searched: ``waferflow.parallel.search``, kept in ``CompiledPlan.search``); ``place`` is
    ``"auto"`` (CP-SAT for parallel plans, the snake otherwise; the default layout on a
    crossbar, where placement changes nothing), ``"cpsat"`` or ``"none"``
    (the default strip layout), with ``place_time`` deterministic CP-SAT seconds and
    ``seed``: the same inputs and seed give the same plan, byte for byte.
    ``uniform_baseline`` (with ``plan="auto"``): also simulate every uniform plan and keep
    the searched plan only if it is at least as fast (``CompiledPlan.search.uniform``).
    """
    timings: list[StepTiming] = []
    plan = plan_text(plan)  # a ParallelPlan is spelt as its string
    check_compile_args(passes=passes, progress=progress, seed=seed, place_time=place_time)
    print_ir_after = pass_names(print_ir_after)
    check_module_args(model, given_inputs=example_inputs is not None, batch=batch, seq=seq,
                      dtype=dtype)  # fmt: skip
    # a wafer cut into islands is refused here, before anything is traced or placed
    w, fault_notes = connected_view(resolve_wafer(wafer, coarsen))
    pipeline = parse_pipeline(passes or DEFAULT_PIPELINE)  # bad pipelines fail before tracing
    # a name the pipeline does not run would print nothing: refuse it with a did-you-mean
    check_pass_names(print_ir_after, pipeline, "print_ir_after")
    check_inputs(model, w, plan=plan, mode=mode, optimizer=optimizer, dtype=dtype,
                 moe_skew=moe_skew)  # fmt: skip
    check_name(name)
    check_loss_fn(loss_fn)
    with _timed(timings, "trace", progress):
        if isinstance(model, str | Path) and example_inputs is None and loss_fn is None:
            from waferflow.frontend import trace_model  # torch only when not cached

            graph = trace_model(str(model), mode=mode, optimizer=optimizer, batch=batch,
                                seq=seq, dtype=dtype, name=name, moe_skew=moe_skew)  # fmt: skip
        elif isinstance(model, str | Path):
            from waferflow.frontend import load_model, trace  # torch: the inputs are sound

            bundle = load_model(str(model), batch=batch, seq=seq, dtype=dtype)
            if param_count(str(model)) is None:  # a file's model: counted once built
                _check_module(bundle.module, w, plan, mode, optimizer, bundle.name)
            graph = trace(
                bundle.module,
                bundle.example_inputs if example_inputs is None else example_inputs,
                mode=mode,
                optimizer=optimizer,
                loss_fn=loss_fn or bundle.loss_fn,
                name=name or bundle.name,
                moe_skew=moe_skew,
            )
        else:
            from waferflow.frontend import trace

            if example_inputs is None:
                raise WaferflowError("compile() needs example_inputs for an nn.Module")
            _check_module(model, w, plan, mode, optimizer, name or type(model).__name__)
            graph = trace(model, example_inputs, mode=mode, optimizer=optimizer,
                          loss_fn=loss_fn, name=name, moe_skew=moe_skew)  # fmt: skip
    buf = io.StringIO()
    with _timed(timings, "passes", progress):
        # the dumps are made for print_ir_after too: with keep_ir=False it printed nothing
        pm = PassManager(pipeline, print_ir_after_all=keep_ir or bool(print_ir_after), out=buf)
        graph = pm.run(graph, PassContext(wafer=w))
    dumps = _split_dumps(buf.getvalue()) if keep_ir or print_ir_after else ()
    for pass_name, text in dumps:
        if pass_name in print_ir_after:
            print(f"// -----// IR Dump After {pass_name} //----- //\n{text}", end="")
    snapshots = dumps if keep_ir else ()
    parallel = None
    placement = None
    search = None
    from waferflow.parallel.search import is_auto, resolve_plan

    if is_auto(plan):
        with _timed(timings, "plan search", progress):
            # PlanError when no candidate fits
            plan, search = resolve_plan(graph, w, plan, uniform=uniform_baseline)
    method = _placement_method(place, plan, w)
    if method not in ("cpsat", "none"):
        raise WaferflowError(f"place={place!r}: use 'auto', 'cpsat' or 'none'")
    extra_notes: list[str] = []
    if plan and method == "cpsat" and not uniform_stages(graph, plan):
        if place == "cpsat":
            raise PlanError(
                f"plan {plan!r} has stages with different numbers of ranks (a per-layer "
                "plan), which the CP-SAT floorplan does not place yet; use place='none' "
                "(the default layout)"
            )
        method = "none"
        extra_notes.append(
            "placement: the default layout (the plan's stages have different numbers of "
            "ranks, which the CP-SAT floorplan does not place yet)"
        )
    if plan and method == "cpsat":
        from waferflow.passes.place import place_parallel, place_state

        with _timed(timings, "parallelize+place", progress):
            opts = _place_options(place_time, seed)
            if search is not None and search.state is not None:  # as the search built it
                placement = place_state(*search.state, opts)
            else:
                placement = place_parallel(graph, w, plan, options=opts)
        parallel = placement.parallel
        actor_plan = placement.plan
        if parallel is not None:
            from waferflow.parallel.memory import check_fits

            check_fits(parallel.memory)  # PlanError naming the fullest cores
    elif plan:
        from waferflow.parallel import build_parallel_plan

        with _timed(timings, "parallelize", progress):
            parallel = build_parallel_plan(graph, w, plan)  # PlanError when it does not fit
        actor_plan = parallel.plan
    else:
        with _timed(timings, "lower", progress):
            actor_plan = lower_to_plan(graph, w, name=graph.name)
            check_resident_memory(actor_plan, w)
        if method == "cpsat" and place is not None and place != "auto":
            from waferflow.passes.place import place_actors

            with _timed(timings, "place", progress):
                placement = place_actors(actor_plan, w, options=_place_options(place_time, seed))
            actor_plan = placement.plan
    if parallel is not None and parallel.wafer is not None:
        w = parallel.wafer  # the view the plan runs on (the plan's span applied)
    ranks = None
    if parallel is not None:
        from waferflow.parallel.ranks import core_ranks

        ranks = core_ranks(parallel)
    return CompiledPlan(
        plan=actor_plan,
        wafer=w,
        graph=graph,
        ir_snapshots=snapshots,
        timings=tuple(timings),
        notes=(
            *fault_notes,
            *(str(d) for d in (parallel.diagnostics if parallel else ())),
            *extra_notes,
        ),
        parallel=parallel,
        placement=placement,
        search=search,
        ranks=ranks,
    )


def check_inputs(
    model: Any,
    wafer: Wafer,
    *,
    plan: str | None,
    mode: str = "infer",
    optimizer: str = "sgd",
    dtype: str | None = None,
    moe_skew: float = 1.0,
) -> None:
    """What ``compile`` checks before it imports torch or traces anything: the model
    name (a did-you-mean for a typo), the plan string, the mode, optimizer and dtype,
    options the trace would ignore (an optimizer in inference, an expert load skew on
    a zoo model without experts: ``frontend.options``), ``$WAFERFLOW_PLACE_JOBS``,
    and, for a zoo model, that the whole wafer's SRAM can hold its weights (and, to
    train, its gradients and optimizer state: ``parallel.capacity``)."""
    from waferflow.frontend.options import (
        check_dtype,
        check_moe_skew,
        check_optimizer,
        check_trace_options,
    )
    from waferflow.parallel.capacity import StateBytes, check_capacity, plan_copies
    from waferflow.workers import jobs_from_env

    for what, value, allowed in (
        ("mode", mode, ("infer", "train")),
        ("optimizer", optimizer, ("sgd", "adamw")),
    ):
        if value not in allowed:
            raise ConfigError(f"{what} {short(value)}: use one of {', '.join(allowed)}")
    check_dtype(dtype)
    if isinstance(model, str | Path):
        check_trace_options(str(model), mode=mode, optimizer=optimizer, moe_skew=moe_skew)
    else:  # a module's experts are counted when it is traced
        check_optimizer(mode, optimizer)
        check_moe_skew(moe_skew, "", None)
    dp, zero = plan_copies(plan)  # parses the plan: a PlanError names a bad key
    jobs_from_env()  # a bad $WAFERFLOW_PLACE_JOBS, before any work
    if not isinstance(model, str | Path):
        return
    params = param_count(str(model))  # a TraceError with a did-you-mean for a typo
    if params is not None:
        need = StateBytes(params, dtype, mode, optimizer, dp, zero)
        check_capacity(need, wafer, model=canonical_model(str(model)))


def _check_module(
    module: Any, wafer: Wafer, plan: str | None, mode: str, optimizer: str, name: str
) -> None:
    """The capacity check for a built module: its parameters as they are (dtype included)."""
    from waferflow.parallel.capacity import StateBytes, check_capacity, plan_copies

    params = list(module.parameters()) if hasattr(module, "parameters") else []
    if not params:
        return
    count = sum(p.numel() for p in params)
    size = max(1, round(sum(p.numel() * p.element_size() for p in params) / count))
    dtype = {4: "f32", 2: "bf16"}.get(size)
    dp, zero = plan_copies(plan)
    if dtype is not None:
        check_capacity(StateBytes(count, dtype, mode, optimizer, dp, zero), wafer, model=name)


def _placement_method(place: str | None, plan: str | None, wafer: Wafer) -> str:
    """``auto``: CP-SAT for parallel plans; the snake for the naive one-actor-per-op
    lowering (placing thousands of actors is opt-in: ``place="cpsat"``); and the
    default layout on a crossbar, where every pair of cores has a link of its own, so
    that no placement is better than another."""
    if place in (None, "auto"):
        return "cpsat" if plan and wafer.topology is not Topology.CROSSBAR else "none"
    return place


def uniform_stages(graph: Graph, plan: str) -> bool:
    """Whether every pipeline stage of ``plan`` has the same number of ranks (what the
    CP-SAT floorplan places); a per-layer plan with one-rank layers has not."""
    from waferflow.parallel import per_layer
    from waferflow.parallel.plan_spec import parse_plan

    return len(set(per_layer.widths_of(graph, per_layer.resolve(graph, parse_plan(plan))))) <= 1


def _place_options(time_limit: float, seed: int) -> Any:
    from waferflow.passes.place_result import PlaceOptions

    return PlaceOptions(time_limit=time_limit, seed=seed, require_fit=True)


def check_resident_memory(plan: Plan, wafer: Wafer, top: int = 3) -> None:
    """Refuse a plan whose resident bytes (weights and other sources kept on a core for
    the whole step) exceed a core's SRAM, naming the fullest cores."""
    resident: dict[int, int] = {}
    for actor in plan.actors:
        resident[actor.core] = resident.get(actor.core, 0) + actor.mem_bytes
    over = sorted(
        ((need, core) for core, need in resident.items()
         if need > wafer.core_sram_bytes(wafer.coord(core))),
        reverse=True,
    )  # fmt: skip
    if not over:
        return
    lines = [
        f"core {wafer.coord(core)}: needs {human_bytes(need)} resident, has "
        f"{human_bytes(wafer.core_sram_bytes(wafer.coord(core)))}"
        for need, core in over[:top]
    ]
    raise PlanError(
        f"plan {plan.name!r} does not fit in SRAM on {len(over)} core(s) of {wafer.name}:\n  "
        + "\n  ".join(lines)
        + "\nshard it with a parallel plan (--plan 'tp=...,pp=...'), or plan on a coarser "
        "view (--coarsen K) or a larger wafer"
    )


def _split_dumps(text: str) -> tuple[tuple[str, str], ...]:
    """Split PassManager's ``--print-ir-after-all`` output into (pass, IR text)."""
    parts = _DUMP_HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    return tuple((parts[i], parts[i + 1].lstrip("\n")) for i in range(1, len(parts) - 1, 2))

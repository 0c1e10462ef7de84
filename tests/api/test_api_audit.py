"""Python API arguments that used to crash deep inside (AttributeError, TypeError from
the internals), were dropped in silence, or damaged a file: each is now one
``WaferflowError`` naming the argument, before any work."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch
from torch import nn

import waferflow as wf
from waferflow.errors import ConfigError, PassError, PlanError, TraceError, WaferflowError


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


X = (torch.randn(4, 16),)


def compile_mlp(**kw) -> wf.CompiledPlan:
    return wf.compile(MLP(), X, wafer="mesh4x4", **kw)


@pytest.fixture(scope="module")
def compiled() -> wf.CompiledPlan:
    return compile_mlp(mode="train")


@pytest.fixture(scope="module")
def report(compiled: wf.CompiledPlan) -> wf.Report:
    return compiled.simulate()


# --- compile --------------------------------------------------------------------------


@pytest.mark.parametrize("plan", [{}, 42, ["dp=2"]])
def test_a_plan_that_is_no_string_is_refused(plan) -> None:
    # AttributeError: 'dict' object has no attribute 'strip' (parallel/capacity.py)
    with pytest.raises(PlanError, match=r"plan=.*give a plan string"):
        compile_mlp(plan=plan)


def test_a_parallel_plan_object_is_taken_as_its_string() -> None:
    # it crashed like a number; parse_plan accepts one, and the type hint suggested it
    from waferflow.parallel.plan_spec import ParallelPlan

    plan = compile_mlp(plan=ParallelPlan(dp=2), place="none")
    assert plan.parallel is not None and "dp=2" in plan.name


@pytest.mark.parametrize("progress", ["x", 1, True])
def test_progress_that_is_not_callable_is_refused(progress) -> None:
    # TypeError: 'str' object is not callable, from the first step
    with pytest.raises(ConfigError, match=r"progress=.* is not callable"):
        compile_mlp(progress=progress)


def test_a_model_class_is_refused_with_the_instance_to_give() -> None:
    # TypeError: Module.parameters() missing 1 required positional argument: 'self'
    with pytest.raises(TraceError, match=r"class Linear, not a module.*Linear\(\.\.\.\)"):
        wf.compile(nn.Linear, X, wafer="mesh4x4")
    with pytest.raises(TraceError, match="class Linear"):
        wf.frontend.trace(nn.Linear, X)


def test_passes_that_are_no_string_are_refused() -> None:
    # TypeError: object of type 'int' has no len() (passes/pipeline.py)
    with pytest.raises(PassError, match=r"passes=5: give a pipeline string"):
        compile_mlp(passes=5)


@pytest.mark.parametrize("names", ["dce", 5, None])
def test_print_ir_after_must_be_a_list_of_names(names) -> None:
    # 'dce' was split into letters ("unknown pass 'c'"); 5 and None were TypeErrors
    with pytest.raises(PassError, match=r"print_ir_after=.*give a list of pass names"):
        compile_mlp(print_ir_after=names)


def test_print_ir_after_prints_also_without_keep_ir(capsys) -> None:
    # keep_ir=False made no dumps, so print_ir_after printed nothing, in silence
    plan = compile_mlp(print_ir_after=["dce"], keep_ir=False)
    assert "IR Dump After dce" in capsys.readouterr().out
    assert plan.ir_snapshots == ()


@pytest.mark.parametrize("seed", [2.5, "1", None, -1, True])
def test_a_seed_is_an_integer_of_at_least_zero(seed) -> None:
    # TypeErrors from CP-SAT's parameters (mapper/cpsat.py), or accepted in silence
    with pytest.raises(ConfigError, match=r"seed=.*integer >= 0"):
        compile_mlp(seed=seed, place="cpsat")


def test_place_time_is_checked_when_nothing_is_placed() -> None:
    # place='none' dropped a NaN time limit in silence (the command line refuses it)
    with pytest.raises(PlanError, match="finite number"):
        compile_mlp(place="none", place_time=float("nan"))


@pytest.mark.parametrize(("option", "value"), [("dtype", "bf16"), ("batch", 8), ("seq", 8)])
def test_zoo_only_options_are_refused_for_a_module(option: str, value) -> None:
    # ignored in silence: the module was traced in f32 on its own 4-row inputs
    with pytest.raises(ConfigError, match=rf"{option}=.*so it would be ignored"):
        compile_mlp(**{option: value})


def test_batch_with_example_inputs_for_a_zoo_model_is_refused() -> None:
    # the bundle was built with batch=8, then its inputs replaced by example_inputs
    ids = (torch.zeros(2, 8, dtype=torch.long),)
    with pytest.raises(ConfigError, match=r"batch=8 .*traced on example_inputs"):
        wf.compile("hf:gpt2-tiny", ids, wafer="mesh16x16", batch=8)


def test_a_name_that_is_no_string_is_refused() -> None:
    # name=5 compiled a plan that saved, and then failed to load ($.plan.name)
    with pytest.raises(ConfigError, match=r"name=5: give the graph's name as a string"):
        compile_mlp(name=5)
    with pytest.raises(ConfigError, match="name=5"):
        wf.frontend.trace(MLP(), X, name=5)


def test_a_loss_that_is_not_callable_is_refused_by_name() -> None:
    # a TraceError blaming the model, with advice about torch.export
    with pytest.raises(TraceError, match=r"loss_fn='mse' is not callable") as err:
        compile_mlp(mode="train", loss_fn="mse")
    assert "torch.export" not in str(err.value)


# --- trace_model ------------------------------------------------------------------------


def test_trace_model_refuses_a_torch_dtype_before_the_cache() -> None:
    # TypeError: Object of type dtype is not JSON serializable (the disk cache key)
    from waferflow.frontend import trace_model

    with pytest.raises(ConfigError, match=r"dtype torch.float16: use one of f32, bf16, f16"):
        trace_model("hf:gpt2-tiny", dtype=torch.float16)


def test_trace_model_refuses_a_float_batch_also_when_cached() -> None:
    # batch=2.0 equals 2, so the cache answered it; uncached it was refused
    from waferflow.frontend import trace_model

    trace_model("hf:gpt2-tiny", batch=2)
    with pytest.raises(ConfigError, match=r"batch must be a positive integer, got 2\.0"):
        trace_model("hf:gpt2-tiny", batch=2.0)


# --- outputs ----------------------------------------------------------------------------


def _writers(compiled: wf.CompiledPlan, report: wf.Report) -> dict:
    return {
        "save": compiled.save,
        "to_html": lambda p: report.to_html(p, images={}),
        "to_chrome_trace": report.to_chrome_trace,
        "plot_links": report.plot_links,
        "plot_timeline": report.plot_timeline,
        "plot_memory": report.plot_memory,
        "plot_placement": compiled.plot_placement,
    }


@pytest.mark.parametrize("path", [5, None])
def test_an_output_that_is_no_path_is_refused(compiled, report, path) -> None:
    # TypeError: expected str, bytes or os.PathLike object, not int (pathlib)
    for what, write in _writers(compiled, report).items():
        with pytest.raises(WaferflowError, match=rf"{what}: path={path} is not a file name"):
            write(path)
    with pytest.raises(WaferflowError, match=rf"load_plan: path={path} is not a file name"):
        wf.load_plan(path)


def test_an_output_where_no_file_can_be_made_names_the_output(compiled, report) -> None:
    # FileNotFoundError naming the temporary: '/proc/.x.json.abc.tmp.json'
    for what, write in _writers(compiled, report).items():
        with pytest.raises(WaferflowError, match=rf"{what}: path '/proc/x.png'") as err:
            write("/proc/x.png")
        assert "cannot be created in /proc" in str(err.value) and ".tmp" not in str(err.value)


def test_an_output_on_a_pipe_is_refused_not_replaced(compiled, tmp_path: Path) -> None:
    # the atomic rename replaced the pipe with a regular file (as root, /dev/null too)
    from waferflow.fileio import check_output, write_text

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(WaferflowError, match="is a device or pipe, not a regular file"):
        compiled.save(fifo)
    with pytest.raises(WaferflowError, match="device or pipe"):
        write_text(fifo, "x")  # every atomic writer
    with pytest.raises(WaferflowError, match=r"^-o .*device or pipe"):
        check_output(fifo, "-o")  # the command line's check, before any work
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("images", [5, "x.png", ["a.png"], {"a": 5}, {"a": None}, {5: "a.png"}])
def test_to_html_images_must_map_captions_to_files(report, tmp_path: Path, images) -> None:
    # AttributeError: 'int' object has no attribute 'items', or a TypeError from pathlib
    with pytest.raises(WaferflowError, match=r"to_html: images"):
        report.to_html(tmp_path / "r.html", images=images)
    assert not (tmp_path / "r.html").exists()


def test_to_chrome_trace_options_must_be_trace_options(report, tmp_path: Path) -> None:
    # AttributeError: 'int' object has no attribute 'counter_points'
    with pytest.raises(WaferflowError, match=r"options=5: give a .*TraceOptions"):
        report.to_chrome_trace(tmp_path / "t.json", options=5)


@pytest.mark.parametrize("top_k", [2.5, "3", None, -1])
def test_plot_links_top_k_is_a_count(report, tmp_path: Path, top_k) -> None:
    # TypeErrors from viz/links.py (-1 was taken as 0)
    with pytest.raises(ConfigError, match=r"plot_links: top_k=.*integer >= 0"):
        report.plot_links(tmp_path / "l.png", top_k=top_k)


@pytest.mark.parametrize("tracks", [2.5, "3", None, 0])
def test_plot_timeline_max_tracks_is_a_count(report, tmp_path: Path, tracks) -> None:
    # TypeErrors from viz/timeline.py (0 still drew a track per group)
    with pytest.raises(ConfigError, match=r"plot_timeline: max_tracks=.*integer >= 1"):
        report.plot_timeline(tmp_path / "t.png", max_tracks=tracks)


# --- backend_sim ------------------------------------------------------------------------


def test_simulate_refuses_a_wafer_name_and_a_compiled_plan(compiled) -> None:
    # AttributeError: 'str' object has no attribute 'flow' / 'CompiledPlan' ... 'actors'
    from waferflow.backend_sim import estimate, simulate

    for run in (simulate, estimate):
        with pytest.raises(ConfigError, match=r"wafer must be a Wafer, got 'mesh4x4'.*get_wafer"):
            run(compiled.plan, "mesh4x4")
        with pytest.raises(ConfigError, match=r"plan must be a waferflow Plan.*its \.plan"):
            run(compiled, compiled.wafer)
        with pytest.raises(ConfigError, match="config must be a SimConfig"):
            run(compiled.plan, compiled.wafer, config={})

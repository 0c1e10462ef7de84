"""The PassManager: IR dumps, timing records and table, verification, failures."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import pytest

from waferflow.errors import PassError, VerificationError
from waferflow.ir import Graph, print_graph
from waferflow.passes import (
    Pass,
    PassContext,
    PassFailure,
    PassManager,
    PassRecord,
    Severity,
    parse_pipeline,
)

from . import graphs


@dataclass(frozen=True)
class Boom(Pass):
    """Raises (not registered: the manager takes instances)."""

    name: ClassVar[str] = "boom"

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        raise RuntimeError("kaboom")


@dataclass(frozen=True)
class Vandal(Pass):
    """Deletes the first op that has users, leaving dangling operands."""

    name: ClassVar[str] = "vandal"

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        graph.erase_ops([graph.ops[0]])
        return graph


@dataclass(frozen=True)
class NotAGraph(Pass):
    """Forgets to return the graph."""

    name: ClassVar[str] = "not-a-graph"

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        return None  # type: ignore[return-value]


def _steps(pipeline: str) -> list[str]:
    """The printed IR after each pass, running the passes by hand."""
    g = graphs.mlp_train()
    out = []
    for p in parse_pipeline(pipeline):
        g = p.apply(PassContext(), g)
        out.append(print_graph(g))
    return out


def test_print_ir_after_all() -> None:
    buf = io.StringIO()
    pipeline = "canonicalize,dce,fuse-elementwise"
    result = PassManager(pipeline, print_ir_after_all=True, out=buf).run(graphs.mlp_train())
    steps = _steps(pipeline)
    expected = "".join(
        f"// -----// IR Dump After {name} //----- //\n{ir}\n"
        for name, ir in zip(["canonicalize", "dce", "fuse-elementwise"], steps, strict=True)
    )
    assert buf.getvalue() == expected
    assert print_graph(result) == steps[-1]


def test_print_ir_after_named_pass_only() -> None:
    buf = io.StringIO()
    PassManager("canonicalize,dce,annotate-cost", print_ir_after={"dce"}, out=buf).run(
        graphs.mlp_train()
    )
    text = buf.getvalue()
    assert text.count("IR Dump After") == 1
    assert text == f"// -----// IR Dump After dce //----- //\n{_steps('canonicalize,dce')[1]}\n"


def test_print_ir_after_an_unknown_pass_is_an_error() -> None:
    with pytest.raises(
        PassError, match="unknown pass 'dec' in --print-ir-after; did you mean 'dce'"
    ):
        PassManager("dce", print_ir_after={"dec"})


def test_dump_names_must_be_in_the_pipeline() -> None:
    """A registered pass the pipeline does not run would print nothing: an error."""
    with pytest.raises(PassError, match=r"--print-ir-after canonicalize: the pipeline does not "
                       r"run 'canonicalize'; it runs: dce, annotate-cost"):  # fmt: skip
        PassManager("dce,annotate-cost", print_ir_after={"canonicalize"})
    with pytest.raises(PassError, match=r"--print-ir-before fuse-elementwise: .* it runs: dce"):
        PassManager("dce", print_ir_before={"fuse-elementwise"})
    with pytest.raises(PassError, match="unknown pass 'dcee' in --print-ir-before; did you mean"):
        PassManager("dce", print_ir_before={"dcee"})


def test_print_ir_before() -> None:
    buf = io.StringIO()
    pm = PassManager(
        "canonicalize,dce", print_ir_before={"dce"}, print_ir_before_all=False, out=buf
    )
    pm.run(graphs.mlp_train())
    before_dce = _steps("canonicalize")[0]
    assert buf.getvalue() == f"// -----// IR Dump Before dce //----- //\n{before_dce}\n"
    buf = io.StringIO()
    PassManager("canonicalize,dce", print_ir_before_all=True, out=buf).run(graphs.mlp_train())
    assert buf.getvalue().count("IR Dump Before") == 2
    assert buf.getvalue().startswith(
        f"// -----// IR Dump Before canonicalize //----- //\n{print_graph(graphs.mlp_train())}"
    )


def test_print_ir_after_change_skips_passes_that_change_nothing() -> None:
    buf = io.StringIO()
    # on the canonical graph, dce changes nothing, canonicalize (first) does
    pm = PassManager(
        "canonicalize,dce,dce", print_ir_after_all=True, print_ir_after_change=True, out=buf
    )
    pm.run(graphs.mlp_train())
    steps = _steps("canonicalize,dce,dce")
    headers = [line for line in buf.getvalue().splitlines() if line.startswith("// -----//")]
    changed = [steps[0] != print_graph(graphs.mlp_train()), steps[1] != steps[0], False]
    names = ["canonicalize", "dce", "dce"]
    assert headers == [
        f"// -----// IR Dump After {n} //----- //" for n, c in zip(names, changed, strict=True) if c
    ]
    assert changed[0]


def test_print_ir_after_failure_shows_what_the_failing_pass_left() -> None:
    buf = io.StringIO()
    pm = PassManager([Vandal()], verify_each=True, print_ir_after_failure=True, out=buf)
    with pytest.raises(PassFailure) as exc:
        pm.run(graphs.mlp_train())
    assert (
        buf.getvalue()
        == f"// -----// IR Dump After vandal Failed //----- //\n{exc.value.ir_after}\n"
    )
    buf = io.StringIO()
    pm = PassManager([Boom()], print_ir_after_failure=True, out=buf)
    with pytest.raises(PassFailure):
        pm.run(graphs.sources())
    assert buf.getvalue() == (
        f"// -----// IR Dump After boom Failed //----- //\n{print_graph(graphs.sources())}\n"
    )


def test_verify_checks_the_input_and_the_output_only() -> None:
    seen: list[int] = []
    pm = PassManager(
        "canonicalize,dce,annotate-cost", verify=True, verifier=lambda g: seen.append(len(g.ops))
    )
    pm.run(graphs.mlp_train())
    assert len(seen) == 2  # before the first pass and after the last
    with pytest.raises(PassFailure, match="'vandal' failed verification"):
        PassManager([Vandal()], verify=True).run(graphs.mlp_train())


def test_prints_nothing_unless_asked(capsys: pytest.CaptureFixture[str]) -> None:
    PassManager("canonicalize,dce").run(graphs.mlp_train())
    assert capsys.readouterr().out == ""


def test_output_defaults_to_stdout_at_print_time(capsys: pytest.CaptureFixture[str]) -> None:
    PassManager("dce", print_ir_after_all=True).run(graphs.sources())
    assert capsys.readouterr().out.startswith("// -----// IR Dump After dce //----- //\ngraph")


def _fake_clock(step: float) -> Iterator[float]:
    t = 0.0
    while True:
        yield t
        t += step


def test_records_and_timing_table() -> None:
    ticks = _fake_clock(0.25)
    buf = io.StringIO()
    pm = PassManager(
        "canonicalize,dce,fuse-elementwise{max=8}",
        time_passes=True,
        out=buf,
        clock=lambda: next(ticks),
    )
    pm.run(graphs.mlp_train())
    # mlp_train has 32 ops: canonicalize drops view, detach, assert, metadata; dce the
    # dead mul and exp; fuse-elementwise folds three mul/sub pairs of the SGD step
    assert pm.records == [
        PassRecord("canonicalize", "canonicalize", 0.25, 32, 28),
        PassRecord("dce", "dce", 0.25, 28, 26),
        PassRecord("fuse-elementwise", "fuse-elementwise{max=8}", 0.25, 26, 23),
    ]
    expected = """\
===-------------------------------------------------------------------------===
                          Pass execution timing report
===-------------------------------------------------------------------------===
  Total Execution Time: 0.7500 seconds

    ----Wall Time----      ----Ops----  ----Pass----
      0.2500 ( 33.3%)         32 -> 28  canonicalize
      0.2500 ( 33.3%)         28 -> 26  dce
      0.2500 ( 33.3%)         26 -> 23  fuse-elementwise{max=8}
      0.7500 (100.0%)         32 -> 23  Total
"""
    assert buf.getvalue() == expected
    assert pm.timing_report() == expected


def test_records_are_kept_without_printing_and_reset_per_run() -> None:
    buf = io.StringIO()
    pm = PassManager("dce", out=buf)
    pm.run(graphs.sources())
    pm.run(graphs.sources())
    assert [(r.name, r.ops_before, r.ops_after) for r in pm.records] == [("dce", 7, 5)]
    assert buf.getvalue() == ""


def test_verify_each_runs_the_verifier_on_input_and_after_every_pass() -> None:
    seen: list[int] = []
    ticks = _fake_clock(1.0)
    pm = PassManager(
        "canonicalize,dce",
        verify_each=True,
        verifier=lambda g: seen.append(len(g.ops)),
        clock=lambda: next(ticks),
    )
    pm.run(graphs.mlp_train())
    assert seen == [32, 28, 26]
    assert [r.verify_seconds for r in pm.records] == [1.0, 1.0]
    assert "(verifier)" in pm.timing_report()


def test_a_failing_pass_is_named_with_the_passes_before_it() -> None:
    pm = PassManager([*parse_pipeline("canonicalize,dce"), Boom(), *parse_pipeline("dce")])
    with pytest.raises(PassFailure) as info:
        pm.run(graphs.mlp_train())
    err = info.value
    assert str(err) == "pass 'boom' failed: kaboom; passes that ran before it: canonicalize, dce"
    assert isinstance(err, PassError)
    assert isinstance(err.__cause__, RuntimeError)
    assert err.pass_name == "boom"
    assert err.ran_before == ("canonicalize", "dce")
    assert err.ir_before == _steps("canonicalize,dce")[1]
    assert err.ir_after is None
    assert [r.name for r in pm.records] == ["canonicalize", "dce"]


def test_a_failing_first_pass() -> None:
    with pytest.raises(PassFailure, match=r"passes that ran before it: \(none\)$") as info:
        PassManager([Boom()]).run(graphs.sources())
    assert info.value.ir_before == print_graph(graphs.sources())


def test_a_pass_that_returns_no_graph_fails() -> None:
    with pytest.raises(PassFailure, match="'not-a-graph' failed: apply\\(\\) returned NoneType"):
        PassManager([NotAGraph()]).run(graphs.sources())


def test_verification_failure_names_the_pass_and_keeps_both_irs() -> None:
    pm = PassManager([*parse_pipeline("canonicalize"), Vandal()], verify_each=True)
    with pytest.raises(PassFailure) as info:
        pm.run(graphs.mlp_train())
    err = info.value
    assert str(err).startswith("pass 'vandal' failed verification: graph @mlp_train is invalid")
    assert str(err).endswith("; passes that ran before it: canonicalize")
    assert "operand %x is not defined by any op of this graph" in str(err)
    assert isinstance(err.__cause__, VerificationError)
    assert err.ir_before == _steps("canonicalize")[0]
    assert err.ir_after is not None and '%x = input "x"' not in err.ir_after


def test_without_verify_each_a_broken_graph_goes_through() -> None:
    # the point of verify_each: without it, the vandal is not caught here
    PassManager([Vandal()]).run(graphs.sources())


def test_an_invalid_input_is_reported_before_any_pass() -> None:
    g = graphs.sources()
    g.outputs = []
    with pytest.raises(PassError, match="input graph failed verification before any pass ran"):
        PassManager("dce", verify_each=True).run(g)


def test_diagnostics_and_typed_results_in_the_context() -> None:
    ctx = PassContext()
    PassManager("canonicalize").run(graphs.views(), ctx)
    assert [(d.pass_name, d.severity) for d in ctx.diagnostics] == [
        ("canonicalize", Severity.WARNING)
    ]
    assert "kept metadata %meta_used" in ctx.diagnostics[0].message

    ctx.put_result("stats", 3)
    assert ctx.get_result("stats", int) == 3
    assert ctx.find_result("other", int) is None
    with pytest.raises(PassError, match="analysis result 'stats' is a int, not a str"):
        ctx.get_result("stats", str)
    with pytest.raises(PassError, match=r"no analysis result 'plan'.*results present: stats"):
        ctx.get_result("plan", str)
    with pytest.raises(PassError, match="pass 'place' needs a target wafer"):
        ctx.require_wafer("place")

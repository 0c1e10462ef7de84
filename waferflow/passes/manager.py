"""The PassManager: runs a pipeline, prints IR, times passes, verifies, blames.

In the spirit of ``mlir-opt``: ``print_ir_after_all`` / ``print_ir_after`` write
``// -----// IR Dump After <pass> //----- //`` and the IR (``print_ir_after_change``:
only when the pass changed it), ``print_ir_before_all`` / ``print_ir_before`` the same
before a pass, ``print_ir_after_failure`` the IR a failing pass left; ``time_passes``
prints a wall-time table at the end; ``verify`` runs the IR verifier on the input and
the output, ``verify_each`` on the input and after every pass. Pass names given to the
dump options must be registered and in the pipeline. A pass that raises, or leaves IR
the verifier rejects, becomes a ``PassFailure`` naming the pass and the passes that ran
before it, with the IR from before the pass on the error.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TextIO

from waferflow.errors import PassError, VerificationError
from waferflow.ir.graph import Graph
from waferflow.ir.printer import print_graph
from waferflow.passes.base import Pass, PassContext
from waferflow.passes.pipeline import format_pass, parse_pipeline
from waferflow.passes.registry import did_you_mean, get_pass, unknown_pass_message

Verifier = Callable[[Graph], None]
Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class PassRecord:
    """What one pass did: how long it took and how the op count changed."""

    name: str  # the pass name: fuse-elementwise
    spec: str  # the pass as in a pipeline: fuse-elementwise{max=8}
    seconds: float  # wall time of apply()
    ops_before: int
    ops_after: int
    verify_seconds: float = 0.0  # wall time of the verifier after it (0 unless verify_each)


class PassFailure(PassError):
    """A pass raised, or its output failed verification.

    ``__cause__`` is the original exception. ``ir_before`` is the printed IR the
    failing pass started from; ``ir_after`` the IR it produced when verification
    (not the pass itself) failed, else None.
    """

    def __init__(
        self,
        message: str,
        *,
        pass_name: str,
        ran_before: tuple[str, ...],
        ir_before: str,
        ir_after: str | None = None,
    ) -> None:
        super().__init__(message)
        self.pass_name = pass_name
        self.ran_before = ran_before
        self.ir_before = ir_before
        self.ir_after = ir_after


def dump_header(pass_name: str, when: str = "After") -> str:
    """``// -----// IR Dump After canonicalize //----- //`` (``when``: After, Before, After
    ... Failed)."""
    if when == "Failed":
        return f"// -----// IR Dump After {pass_name} Failed //----- //"
    return f"// -----// IR Dump {when} {pass_name} //----- //"


def check_pass_names(names: Collection[str], passes: Sequence[Pass], option: str) -> None:
    """PassError unless every name is a registered pass that ``passes`` runs (a typo
    would otherwise print nothing), with a did-you-mean."""
    running = [p.name for p in passes]
    for name in sorted(names):
        try:
            get_pass(name)
        except PassError:
            raise PassError(unknown_pass_message(name, f" in {option}")) from None
        if name not in running:
            listed = ", ".join(dict.fromkeys(running)) or "(none)"
            raise PassError(
                f"{option} {name}: the pipeline does not run {name!r};"
                f"{did_you_mean(name, running)} it runs: {listed}"
            )


class PassManager:
    """Runs passes in order over a graph.

    ``passes`` is a list of passes or a pipeline string. ``out`` defaults to the
    ``sys.stdout`` of the moment of printing (so redirections made later apply).
    ``verifier`` defaults to ``waferflow.ir.verifier.verify_graph``; ``clock`` to
    ``time.perf_counter`` (tests pass fakes).
    """

    def __init__(
        self,
        passes: Sequence[Pass] | str,
        *,
        verify_each: bool = False,
        print_ir_after_all: bool = False,
        print_ir_after: Collection[str] = frozenset(),
        time_passes: bool = False,
        out: TextIO | None = None,
        verifier: Verifier | None = None,
        clock: Clock = time.perf_counter,
        verify: bool = False,
        print_ir_before_all: bool = False,
        print_ir_before: Collection[str] = frozenset(),
        print_ir_after_change: bool = False,
        print_ir_after_failure: bool = False,
    ) -> None:
        self.passes: list[Pass] = (
            parse_pipeline(passes) if isinstance(passes, str) else list(passes)
        )
        check_pass_names(print_ir_after, self.passes, "--print-ir-after")
        check_pass_names(print_ir_before, self.passes, "--print-ir-before")
        self.verify_each = verify_each
        self.verify = verify
        self.print_ir_after_all = print_ir_after_all
        self.print_ir_after = frozenset(print_ir_after)
        self.print_ir_before_all = print_ir_before_all
        self.print_ir_before = frozenset(print_ir_before)
        self.print_ir_after_change = print_ir_after_change
        self.print_ir_after_failure = print_ir_after_failure
        self.time_passes = time_passes
        self._out = out
        self._verifier = verifier
        self._clock = clock
        self.records: list[PassRecord] = []  # of the latest run()

    @property
    def out(self) -> TextIO:
        return self._out if self._out is not None else sys.stdout

    def timing_report(self) -> str:
        """The timing table of the latest run (what ``time_passes`` prints)."""
        return format_timing(self.records)

    def _verify(self, graph: Graph) -> None:
        if self._verifier is not None:
            self._verifier(graph)
            return
        # imported here: the verifier module sits beside us in ir/ and is optional
        # until a run asks for verification
        from waferflow.ir.verifier import verify_graph

        verify_graph(graph)

    def run(self, graph: Graph, ctx: PassContext | None = None) -> Graph:
        """Run every pass on ``graph``; returns the final graph (maybe the same object)."""
        ctx = ctx if ctx is not None else PassContext()
        self.records = []
        if self.verify_each or self.verify:
            try:
                self._verify(graph)
            except VerificationError as exc:
                raise PassError(
                    f"the input graph failed verification before any pass ran: {exc}"
                ) from exc
        ran: list[str] = []
        ir_text: str | None = None  # printed IR of `graph`, when we already have it
        last = len(self.passes) - 1
        for index, p in enumerate(self.passes):
            ir_before = ir_text if ir_text is not None else print_graph(graph)
            if self.print_ir_before_all or p.name in self.print_ir_before:
                self.out.write(f"{dump_header(p.name, 'Before')}\n{ir_before}\n")
            ops_before = len(graph.ops)
            t0 = self._clock()
            try:
                result = p.apply(ctx, graph)
                if not isinstance(result, Graph):
                    raise TypeError(f"apply() returned {type(result).__name__}, not a Graph")
            except Exception as exc:
                self._dump_failure(p.name, graph)
                raise self._failure(p, ran, ir_before, None, exc) from exc
            seconds = self._clock() - t0
            graph = result
            verify_seconds = 0.0
            ir_text = None
            if self.verify_each or (self.verify and index == last):
                t1 = self._clock()
                try:
                    self._verify(graph)
                except VerificationError as exc:
                    ir_after = print_graph(graph)
                    if self.print_ir_after_failure:
                        self.out.write(f"{dump_header(p.name, 'Failed')}\n{ir_after}\n")
                    raise self._failure(p, ran, ir_before, ir_after, exc) from exc
                verify_seconds = self._clock() - t1
            self.records.append(
                PassRecord(
                    p.name, format_pass(p), seconds, ops_before, len(graph.ops), verify_seconds
                )
            )
            ran.append(p.name)
            if self.print_ir_after_all or p.name in self.print_ir_after:
                ir_text = print_graph(graph)
                if not self.print_ir_after_change or ir_text != ir_before:
                    self.out.write(f"{dump_header(p.name)}\n{ir_text}\n")
        if self.time_passes:
            self.out.write(format_timing(self.records))
        return graph

    def _dump_failure(self, pass_name: str, graph: Graph) -> None:
        """With ``print_ir_after_failure``: the IR as the failing pass left it."""
        if not self.print_ir_after_failure:
            return
        try:
            text = print_graph(graph)
        except Exception as exc:  # a pass may leave a graph too broken to print
            text = f"(the IR cannot be printed: {exc})\n"
        self.out.write(f"{dump_header(pass_name, 'Failed')}\n{text}\n")

    @staticmethod
    def _failure(
        p: Pass, ran: list[str], ir_before: str, ir_after: str | None, exc: Exception
    ) -> PassFailure:
        what = "failed verification" if ir_after is not None else "failed"
        cause = str(exc) or type(exc).__name__
        before = ", ".join(ran) if ran else "(none)"
        return PassFailure(
            f"pass {p.name!r} {what}: {cause}; passes that ran before it: {before}",
            pass_name=p.name,
            ran_before=tuple(ran),
            ir_before=ir_before,
            ir_after=ir_after,
        )


def format_timing(records: Sequence[PassRecord]) -> str:
    """A wall-time table in the style of ``mlir-opt -mlir-timing``."""
    rule = "===" + "-" * 73 + "==="
    total = sum(r.seconds + r.verify_seconds for r in records)
    verify_total = sum(r.verify_seconds for r in records)

    def pct(seconds: float) -> str:
        share = 100.0 * seconds / total if total > 0 else 0.0
        return f"{seconds:10.4f} ({share:5.1f}%)"

    lines = [
        rule,
        "Pass execution timing report".center(len(rule)).rstrip(),
        rule,
        f"  Total Execution Time: {total:.4f} seconds",
        "",
        f"  {'----Wall Time----':>19}  {'----Ops----':>15}  ----Pass----",
    ]
    for r in records:
        ops = f"{r.ops_before} -> {r.ops_after}"
        lines.append(f"  {pct(r.seconds)}  {ops:>15}  {r.spec}")
    if verify_total > 0:
        lines.append(f"  {pct(verify_total)}  {'':>15}  (verifier)")
    ops_total = f"{records[0].ops_before} -> {records[-1].ops_after}" if records else ""
    lines.append(f"  {pct(total)}  {ops_total:>15}  Total")
    return "\n".join(lines) + "\n"

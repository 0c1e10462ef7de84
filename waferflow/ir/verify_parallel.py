"""The verifier's rules for parallel annotations (``ir/parallel.py``).

``parallel_problems(graph)`` lists what a sharded graph breaks, one message per
problem, each naming the op in the user's terms (module path and ATen op):

* the header: degrees >= 1; an op annotated in a graph without a plan;
* every non-source op has a stage in ``[0, pp)`` and one input placement per operand;
  splits name a dimension of the value and an axis of degree > 1;
* **partial sums**: a reduction never consumes a partial value (it must be reduced
  first); once collectives are inserted (level ``collectives``) no operand differs
  from what its op needs along ``dp`` or ``tp`` (the collective is missing; in a
  plan that reshards between stages, ``reshard``, an operand from another stage may:
  the transfer converts it), no graph
  output is partial along ``dp`` or ``tp``, and each collective's ``src`` / ``dst``
  match its operand and result;
* **stages**: a forward op never uses a forward value of a later stage (values flow
  forward through the pipeline; gradients flow back and are not constrained);
* **micro-batches**: an op run per micro-batch never reads a value that needs every
  micro-batch nor a sum over the micro-batches (along ``mb`` a sum accumulates in
  place, for an op run once after them), and an op run once before them never reads
  per-micro-batch values; micro-batches are never gathered;
* **regions** (once placed): one per stage, shared by its ops, one core per rank
  (at most ``ranks`` when the plan reshards between stages: a per-layer plan's
  stages have their own widths), no core in two stages.
"""

from __future__ import annotations

from waferflow.ir.graph import Graph, Op, Phase, Value
from waferflow.ir.opkind import COLLECTIVE, REDUCTION, VIEWS
from waferflow.ir.parallel import (
    RANK_AXES,
    GraphParallel,
    MbMode,
    ParallelLevel,
    needs_conversion,
    op_label,
    placement_word,
    reads_value,
    root_value,
)
from waferflow.ir.sharding import MeshAxis, Partial, Placement, Replicated, Sharding, Split

_RANK_AXES = RANK_AXES


def _text(p: Placement) -> str:
    """As the collectives' ``src`` / ``dst`` attributes spell it (``S0/4``, ``P``, ``R``)."""
    if isinstance(p, Split):
        return f"S{p.dim}/{p.block}"
    return "P" if isinstance(p, Partial) else "R"


def parallel_problems(graph: Graph) -> list[str]:
    """Every parallel-annotation rule ``graph`` breaks (empty for a valid graph)."""
    gp = graph.parallel
    if gp is None:
        for index, op in enumerate(graph.ops):
            if op.par is not None or any(not v.sharding.is_replicated for v in op.results):
                return [
                    f"op {index} ({op_label(op)}): parallel annotations in a graph without "
                    "a parallel(...) header"
                ]
        return []
    return _Checker(graph, gp).run()


class _Checker:
    def __init__(self, graph: Graph, gp: GraphParallel) -> None:
        self.g = graph
        self.gp = gp
        self.degrees = gp.degrees()
        self.problems: list[str] = []

    def add(self, index: int, op: Op, message: str) -> None:
        self.problems.append(f"op {index} ({op_label(op)}): {message}")

    def run(self) -> list[str]:
        gp = self.gp
        for key in ("dp", "tp", "mb", "pp", "ranks", "ep"):
            if getattr(gp, key) < 1:
                self.problems.append(f"parallel(...): {key} must be at least 1")
        if self.problems:
            return self.problems
        for index, op in enumerate(self.g.ops):
            for v in op.results:
                self.check_sharding(index, op, v.sharding, v, f"result %{v.name}")
            if op.is_source:
                if op.par is not None:
                    self.add(index, op, "a source has no stage (it lives where it is used)")
                continue
            if op.par is None:
                self.add(index, op, "no parallel annotation par(stage=...)")
                continue
            self.check_op(index, op)
        self.check_outputs()
        self.check_regions()
        return self.problems

    def check_sharding(self, index: int, op: Op, s: Sharding, v: Value, what: str) -> None:
        for axis, p in s.placements:
            if self.degrees[axis] < 2:
                self.add(index, op, f"{what} is placed along {axis.value}, whose degree is 1")
            if isinstance(p, Split) and not 0 <= p.dim < v.type.rank:
                self.add(index, op, f"{what} is split on dimension {p.dim} of {v.type}")

    def check_op(self, index: int, op: Op) -> None:
        par = op.par
        assert par is not None
        if not 0 <= par.stage < self.gp.pp:
            self.add(index, op, f"stage {par.stage} is outside 0..{self.gp.pp - 1}")
        if len(par.inputs) != len(op.operands):
            self.add(
                index, op, f"{len(par.inputs)} input placement(s) for {len(op.operands)} operand(s)"
            )
            return
        collectives = self.gp.level is ParallelLevel.COLLECTIVES
        for i, (v, need) in enumerate(zip(op.operands, par.inputs, strict=True)):
            self.check_sharding(index, op, need, v, f"operand {i} as needed")
            if not reads_value(op, i):
                continue
            for axis in self.gp.axes:
                have, want = v.sharding.get(axis), need.get(axis)
                if isinstance(want, Partial) and op.kind in REDUCTION:
                    self.add(
                        index, op,
                        f"reduces %{v.name}, a partial sum along {axis.value}, without "
                        f"reducing it first (an all-reduce along {axis.value} must come before)",
                    )  # fmt: skip
                # along mb nothing is inserted (sums accumulate in place): check it now
                if (collectives or axis is MeshAxis.MB) and op.kind not in COLLECTIVE:
                    self.check_use(index, op, v, axis, have, want)
            self.check_stage(index, op, v)
            self.check_mode(index, op, v)
        if op.kind in COLLECTIVE:
            self.check_collective(index, op)

    def check_use(
        self, index: int, op: Op, v: Value, axis: MeshAxis, have: Placement, want: Placement
    ) -> None:
        if not needs_conversion(v, axis, have, want):
            return
        if self.gp.reshard and axis is not MeshAxis.MB and self.crosses(op, v):
            return  # the transfer between the two stages reshards it
        if axis is MeshAxis.MB:
            per_mb = op.par is not None and op.par.mode is MbMode.PER_MB
            if isinstance(have, Partial) and isinstance(want, Replicated) and not per_mb:
                return  # accumulated over the micro-batches, read after the last one
            if per_mb and isinstance(have, Partial):
                self.add(
                    index, op,
                    f"runs per micro-batch but reads %{v.name} summed over every micro-batch",
                )  # fmt: skip
                return
            self.add(
                index, op,
                f"needs %{v.name} {placement_word(want)} along mb but it is "
                f"{placement_word(have)}: micro-batches cannot be gathered",
            )  # fmt: skip
            return
        what = "a partial sum" if isinstance(have, Partial) else placement_word(have)
        self.add(
            index, op,
            f"uses %{v.name}, {what} along {axis.value}, as {placement_word(want)}: "
            f"the collective that converts it is missing (run insert-collectives)",
        )  # fmt: skip

    @staticmethod
    def crosses(op: Op, v: Value) -> bool:
        """Whether ``op`` reads ``v`` from another stage."""
        prod = root_value(v).producer
        if prod is None or prod.par is None or op.par is None:
            return False
        return prod.par.stage != op.par.stage

    def check_stage(self, index: int, op: Op, v: Value) -> None:
        prod = v.producer
        par = op.par
        if prod is None or prod.par is None or par is None or op.phase is not Phase.FWD:
            return
        if prod.phase is Phase.FWD and prod.par.stage > par.stage:
            self.add(
                index, op,
                f"stage {par.stage} uses %{v.name} from stage {prod.par.stage} "
                f"({op_label(prod)}): a stage cannot use a later stage's value",
            )  # fmt: skip

    def check_mode(self, index: int, op: Op, v: Value) -> None:
        par = op.par
        root = root_value(v).producer
        if par is None or root is None or root.par is None or root.is_source:
            return
        if op.kind in VIEWS:
            return  # a view runs where its value is read
        mode, theirs = par.mode, root.par.mode
        if mode is MbMode.PER_MB and theirs is MbMode.LATE:
            self.add(
                index, op,
                f"runs per micro-batch but reads %{v.name} ({op_label(root)}), which needs "
                "every micro-batch",
            )  # fmt: skip
        elif mode is MbMode.EARLY and theirs is not MbMode.EARLY:
            self.add(
                index, op,
                f"runs once before the micro-batches but reads %{v.name} ({op_label(root)}), "
                f"which runs {theirs.value}",
            )  # fmt: skip

    def check_collective(self, index: int, op: Op) -> None:
        par = op.par
        assert par is not None
        axis_name = op.attrs.get("axis")
        if axis_name not in [a.value for a in _RANK_AXES]:
            self.add(index, op, f'a collective needs axis="dp", "ep" or "tp", got {axis_name!r}')
            return
        axis = MeshAxis(axis_name)
        src, dst = op.attrs.get("src"), op.attrs.get("dst")
        for v, need in zip(op.operands, par.inputs, strict=True):
            got = _text(need.get(axis))
            if got != src:
                self.add(
                    index, op, f"src={src!r} but %{v.name} comes in as {got} along {axis_name}"
                )
        for r, need in zip(op.results, par.inputs, strict=False):
            got = _text(r.sharding.get(axis))
            if got != dst:
                self.add(index, op, f"dst={dst!r} but %{r.name} is {got} along {axis_name}")
            if r.sharding.with_(axis, need.get(axis)) != need:
                self.add(index, op, f"%{r.name} changes axes other than {axis_name}")

    def check_outputs(self) -> None:
        if self.gp.level is not ParallelLevel.COLLECTIVES:
            return
        for i, v in enumerate(self.g.outputs):
            for axis in _RANK_AXES:
                if isinstance(v.sharding.get(axis), Partial):
                    prod = f" ({op_label(v.producer)})" if v.producer is not None else ""
                    self.problems.append(
                        f"output {i} %{v.name}{prod} is a partial sum along {axis.value}, "
                        "returned without a reduction"
                    )

    def check_regions(self) -> None:
        placed = [
            (i, op) for i, op in enumerate(self.g.ops) if op.par is not None and op.par.region
        ]
        if not placed:
            return
        by_stage: dict[int, tuple[int, ...]] = {}
        for index, op in enumerate(self.g.ops):
            par = op.par
            if par is None:
                continue
            if not par.region:
                self.add(index, op, "no region (on=[...]) while other ops are placed")
                continue
            n = len(par.region)  # a plan that reshards between stages: widths of their own
            if n > self.gp.ranks or (n < self.gp.ranks and not self.gp.reshard):
                self.add(
                    index, op, f"region has {len(par.region)} core(s) for {self.gp.ranks} ranks"
                )
            first = by_stage.setdefault(par.stage, par.region)
            if first != par.region:
                self.add(index, op, f"region differs from the other ops of stage {par.stage}")
        seen: dict[int, int] = {}
        for stage, region in sorted(by_stage.items()):
            if len(set(region)) != len(region):
                self.problems.append(f"stage {stage}: its region lists a core twice")
            for c in region:
                other = seen.setdefault(c, stage)
                if other != stage:
                    self.problems.append(f"core {c} runs ranks of stages {other} and {stage}")


__all__ = ["parallel_problems"]

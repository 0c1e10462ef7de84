"""``ParallelPlan``: what the user asks for, parsed from ``dp=2,tp=4,pp=2,microbatches=4``.

Keys (``_`` and ``-`` are interchangeable; ``mb`` is short for ``microbatches``):

====================  ====================================================================
``dp``                data-parallel replicas (batch split, weights replicated)
``tp``                tensor-parallel ranks (Megatron column / row split, heads, channels)
``pp``                pipeline stages
``microbatches``      micro-batches per step (each replica's batch is cut into this many)
``schedule``          ``gpipe`` or ``1f1b`` (default)
``grad-reduce``       ``all-reduce`` (default) or ``root`` (reduce to replica 0, which
                      alone runs the optimizer, as the seed machine does)
``algo``              collective algorithm: ``auto`` (cheapest by the cost model) or one
                      of ``ring``, ``biring``, ``mesh2d``, ``tree``, ``direct``, ``root``,
                      ``innet`` (in the switches of a switched fabric: ``parallel.innet``)
``recompute``         ``true``: drop activations after the forward, recompute them
``layers``            per-layer pattern, one letter per layer: ``d`` data, ``t`` tensor,
                      ``r`` replicated (every rank runs the whole layer), ``s`` single
                      (one rank runs it); needs ``ways``
``ways``              degree of the per-layer pattern (the ranks of a stage)
``group``             actor granularity: ``module`` (default), ``layer`` or ``op``
``overlap``           ``true`` (default): interleave gradient reduction with the backward
``span``              each rank runs on a ``span x span`` block of the wafer's nodes:
                      ``auto`` (default; the largest block that leaves room for every
                      rank, so the plan uses the whole wafer) or an integer >= 1
``cut``               how the forward pass is cut into ``pp`` stages: ``balanced``
                      (default: contiguous, the slowest stage as fast as possible) or
                      ``layer`` (one stage per layer, ``pp`` = the number of layers;
                      without ``pp`` (or with 0 or 1) it is taken from the model)
``zero``              ZeRO stage over ``dp`` (0, the default: none): 1 shards the
                      optimizer state, 2 also the gradients, 3 also the parameters
                      (``waferflow.parallel.zero``)
``ep``                expert-parallel ranks (mixture-of-experts models): the batch is
                      split over them like over ``dp`` and the experts are dealt out
                      among them; tokens reach their experts by all-to-all
``matmul``            an all-gather feeding a matmul: ``gather`` (default) it whole
                      first, ``shift`` rotate its blocks around the group's ring while
                      multiplying (Cannon / T10), ``auto`` the cheaper of the two per
                      matmul (``waferflow.parallel.shift``)
====================  ====================================================================

The seed machine's plans are spelled as the seed spells them, and mean the same on
every wafer (``waferflow.parallel.per_layer``):

* ``pipe``: one stage per layer on one core each: ``cut=layer,schedule=gpipe``;
* ``gpipe=M``: the same with ``M`` micro-batches (``microbatches=M``);
* ``layers=ddt,ways=4``, a pattern with fewer letters than the model has layers with
  weights: one stage per layer, the given letters for the first layers, every later
  layer (and the unweighted ones after them: pool, loss) on one rank (``s``),
  gradients reduced to replica 0 (``grad-reduce=root,algo=root``), GPipe. Resolved
  against the model, it prints as the explicit form (``cut=layer,layers=ddts,...``).

``span`` is how a plan of a few hundred ranks uses a wafer of thousands of nodes: the
plan is built on ``wafer.coarsen(span)``, whose node is one rank's block (its compute
and SRAM pooled, as inside any coarse node). ``span=1`` is one node per rank.

Only the plan's own consistency is checked here; whether it fits a model and a
wafer is checked when it is applied (``waferflow.parallel.driver``).
"""

from __future__ import annotations

import difflib
import itertools
import math
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Any

from waferflow.errors import PlanError
from waferflow.fileio import short
from waferflow.ir.sharding import MeshAxis


class PipelineSchedule(Enum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"


class GradReduce(Enum):
    ALL_REDUCE = "all-reduce"
    ROOT = "root"


class CollectiveAlgo(Enum):
    AUTO = "auto"
    RING = "ring"
    BIRING = "biring"
    MESH2D = "mesh2d"
    TREE = "tree"
    DIRECT = "direct"
    ROOT = "root"
    INNET = "innet"  # in the switches of a switched fabric (``parallel/innet.py``)


class MatmulAlgo(Enum):
    """How a matmul gets an operand that is split over a group and needed whole."""

    GATHER = "gather"
    SHIFT = "shift"
    AUTO = "auto"


class LayerMode(Enum):
    DATA = "d"
    TENSOR = "t"
    REPLICATE = "r"
    SINGLE = "s"  # one rank runs the whole layer


class StageCut(Enum):
    """How the forward pass is cut into pipeline stages."""

    BALANCED = "balanced"
    LAYER = "layer"


class Granularity(Enum):
    """How many graph ops one actor runs: one op, one module or one layer."""

    OP = "op"
    MODULE = "module"
    LAYER = "layer"


SPAN_AUTO = 0  # ``span=auto``: chosen from the wafer (``waferflow.parallel.span``)

_ALIASES = {"mb": "microbatches", "m": "microbatches", "micro_batches": "microbatches"}

# the seed machine's plan words: what each implies (``gpipe=M`` also sets microbatches)
_SEED_WORDS = {"pipe": {"cut": "layer", "schedule": "gpipe"},
               "gpipe": {"cut": "layer", "schedule": "gpipe"}}  # fmt: skip


@dataclass(frozen=True)
class ParallelPlan:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    microbatches: int = 1
    schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    grad_reduce: GradReduce = GradReduce.ALL_REDUCE
    algo: CollectiveAlgo = CollectiveAlgo.AUTO
    recompute: bool = False
    layers: str = ""
    ways: int = 1
    group: Granularity = Granularity.MODULE
    overlap: bool = True
    span: int = SPAN_AUTO
    cut: StageCut = StageCut.BALANCED
    # --- memory sharding and expert parallelism (ZeRO, mixture of experts) ----------
    zero: int = 0
    ep: int = 1
    matmul: MatmulAlgo = MatmulAlgo.GATHER

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "microbatches", "ways", "ep"):
            v = getattr(self, name)
            # pp=0 with cut=layer: one stage per layer of the model, counted when applied
            low = 0 if name == "pp" and self.cut is StageCut.LAYER else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise PlanError(f"plan: {name} must be an integer >= {low}, got {short(v)}")
        if isinstance(self.span, bool) or not isinstance(self.span, int) or self.span < 0:
            raise PlanError(f"plan: span must be 'auto' or an integer >= 1, got {short(self.span)}")
        bad = sorted(set(self.layers) - {m.value for m in LayerMode})
        if bad:
            raise PlanError(
                f"plan: layers={short(self.layers)} has letter(s) {', '.join(map(repr, bad[:8]))}; use "
                "d (data parallel), t (tensor parallel), r (replicated) or s (single rank), "
                "one per layer"
            )
        if self.layers and (self.dp > 1 or self.tp > 1):
            raise PlanError(
                f"plan: layers={short(self.layers)} sets the parallelism per layer over `ways` "
                f"ranks; it cannot be combined with dp={self.dp}, tp={self.tp} (leave them at 1)"
            )
        if self.ways > 1 and not self.layers:
            raise PlanError(
                f"plan: ways={self.ways} is the degree of a per-layer pattern; give layers=... "
                "too (e.g. layers=ddt), or use dp= / tp= for a uniform plan"
            )
        self._check_zero()
        if self.ep > 1 and (self.layers or self.zero):
            what = "a per-layer pattern (layers=...)" if self.layers else f"zero={self.zero}"
            raise PlanError(f"plan: ep={self.ep} cannot be combined with {what}")

    def _check_zero(self) -> None:
        if isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3):
            raise PlanError(f"plan: zero must be 0, 1, 2 or 3 (the ZeRO stage), got {self.zero!r}")
        if not self.zero:
            return
        if self.layers:
            raise PlanError(
                f"plan: zero={self.zero} shards over dp; it cannot be combined with a per-layer "
                "pattern (layers=...)"
            )
        if self.dp < 2:
            raise PlanError(
                f"plan: zero={self.zero} shards the model state over the data-parallel replicas; "
                f"with dp={self.dp} there is nothing to shard over: use dp >= 2"
            )
        if self.grad_reduce is GradReduce.ROOT:
            raise PlanError(
                f"plan: zero={self.zero} reduce-scatters the gradients over dp; it cannot be "
                "combined with grad-reduce=root"
            )

    @property
    def ranks_per_stage(self) -> int:
        return self.ways if self.layers else self.dp * self.ep * self.tp

    @property
    def num_ranks(self) -> int:
        """Ranks of ``pp`` stages of ``ranks_per_stage`` (an upper bound when a
        per-layer plan has stages on one rank; ``StageAssignment.widths`` is exact)."""
        return self.ranks_per_stage * max(self.pp, 1)

    def mesh(self) -> Mesh:
        if self.layers:
            return Mesh((self.ways,), ((MeshAxis.DP, 0), (MeshAxis.TP, 0)), self.microbatches)
        if self.ep > 1:  # dp x ep x tp, tp minor: an expert group's ranks are neighbours
            axes = ((MeshAxis.DP, 0), (MeshAxis.EP, 1), (MeshAxis.TP, 2))
            return Mesh((self.dp, self.ep, self.tp), axes, self.microbatches)
        return Mesh((self.dp, self.tp), ((MeshAxis.DP, 0), (MeshAxis.TP, 1)), self.microbatches)

    def layer_modes(self) -> tuple[LayerMode, ...]:
        return tuple(LayerMode(c) for c in self.layers)

    def __str__(self) -> str:
        parts = []
        for f in fields(self):
            v = getattr(self, f.name)
            if v != f.default or f.name in ("dp", "tp", "pp", "microbatches"):
                text = "auto" if f.name == "span" and v == SPAN_AUTO else _spell(v)
                parts.append(f"{f.name.replace('_', '-')}={text}")
        return ",".join(parts)


def _spell(v: Any) -> str:
    if isinstance(v, Enum):
        return str(v.value)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


@dataclass(frozen=True)
class Mesh:
    """The ranks of one pipeline stage: a row-major grid of physical ``dims``; each
    logical axis (``axis_dim``) runs along one physical dimension. In a per-layer
    pattern both dp and tp run along the one dimension of ``ways`` ranks: a layer
    uses it one way or the other. ``mb`` is not physical (micro-batches take turns)."""

    dims: tuple[int, ...]
    axis_dim: tuple[tuple[MeshAxis, int], ...]
    microbatches: int = 1

    @property
    def size(self) -> int:
        return math.prod(self.dims)

    def degree(self, axis: MeshAxis) -> int:
        if axis is MeshAxis.MB:
            return self.microbatches
        for a, d in self.axis_dim:
            if a is axis:
                return self.dims[d]
        return 1

    def degrees(self) -> dict[MeshAxis, int]:
        return {a: self.degree(a) for a in MeshAxis}

    @property
    def aliased(self) -> bool:
        """Whether dp and tp share a physical dimension (per-layer patterns)."""
        dims = [d for _, d in self.axis_dim]
        return len(dims) != len(set(dims))

    def coords(self, rank: int) -> tuple[int, ...]:
        out = []
        for size in reversed(self.dims):
            rank, r = divmod(rank, size)
            out.append(r)
        return tuple(reversed(out))

    def rank_of(self, coords: tuple[int, ...]) -> int:
        r = 0
        for c, size in zip(coords, self.dims, strict=True):
            r = r * size + c
        return r

    def index(self, rank: int, axis: MeshAxis) -> int:
        """The rank's position along ``axis`` (0 for an axis of degree 1 or ``mb``)."""
        for a, d in self.axis_dim:
            if a is axis:
                return self.coords(rank)[d]
        return 0

    def group(self, rank: int, axis: MeshAxis) -> tuple[int, ...]:
        """The ranks that differ from ``rank`` only along ``axis``, in axis order."""
        for a, d in self.axis_dim:
            if a is axis:
                base = list(self.coords(rank))
                out = []
                for i in range(self.dims[d]):
                    base[d] = i
                    out.append(self.rank_of(tuple(base)))
                return tuple(out)
        return (rank,)

    def groups(self, axis: MeshAxis) -> tuple[tuple[int, ...], ...]:
        """Every group along ``axis``, each once, ordered by its first rank."""
        seen: dict[tuple[int, ...], None] = {}
        for r in range(self.size):
            seen.setdefault(self.group(r, axis), None)
        return tuple(seen)


def _norm_key(key: str) -> str:
    k = key.strip().lower().replace("-", "_")
    return _ALIASES.get(k, k)


_FIELDS = {f.name: f for f in fields(ParallelPlan)}


def _convert(key: str, raw: str, default: Any) -> Any:
    text = raw.strip()
    if key.strip().lower() == "span":
        if text.lower() == "auto":
            return SPAN_AUTO
        if text.isascii() and text.isdigit() and not text.strip("0"):  # 0: auto only inside
            raise PlanError(f"plan: span={short(raw)} must be 'auto' or an integer >= 1")
    if isinstance(default, bool):
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise PlanError(f"plan: {key}={short(raw)} must be true or false")
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            what = "'auto' or an integer" if key.strip().lower() == "span" else "an integer"
            raise PlanError(f"plan: {key}={short(raw)} must be {what}") from None
    if isinstance(default, Enum):
        cls = type(default)
        try:
            return cls(text.lower())
        except ValueError:
            names = ", ".join(str(m.value) for m in cls)
            raise PlanError(f"plan: {key}={short(raw)} is not one of {names}") from None
    return text


def parse_plan(text: str | ParallelPlan) -> ParallelPlan:
    """Parse ``"dp=2,tp=4,pp=2,microbatches=4"`` (or pass a ``ParallelPlan`` through).

    Raises ``PlanError`` naming the bad key or value."""
    if isinstance(text, ParallelPlan):
        return text
    if not isinstance(text, str):
        raise PlanError(f"plan must be a string like 'dp=2,tp=4', got {type(text).__name__}")
    values: dict[str, Any] = {}
    implied: dict[str, str] = {}
    for item in (t for t in text.replace(";", ",").split(",") if t.strip()):
        key, eq, raw = item.partition("=")
        name = _norm_key(key)
        if name in _SEED_WORDS:  # pipe, gpipe=M
            implied.update(_SEED_WORDS[name])
            if name == "gpipe":
                if not eq:
                    raise PlanError("plan: gpipe needs a number of micro-batches (gpipe=M)")
                key, raw, name = "gpipe", raw, "microbatches"
            elif eq:
                raise PlanError(f"plan: pipe takes no value, got {short(item.strip())}")
            else:
                continue
        if name not in _FIELDS:
            known = [f.replace("_", "-") for f in _FIELDS]
            close = difflib.get_close_matches(name.replace("_", "-")[:100], known, n=1)
            hint = f"; did you mean {close[0]}?" if close else "."
            raise PlanError(
                f"plan: unknown key {short(key.strip())} in {short(text)}{hint} Known keys: "
                f"{', '.join(known)}"
            )
        if not eq:
            if isinstance(_FIELDS[name].default, bool):
                raw = "true"
            else:
                raise PlanError(f"plan: {short(key.strip())} needs a value ({key.strip()}=...)")
        if name in values:
            raise PlanError(f"plan: {short(key.strip())} is given twice in {short(text)}")
        values[name] = _convert(key.strip(), raw, _FIELDS[name].default)
    for name, raw in implied.items():
        value = _convert(name, raw, _FIELDS[name].default)
        if values.setdefault(name, value) != value:
            raise PlanError(
                f"plan: {short(text)} asks for {name.replace('_', '-')}={_spell(values[name])}, but "
                f"pipe / gpipe=M mean {name.replace('_', '-')}={raw}"
            )
    if values.get("cut") is StageCut.LAYER and "pp" not in values:
        values["pp"] = 0  # one stage per layer, counted from the model
    return ParallelPlan(**values)


def plan_grid(
    dps: tuple[int, ...], tps: tuple[int, ...], pps: tuple[int, ...], mbs: tuple[int, ...],
    **common: Any,
) -> list[ParallelPlan]:  # fmt: skip
    """Every combination of the given degrees (for sweeps and benchmarks)."""
    base = ParallelPlan(**common)
    return [
        replace(base, dp=d, tp=t, pp=p, microbatches=m)
        for d, t, p, m in itertools.product(dps, tps, pps, mbs)
    ]


__all__ = [
    "SPAN_AUTO",
    "CollectiveAlgo",
    "GradReduce",
    "Granularity",
    "LayerMode",
    "MatmulAlgo",
    "Mesh",
    "ParallelPlan",
    "PipelineSchedule",
    "StageCut",
    "parse_plan",
    "plan_grid",
]

"""Seed plans and their text form: ``pipe``, ``gpipe=M``, ``layers=<d|t...>,ways=R``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from waferflow.backend_amcoda.layers import Cnn
from waferflow.backend_amcoda.program import MAX_OPERANDS
from waferflow.errors import PlanError


class PlanKind(Enum):
    PIPE = "pipe"  # one actor per layer
    GPIPE = "gpipe"  # one actor per layer, M micro-batches, GPipe flush
    LAYERS = "layers"  # per conv layer: data- or tensor-parallel over R actors


class Par(Enum):
    """How one conv layer is spread over its R actors."""

    DATA = "d"  # replicas, B/R samples each; weight gradients reduced to replica 0
    TENSOR = "t"  # output-channel parts, the whole batch each; partial input gradients summed


@dataclass(frozen=True, slots=True)
class SeedPlan:
    """A parallel plan for the seed machine."""

    kind: PlanKind
    micro_batches: int = 1
    pattern: tuple[Par, ...] = ()
    ways: int = 1

    def __str__(self) -> str:
        if self.kind is PlanKind.PIPE:
            return "pipe"
        if self.kind is PlanKind.GPIPE:
            return f"gpipe={self.micro_batches}"
        return f"layers={''.join(p.value for p in self.pattern)},ways={self.ways}"

    @property
    def short_name(self) -> str:
        """``pipe``, ``gpipe2``, ``ddt4``: the names used in tables."""
        if self.kind is PlanKind.PIPE:
            return "pipe"
        if self.kind is PlanKind.GPIPE:
            return f"gpipe{self.micro_batches}"
        return f"{''.join(p.value for p in self.pattern)}{self.ways}"

    def layer_par(self, n_convs: int) -> tuple[Par, ...]:
        """The per-conv-layer pattern (all data-parallel with R = 1 for pipelines)."""
        if self.kind is PlanKind.LAYERS:
            return self.pattern
        return (Par.DATA,) * n_convs

    @property
    def layer_ways(self) -> int:
        return self.ways if self.kind is PlanKind.LAYERS else 1


_SYNTAX = "use 'pipe', 'gpipe=M' (M = 1..4) or 'layers=<d|t per conv layer>,ways=R'"


def _positive_int(key: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise PlanError(f"{key}={value!r} is not an integer; {_SYNTAX}") from None
    if n < 1:
        raise PlanError(f"{key} must be at least 1, got {n}")
    return n


def parse_seed_plan(text: str, cnn: Cnn | None = None) -> SeedPlan:
    """Parse a plan string. With ``cnn`` also check it against the model (pattern
    length, degrees that divide the batch and the channels)."""
    s = text.strip().lower().replace(" ", "")
    if s == "pipe":
        plan = SeedPlan(PlanKind.PIPE)
    elif s.startswith("gpipe"):
        key, eq, value = s.partition("=")
        if key != "gpipe" or not eq:
            raise PlanError(f"cannot read plan {text!r}: {_SYNTAX}")
        m = _positive_int("gpipe", value)
        if m > MAX_OPERANDS:
            raise PlanError(
                f"gpipe={m}: at most {MAX_OPERANDS} micro-batches, because the weight-gradient "
                f"ADD takes at most {MAX_OPERANDS} operands"
            )
        plan = SeedPlan(PlanKind.GPIPE, micro_batches=m)
    elif s.startswith(("layers=", "ways=")):
        fields: dict[str, str] = {}
        for part in s.split(","):
            key, eq, value = part.partition("=")
            if not eq or key not in ("layers", "ways") or key in fields:
                raise PlanError(f"cannot read plan {text!r}: {_SYNTAX}")
            fields[key] = value
        if set(fields) != {"layers", "ways"}:
            raise PlanError(f"plan {text!r} needs both layers= and ways=: {_SYNTAX}")
        letters = fields["layers"]
        bad = sorted({c for c in letters if c not in "dt"})
        if not letters or bad:
            raise PlanError(
                f"layers={letters!r}: give one letter per conv layer, d (data-parallel) "
                f"or t (tensor-parallel)"
            )
        plan = SeedPlan(
            PlanKind.LAYERS,
            pattern=tuple(Par(c) for c in letters),
            ways=_positive_int("ways", fields["ways"]),
        )
    else:
        raise PlanError(f"cannot read plan {text!r}: {_SYNTAX}")
    if cnn is not None:
        check_plan(plan, cnn)
    return plan


def check_plan(plan: SeedPlan, cnn: Cnn) -> None:
    """Refuse a plan the model cannot take (before any program is built)."""
    convs = cnn.convs
    if plan.kind is PlanKind.GPIPE and cnn.batch % plan.micro_batches:
        raise PlanError(
            f"gpipe={plan.micro_batches} does not divide the batch of {cnn.batch} into "
            f"equal micro-batches"
        )
    if plan.kind is not PlanKind.LAYERS:
        return
    if len(plan.pattern) != len(convs):
        raise PlanError(
            f"layers={''.join(p.value for p in plan.pattern)} has {len(plan.pattern)} letters "
            f"but the model has {len(convs)} conv layers"
        )
    r = plan.ways
    for par, conv in zip(plan.pattern, convs, strict=True):
        name = conv.name or "a conv layer"
        if par is Par.DATA and cnn.batch % r:
            raise PlanError(
                f"ways={r} does not divide the batch of {cnn.batch} for the data-parallel {name}"
            )
        if par is Par.TENSOR and conv.cout % r:
            raise PlanError(
                f"ways={r} does not divide the {conv.cout} output channels of the "
                f"tensor-parallel {name}"
            )

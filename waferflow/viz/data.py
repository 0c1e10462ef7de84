"""What the pictures draw: small frozen dataclasses of plain data.

These views know nothing about the simulator or the IR, so a plot can be made from a
hand-written example, a saved JSON result or the adapters in ``waferflow.viz.adapters``.
Grids are ``rows x cols`` cores numbered row-major (``core = row * cols + col``),
coordinates are ``(row, col)`` and row 0 is drawn at the top. This module does not
import matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import numpy as np

from waferflow.errors import WaferflowError

Coord = tuple[int, int]

UNASSIGNED = -1  # label index of a core that runs nothing
# Above this many cores on a side the plots draw images and regions, not single cores.
DETAIL_LIMIT = 64
PHASES = ("fwd", "bwd", "opt", "")
_UTIL_SLACK = 1e-6  # utilisations a rounding error above 1 are accepted


class VizError(WaferflowError):
    """A view that cannot be drawn (bad sizes, coordinates out of the grid, ...) or an
    output path with an unsupported suffix."""


def _check_grid(rows: int, cols: int, die_rows: int, die_cols: int, what: str) -> None:
    if rows < 1 or cols < 1:
        raise VizError(f"{what}: grid must be at least 1x1, got {rows}x{cols}")
    if not 1 <= die_rows <= rows or not 1 <= die_cols <= cols:
        raise VizError(
            f"{what}: die grid {die_rows}x{die_cols} must be between 1x1 and the core grid "
            f"{rows}x{cols}"
        )


def _check_coord(coord: Coord, rows: int, cols: int, what: str) -> None:
    r, c = coord
    if not (0 <= r < rows and 0 <= c < cols):
        raise VizError(f"{what}: coordinate {coord} is outside the {rows}x{cols} grid")


@dataclass(frozen=True, slots=True)
class Region:
    """A named rectangle of cores, rows ``r0 .. r1 - 1`` and columns ``c0 .. c1 - 1``
    (half-open, like a slice)."""

    name: str
    r0: int
    c0: int
    r1: int
    c1: int

    def __post_init__(self) -> None:
        if self.r1 <= self.r0 or self.c1 <= self.c0:
            raise VizError(
                f"region {self.name!r}: empty rectangle rows [{self.r0}, {self.r1}) "
                f"cols [{self.c0}, {self.c1}); r1 and c1 are exclusive bounds"
            )


@dataclass(frozen=True)
class PlacementView:
    """Which label (module, stage, op group) each core runs.

    ``core_label[core]`` is an index into ``labels`` or ``UNASSIGNED`` (-1).
    """

    rows: int
    cols: int
    core_label: tuple[int, ...]
    labels: tuple[str, ...]
    die_rows: int = 1
    die_cols: int = 1
    dead: frozenset[Coord] = field(default_factory=frozenset)
    regions: tuple[Region, ...] = ()
    title: str = "placement"
    # per core (row-major), text written in its cell on grids small enough (e.g. its
    # rank, "dp1 tp3"); empty: each cell shows its label's number
    cell_text: tuple[str, ...] = ()
    unit: str = "core"  # what a cell is: "core", or "node" on a coarse view

    def __post_init__(self) -> None:
        _check_grid(self.rows, self.cols, self.die_rows, self.die_cols, "placement view")
        if len(self.core_label) != self.rows * self.cols:
            raise VizError(
                f"placement view: core_label has {len(self.core_label)} entries, expected "
                f"rows * cols = {self.rows * self.cols}"
            )
        if self.cell_text and len(self.cell_text) != self.rows * self.cols:
            raise VizError(
                f"placement view: cell_text has {len(self.cell_text)} entries, expected "
                f"rows * cols = {self.rows * self.cols} (or none)"
            )
        if self.core_label:
            arr = np.asarray(self.core_label, dtype=np.int64)
            lo, hi = int(arr.min()), int(arr.max())
            if lo < UNASSIGNED or hi >= len(self.labels):
                raise VizError(
                    f"placement view: label indices span [{lo}, {hi}] but there are "
                    f"{len(self.labels)} labels (use -1 for an unassigned core)"
                )
        for coord in self.dead:
            _check_coord(coord, self.rows, self.cols, "placement view dead core")
        for reg in self.regions:
            if reg.r0 < 0 or reg.c0 < 0 or reg.r1 > self.rows or reg.c1 > self.cols:
                raise VizError(
                    f"placement view: region {reg.name!r} [{reg.r0}:{reg.r1}, "
                    f"{reg.c0}:{reg.c1}] leaves the {self.rows}x{self.cols} grid"
                )

    @classmethod
    def from_assignment(
        cls,
        rows: int,
        cols: int,
        assignment: Mapping[int, str] | Mapping[Coord, str],
        *,
        labels: Sequence[str] | None = None,
        die_rows: int = 1,
        die_cols: int = 1,
        dead: Iterable[Coord] = (),
        regions: Iterable[Region] = (),
        title: str = "placement",
    ) -> PlacementView:
        """Build a view from ``{core id or (row, col): label name}``.

        ``labels`` fixes the legend order (and so the colours: give the same list to
        compare two placements); by default labels are numbered in order of their first
        core, so the colours do not depend on dict order."""
        by_core: dict[int, str] = {}
        for key, name in assignment.items():
            if isinstance(key, tuple):
                _check_coord(key, rows, cols, "placement assignment")
                core = key[0] * cols + key[1]
            elif 0 <= key < rows * cols:
                core = key
            else:
                raise VizError(f"placement assignment: core {key} is outside a {rows}x{cols} grid")
            by_core[core] = name
        index: dict[str, int] = {name: i for i, name in enumerate(labels or ())}
        if labels is not None and len(index) != len(labels):
            raise VizError("placement assignment: labels lists a name twice")
        out = [UNASSIGNED] * (rows * cols)
        for core in sorted(by_core):
            name = by_core[core]
            if labels is not None and name not in index:
                raise VizError(
                    f"placement assignment: core {core} has label {name!r}, which is not in "
                    "labels; add it or leave labels out"
                )
            out[core] = index.setdefault(name, len(index))
        return cls(
            rows=rows,
            cols=cols,
            core_label=tuple(out),
            labels=tuple(index),
            die_rows=die_rows,
            die_cols=die_cols,
            dead=frozenset(dead),
            regions=tuple(regions),
            title=title,
        )

    def label_array(self) -> np.ndarray:
        """The labels as a ``rows x cols`` int array (-1 = unassigned)."""
        return np.asarray(self.core_label, dtype=np.int32).reshape(self.rows, self.cols)


@dataclass(frozen=True, slots=True)
class LinkLoad:
    """Traffic on one direction of one link over a step."""

    src: Coord
    dst: Coord
    utilisation: float  # busy time / step time, 0..1
    bytes: int
    is_d2d: bool = False  # crosses a die boundary

    def __post_init__(self) -> None:
        u = self.utilisation
        if not (math.isfinite(u) and 0.0 <= u <= 1.0 + _UTIL_SLACK):
            raise VizError(f"link {self.src}->{self.dst}: utilisation {u} is not in [0, 1]")
        if self.bytes < 0:
            raise VizError(f"link {self.src}->{self.dst}: negative byte count {self.bytes}")
        if self.src == self.dst:
            raise VizError(f"link {self.src}->{self.dst}: a link joins two different cores")


@dataclass(frozen=True)
class LinkView:
    rows: int
    cols: int
    links: tuple[LinkLoad, ...]
    die_rows: int = 1
    die_cols: int = 1
    dead: frozenset[Coord] = field(default_factory=frozenset)
    title: str = "link utilisation"
    unit: str = "core"  # what a cell is: "core", or "node" on a coarse view

    def __post_init__(self) -> None:
        _check_grid(self.rows, self.cols, self.die_rows, self.die_cols, "link view")
        for link in self.links:
            _check_coord(link.src, self.rows, self.cols, "link view link source")
            _check_coord(link.dst, self.rows, self.cols, "link view link destination")
        for coord in self.dead:
            _check_coord(coord, self.rows, self.cols, "link view dead core")


class SpanKind(Enum):
    COMPUTE = "compute"
    SEND = "send"
    RECV = "recv"
    WAIT = "wait"  # stalled: waiting for an input or a buffer (pipeline bubble)
    IDLE = "idle"  # nothing scheduled


@dataclass(frozen=True, slots=True)
class Span:
    """One interval of activity on a track (a core, an actor or a stage)."""

    track: int  # index into TimelineView.tracks
    start_s: float
    end_s: float
    kind: SpanKind
    label: str = ""
    phase: str = ""  # 'fwd', 'bwd', 'opt' or '' when unknown

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)):
            raise VizError(f"span {self.label!r}: start and end must be finite seconds")
        if self.end_s < self.start_s:
            raise VizError(
                f"span {self.label!r}: ends ({self.end_s}) before it starts ({self.start_s})"
            )
        if self.phase not in PHASES:
            raise VizError(f"span {self.label!r}: phase {self.phase!r} is not one of {PHASES}")

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


KINDS = tuple(SpanKind)  # a kind's code in ``SpanColumns.kind``


class SpanColumns(Sequence[Span]):
    """Spans as columns of arrays: ``track`` (index), ``start_s``, ``end_s``, ``kind``
    (code: index into ``KINDS``) and ``phase`` (index into ``PHASES``); ``label(i)``
    names span i. A plan's timeline has a span per actor, message end and wait (10^5-10^6
    on a big plan): the plots read the arrays, and a ``Span`` is made only when one is
    asked for (``view.spans[i]``, iteration)."""

    __slots__ = ("_label", "end_s", "kind", "phase", "start_s", "track")

    def __init__(
        self,
        track: np.ndarray,
        start_s: np.ndarray,
        end_s: np.ndarray,
        kind: np.ndarray,
        phase: np.ndarray,
        label: Callable[[int], str] | None = None,
    ) -> None:
        self.track = np.asarray(track, dtype=np.int64)
        self.start_s = np.asarray(start_s, dtype=np.float64)
        self.end_s = np.asarray(end_s, dtype=np.float64)
        self.kind = np.asarray(kind, dtype=np.int8)
        self.phase = np.asarray(phase, dtype=np.int8)
        self._label = label
        n = len(self.track)
        if not all(len(a) == n for a in (self.start_s, self.end_s, self.kind, self.phase)):
            raise VizError("span columns: track, start, end, kind and phase differ in length")
        if n and not (np.isfinite(self.start_s).all() and np.isfinite(self.end_s).all()):
            raise VizError("span columns: start and end must be finite seconds")
        bad = np.flatnonzero(self.end_s < self.start_s)
        if len(bad):
            i = int(bad[0])
            raise VizError(
                f"span {self.label(i)!r}: ends ({self.end_s[i]}) before it starts "
                f"({self.start_s[i]})"
            )
        if n and not (self.kind.min() >= 0 and self.kind.max() < len(KINDS)):
            raise VizError(f"span columns: kind codes must be in [0, {len(KINDS)})")
        if n and not (self.phase.min() >= 0 and self.phase.max() < len(PHASES)):
            raise VizError(f"span columns: phase codes must be in [0, {len(PHASES)})")

    @classmethod
    def of(cls, spans: Sequence[Span]) -> SpanColumns:
        """The columns of any sequence of spans (itself when it is one)."""
        if isinstance(spans, SpanColumns):
            return spans
        kinds = {k: i for i, k in enumerate(KINDS)}
        labels = [s.label for s in spans]
        return cls(
            np.fromiter((s.track for s in spans), np.int64, count=len(spans)),
            np.fromiter((s.start_s for s in spans), np.float64, count=len(spans)),
            np.fromiter((s.end_s for s in spans), np.float64, count=len(spans)),
            np.fromiter((kinds[s.kind] for s in spans), np.int8, count=len(spans)),
            np.fromiter((PHASES.index(s.phase) for s in spans), np.int8, count=len(spans)),
            labels.__getitem__,
        )

    @property
    def duration_s(self) -> np.ndarray:
        return self.end_s - self.start_s

    def label(self, i: int) -> str:
        return self._label(i) if self._label is not None else ""

    def __len__(self) -> int:
        return len(self.track)

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return Span(
            int(self.track[i]),
            float(self.start_s[i]),
            float(self.end_s[i]),
            KINDS[self.kind[i]],
            self.label(i),
            PHASES[self.phase[i]],
        )

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same spans (a tuple of ``Span`` included)."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"SpanColumns({len(self)} spans)"


@dataclass(frozen=True)
class TimelineView:
    """Spans on named tracks. ``groups`` (e.g. pipeline stages) and ``track_group``
    (the group index of each track) keep related tracks together: a plot that cannot
    show every track samples within each group and never drops a whole group."""

    tracks: tuple[str, ...]
    spans: Sequence[Span]  # a tuple, or ``SpanColumns`` for many
    step_time_s: float
    title: str = "timeline"
    groups: tuple[str, ...] = ()
    track_group: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.tracks:
            raise VizError("timeline view: no tracks to draw")
        if self.groups or self.track_group:
            if len(self.track_group) != len(self.tracks):
                raise VizError(
                    f"timeline view: track_group has {len(self.track_group)} entries for "
                    f"{len(self.tracks)} tracks"
                )
            if min(self.track_group) < 0 or max(self.track_group) >= len(self.groups):
                raise VizError(
                    f"timeline view: track_group indices must be in [0, {len(self.groups)})"
                )
        if not (math.isfinite(self.step_time_s) and self.step_time_s >= 0):
            raise VizError(f"timeline view: step time {self.step_time_s} is not >= 0 seconds")
        track = self.columns.track
        bad = np.flatnonzero((track < 0) | (track >= len(self.tracks)))
        if len(bad):
            span = self.spans[int(bad[0])]
            raise VizError(
                f"timeline view: span {span.label!r} is on track {span.track} but there "
                f"are {len(self.tracks)} tracks"
            )

    @cached_property
    def columns(self) -> SpanColumns:
        """The spans as arrays (what the plot reads)."""
        return SpanColumns.of(self.spans)

    def grouped(self) -> list[list[int]]:
        """Track indices per group, in group order (one group of all without groups)."""
        if not self.groups:
            return [list(range(len(self.tracks)))]
        out: list[list[int]] = [[] for _ in self.groups]
        for t, g in enumerate(self.track_group):
            out[g].append(t)
        return out


@dataclass(frozen=True)
class MemoryView:
    """Peak SRAM use per core against the per-core capacity."""

    rows: int
    cols: int
    used_bytes: tuple[int, ...]  # per core, row-major
    capacity_bytes: int
    dead: frozenset[Coord] = field(default_factory=frozenset)
    die_rows: int = 1
    die_cols: int = 1
    title: str = "memory"
    # per-core capacities when they differ (a coarse node with dead fine cores has less);
    # empty means every core has capacity_bytes
    core_capacity: tuple[int, ...] = ()
    unit: str = "core"  # what a cell is: "core", or "node" on a coarse view

    def __post_init__(self) -> None:
        _check_grid(self.rows, self.cols, self.die_rows, self.die_cols, "memory view")
        if len(self.used_bytes) != self.rows * self.cols:
            raise VizError(
                f"memory view: used_bytes has {len(self.used_bytes)} entries, expected "
                f"rows * cols = {self.rows * self.cols}"
            )
        if self.capacity_bytes <= 0:
            raise VizError(f"memory view: capacity_bytes must be > 0, got {self.capacity_bytes}")
        if self.used_bytes and min(self.used_bytes) < 0:
            raise VizError("memory view: used_bytes has a negative entry")
        if self.core_capacity and len(self.core_capacity) != self.rows * self.cols:
            raise VizError(
                f"memory view: core_capacity has {len(self.core_capacity)} entries, expected "
                f"rows * cols = {self.rows * self.cols} (or none)"
            )
        if self.core_capacity and min(self.core_capacity) <= 0:
            raise VizError("memory view: core_capacity entries must be > 0")
        for coord in self.dead:
            _check_coord(coord, self.rows, self.cols, "memory view dead core")

    def fraction_array(self) -> np.ndarray:
        """Use / capacity as a ``rows x cols`` float array."""
        used = np.asarray(self.used_bytes, dtype=np.float64).reshape(self.rows, self.cols)
        if self.core_capacity:
            cap = np.asarray(self.core_capacity, dtype=np.float64).reshape(self.rows, self.cols)
            return used / cap
        return used / float(self.capacity_bytes)


@dataclass(frozen=True)
class Table:
    """A table for the HTML report: a caption, column names, rows of text, notes under
    it, and optionally one row to emphasise (e.g. the placement that was kept)."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()
    highlight: int = -1

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise VizError(
                    f"table {self.caption!r}: row {i} has {len(row)} cells for "
                    f"{len(self.columns)} columns"
                )

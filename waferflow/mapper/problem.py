"""Plain-data placement problems: the grid, op groups, flows, and the two problem kinds.

Everything here is numbers, tuples and small frozen dataclasses, so that a pass can
build a problem from a plan and the solvers can be tested on their own. Coordinates
follow the wafer: ``(row, col)``, cores numbered row-major (``core = row * cols + col``).

Validation happens in ``__post_init__`` and raises :class:`PlanError` with one message
that names the culprit (a group, an actor, a flow) and the numbers involved.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import numpy as np

from waferflow.errors import PlanError

Coord = tuple[int, int]

_MAX_ISLANDS_SHOWN = 4
_MAX_COORDS_SHOWN = 6


def fmt_bytes(n: float) -> str:
    """``41943040`` -> ``'40.0 MiB (41943040 bytes)'``: readable and exact."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    v = float(n)
    i = 0
    while v >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    return f"{v:.1f} {units[i]} ({int(n)} bytes)"


@dataclass(frozen=True)
class Grid:
    """A ``rows x cols`` mesh of cores, some dead, cut into ``die_rows x die_cols`` dies.

    Row ``r`` lies on die row ``r * die_rows // rows`` (and likewise for columns), so
    uneven cuts are allowed; the usual case divides evenly.
    """

    rows: int
    cols: int
    dead: frozenset[Coord] = field(default_factory=frozenset)
    die_rows: int = 1
    die_cols: int = 1

    def __post_init__(self) -> None:
        if self.rows < 1 or self.cols < 1:
            raise PlanError(
                f"grid must have at least one row and column, got {self.rows}x{self.cols}"
            )
        if not 1 <= self.die_rows <= self.rows or not 1 <= self.die_cols <= self.cols:
            raise PlanError(
                f"grid {self.rows}x{self.cols} cannot be cut into {self.die_rows}x{self.die_cols} dies; "
                "use 1 <= die_rows <= rows and 1 <= die_cols <= cols"
            )
        bad = sorted(c for c in self.dead if not (0 <= c[0] < self.rows and 0 <= c[1] < self.cols))
        if bad:
            raise PlanError(
                f"dead cores outside the {self.rows}x{self.cols} grid: {bad[:_MAX_COORDS_SHOWN]}"
            )
        if len(self.dead) == self.rows * self.cols:
            raise PlanError(f"every core of the {self.rows}x{self.cols} grid is dead")

    # --- numbering ----------------------------------------------------------------
    @property
    def num_cores(self) -> int:
        return self.rows * self.cols

    @property
    def num_alive(self) -> int:
        return self.num_cores - len(self.dead)

    def core_id(self, coord: Coord) -> int:
        return coord[0] * self.cols + coord[1]

    def coord(self, core: int) -> Coord:
        return divmod(core, self.cols)

    def is_alive(self, coord: Coord) -> bool:
        return coord not in self.dead

    @cached_property
    def alive_cores(self) -> tuple[int, ...]:
        """Alive core ids in row-major order."""
        return tuple(c for c in range(self.num_cores) if self.coord(c) not in self.dead)

    @cached_property
    def alive_mask(self) -> np.ndarray:
        m = np.ones((self.rows, self.cols), dtype=bool)
        for r, c in self.dead:
            m[r, c] = False
        m.setflags(write=False)
        return m

    @cached_property
    def _prefix(self) -> np.ndarray:
        p = np.zeros((self.rows + 1, self.cols + 1), dtype=np.int64)
        p[1:, 1:] = np.cumsum(np.cumsum(self.alive_mask, axis=0), axis=1)
        p.setflags(write=False)
        return p

    def alive_in(self, row: int, col: int, height: int, width: int) -> int:
        """Number of alive cores in the rectangle (O(1) from 2D prefix sums)."""
        p = self._prefix
        r1, c1 = row + height, col + width
        return int(p[r1, c1] - p[row, c1] - p[r1, col] + p[row, col])

    # --- dies -------------------------------------------------------------------------
    def die_of_row(self, row: int) -> int:
        return row * self.die_rows // self.rows

    def die_of_col(self, col: int) -> int:
        return col * self.die_cols // self.cols

    def die_of(self, coord: Coord) -> tuple[int, int]:
        return self.die_of_row(coord[0]), self.die_of_col(coord[1])

    def die_crossings(self, a: Coord, b: Coord) -> int:
        """Die boundaries a dimension-order route from ``a`` to ``b`` crosses."""
        return abs(self.die_of_row(a[0]) - self.die_of_row(b[0])) + abs(
            self.die_of_col(a[1]) - self.die_of_col(b[1])
        )

    # --- connectivity -----------------------------------------------------------------
    def islands(self) -> list[list[Coord]]:
        """Connected components of the alive cores (4-neighbour), largest first."""
        seen = ~self.alive_mask.copy()
        out: list[list[Coord]] = []
        for r in range(self.rows):
            for c in range(self.cols):
                if seen[r, c]:
                    continue
                seen[r, c] = True
                comp = [(r, c)]
                todo = deque(comp)
                while todo:
                    y, x = todo.popleft()
                    for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                        if 0 <= ny < self.rows and 0 <= nx < self.cols and not seen[ny, nx]:
                            seen[ny, nx] = True
                            comp.append((ny, nx))
                            todo.append((ny, nx))
                out.append(sorted(comp))
        out.sort(key=lambda comp: (-len(comp), comp[0]))
        return out

    def require_connected(self) -> None:
        """Messages must reach every alive core: dead cores may not cut the mesh apart."""
        isl = self.islands()
        if len(isl) <= 1:
            return
        shown = []
        for comp in isl[:_MAX_ISLANDS_SHOWN]:
            more = f" ... ({len(comp)} cores)" if len(comp) > _MAX_COORDS_SHOWN else ""
            shown.append(f"{comp[:_MAX_COORDS_SHOWN]}{more}")
        rest = (
            f"; and {len(isl) - _MAX_ISLANDS_SHOWN} more" if len(isl) > _MAX_ISLANDS_SHOWN else ""
        )
        raise PlanError(
            f"the dead cores split the alive cores of the {self.rows}x{self.cols} grid into "
            f"{len(isl)} islands: " + "; ".join(shown) + rest + ". Place on one island "
            "(a smaller grid) or mark fewer cores dead"
        )


@dataclass(frozen=True)
class Rect:
    """A rectangle of cores: top-left ``(row, col)``, ``height`` rows by ``width`` columns."""

    row: int
    col: int
    height: int
    width: int

    @property
    def area(self) -> int:
        return self.height * self.width

    @property
    def centre2(self) -> tuple[int, int]:
        """Twice the geometric centre (row, col): integral for every rectangle."""
        return 2 * self.row + self.height, 2 * self.col + self.width

    @property
    def centre_core(self) -> Coord:
        """The core at (or just above-left of) the geometric centre."""
        r2, c2 = self.centre2
        return (r2 - 1) // 2, (c2 - 1) // 2

    def cores(self) -> list[Coord]:
        return [
            (r, c)
            for r in range(self.row, self.row + self.height)
            for c in range(self.col, self.col + self.width)
        ]

    def overlaps(self, other: Rect) -> bool:
        return (
            self.row < other.row + other.height
            and other.row < self.row + self.height
            and self.col < other.col + other.width
            and other.col < self.col + self.width
        )

    def transposed(self) -> Rect:
        return Rect(self.col, self.row, self.width, self.height)


def centre_distance(a: Rect, b: Rect) -> float:
    """Manhattan distance between rectangle centres, in hops (may end in .5)."""
    (ar, ac), (br, bc) = a.centre2, b.centre2
    return (abs(ar - br) + abs(ac - bc)) / 2


@dataclass(frozen=True)
class Group:
    """An op group (e.g. a pipeline stage) to receive a rectangle of cores."""

    name: str
    work: float  # FLOPs per step
    mem_bytes: int  # bytes it must hold, spread over its cores


@dataclass(frozen=True)
class Flow:
    """``bytes`` sent per step from group (or actor) ``src`` to ``dst``."""

    src: int
    dst: int
    bytes: float


class DeadCores(Enum):
    """How a floorplan treats dead cores inside a rectangle."""

    OBSTACLE = "obstacle"  # rectangles avoid dead cores entirely
    IDLE = "idle"  # rectangles may contain dead cores, which hold and compute nothing


@dataclass(frozen=True)
class ObjectiveWeights:
    """Weights of the floorplan objective's three terms.

    objective = balance * T + traffic * sum(bytes x hops) + d2d * sum(bytes x die crossings)

    with ``T`` the slowest group's compute time in seconds. With :meth:`seconds` every
    term is in seconds.
    """

    balance: float
    traffic: float
    d2d: float

    def __post_init__(self) -> None:
        for name in ("balance", "traffic", "d2d"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise PlanError(f"objective weight {name} must be finite and >= 0, got {v}")
        if self.balance == self.traffic == self.d2d == 0:
            raise PlanError("all objective weights are zero; give at least one a positive weight")

    @classmethod
    def seconds(
        cls, link_bandwidth: float, d2d_bandwidth: float | None = None, parallel_links: int = 1
    ) -> ObjectiveWeights:
        """Weights that price traffic as link time: a byte-hop costs ``1 / (bw x links)``
        seconds (``parallel_links`` links carry a flow side by side), and a die crossing
        adds the difference between the die-to-die and the on-die link time."""
        if link_bandwidth <= 0 or parallel_links < 1:
            raise PlanError("link_bandwidth must be > 0 and parallel_links >= 1")
        per_hop = 1.0 / (link_bandwidth * parallel_links)
        extra = 0.0
        if d2d_bandwidth is not None:
            if d2d_bandwidth <= 0:
                raise PlanError("d2d_bandwidth must be > 0")
            extra = max(0.0, 1.0 / (d2d_bandwidth * parallel_links) - per_hop)
        return cls(balance=1.0, traffic=per_hop, d2d=extra)


def _check_flows(flows: tuple[Flow, ...], n: int, what: str, names: tuple[str, ...]) -> None:
    for i, f in enumerate(flows):
        if not (0 <= f.src < n and 0 <= f.dst < n):
            raise PlanError(f"flow {i} ({f.src} -> {f.dst}) names a {what} outside 0..{n - 1}")
        if not (math.isfinite(f.bytes) and f.bytes >= 0):
            raise PlanError(
                f"flow {i} ({names[f.src]} -> {names[f.dst]}) has invalid size {f.bytes} bytes"
            )


@dataclass(frozen=True)
class FloorplanProblem:
    """Give every group a rectangle of cores: enough memory, balanced compute, short flows."""

    grid: Grid
    groups: tuple[Group, ...]
    flows: tuple[Flow, ...]
    core_flops: float  # FLOP/s per core
    core_sram: int  # bytes per core
    weights: ObjectiveWeights
    dead_cores: DeadCores = DeadCores.OBSTACLE

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(self.groups))
        object.__setattr__(self, "flows", tuple(self.flows))
        if not self.groups:
            raise PlanError("a floorplan needs at least one group")
        if not (self.core_flops > 0 and math.isfinite(self.core_flops)):
            raise PlanError(f"core_flops must be positive, got {self.core_flops}")
        if self.core_sram <= 0:
            raise PlanError(f"core_sram must be positive, got {self.core_sram}")
        names = tuple(g.name for g in self.groups)
        if len(set(names)) != len(names):
            raise PlanError(
                f"group names must be unique: {sorted(n for n in names if names.count(n) > 1)}"
            )
        for g in self.groups:
            if not (math.isfinite(g.work) and g.work >= 0) or g.mem_bytes < 0:
                raise PlanError(
                    f"group {g.name!r} has invalid work {g.work} or memory {g.mem_bytes}"
                )
        _check_flows(self.flows, len(self.groups), "group", names)
        self.grid.require_connected()
        alive = self.grid.num_alive
        total_sram = alive * self.core_sram
        for g, need in zip(self.groups, self.min_areas, strict=True):
            if need > alive:
                raise PlanError(
                    f"group {g.name!r} needs {fmt_bytes(g.mem_bytes)} but the whole grid holds "
                    f"{fmt_bytes(total_sram)} in {alive} alive cores of {fmt_bytes(self.core_sram)}; "
                    "split the group over more stages or use a larger wafer"
                )
        if sum(self.min_areas) > alive:
            total = sum(g.mem_bytes for g in self.groups)
            big = max(range(len(self.groups)), key=lambda i: self.groups[i].mem_bytes)
            raise PlanError(
                f"the groups need {sum(self.min_areas)} cores for their memory "
                f"({fmt_bytes(total)} in all, the largest {self.groups[big].name!r} with "
                f"{fmt_bytes(self.groups[big].mem_bytes)}) but only {alive} cores are alive; "
                "use a larger wafer or less memory per group"
            )

    @cached_property
    def min_areas(self) -> tuple[int, ...]:
        """Fewest alive cores each group needs for its memory (at least one)."""
        return tuple(max(1, -(-g.mem_bytes // self.core_sram)) for g in self.groups)

    @property
    def total_work(self) -> float:
        return float(sum(g.work for g in self.groups))

    def region_cores(self, rect: Rect) -> int:
        """Cores of ``rect`` that count for the group under the dead-core policy."""
        alive = self.grid.alive_in(rect.row, rect.col, rect.height, rect.width)
        if self.dead_cores is DeadCores.OBSTACLE and alive < rect.area:
            return 0
        return alive


@dataclass(frozen=True)
class AssignProblem:
    """Put ``n_actors`` actors on alive cores, at most ``max_actors_per_core`` per core
    and within each core's memory, minimising ``sum(bytes x hops)``.

    ``allowed[a]`` (optional) lists the core ids actor ``a`` may use (a region); dead
    cores are dropped from it.
    """

    grid: Grid
    n_actors: int
    actor_mem: tuple[int, ...]
    flows: tuple[Flow, ...]
    core_sram: int
    allowed: tuple[tuple[int, ...], ...] | None = None
    max_actors_per_core: int = 1
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "actor_mem", tuple(int(m) for m in self.actor_mem))
        object.__setattr__(self, "flows", tuple(self.flows))
        if self.n_actors < 1:
            raise PlanError("an assignment needs at least one actor")
        if len(self.actor_mem) != self.n_actors:
            raise PlanError(
                f"actor_mem has {len(self.actor_mem)} entries for {self.n_actors} actors"
            )
        if self.names is not None and len(self.names) != self.n_actors:
            raise PlanError(f"names has {len(self.names)} entries for {self.n_actors} actors")
        if self.max_actors_per_core < 1:
            raise PlanError(f"max_actors_per_core must be >= 1, got {self.max_actors_per_core}")
        if self.core_sram <= 0:
            raise PlanError(f"core_sram must be positive, got {self.core_sram}")
        _check_flows(self.flows, self.n_actors, "actor", self.actor_names)
        self.grid.require_connected()
        for a, m in enumerate(self.actor_mem):
            if m < 0 or m > self.core_sram:
                raise PlanError(
                    f"actor {self.actor_names[a]!r} needs {fmt_bytes(m)} but a core holds "
                    f"{fmt_bytes(self.core_sram)}; shard it further"
                )
        if self.allowed is not None:
            if len(self.allowed) != self.n_actors:
                raise PlanError(
                    f"allowed has {len(self.allowed)} entries for {self.n_actors} actors"
                )
            alive = set(self.grid.alive_cores)
            cleaned = []
            for a, cores in enumerate(self.allowed):
                bad = [c for c in cores if not 0 <= c < self.grid.num_cores]
                if bad:
                    raise PlanError(
                        f"actor {self.actor_names[a]!r} allows cores outside the grid: {bad[:6]}"
                    )
                keep = tuple(sorted({c for c in cores if c in alive}))
                if not keep:
                    raise PlanError(
                        f"actor {self.actor_names[a]!r} has no alive core in its region"
                    )
                cleaned.append(keep)
            object.__setattr__(self, "allowed", tuple(cleaned))
        cap = self.grid.num_alive * self.max_actors_per_core
        if self.n_actors > cap:
            raise PlanError(
                f"{self.n_actors} actors do not fit on {self.grid.num_alive} alive cores at "
                f"{self.max_actors_per_core} actor(s) per core; use a larger grid or a higher "
                "max_actors_per_core"
            )

    @property
    def actor_names(self) -> tuple[str, ...]:
        return (
            self.names if self.names is not None else tuple(f"a{i}" for i in range(self.n_actors))
        )

    def cores_for(self, actor: int) -> tuple[int, ...]:
        return self.allowed[actor] if self.allowed is not None else self.grid.alive_cores

    @cached_property
    def pair_bytes(self) -> dict[tuple[int, int], float]:
        """Traffic per unordered actor pair ``(a < b)``; self-flows dropped (they cost 0)."""
        out: dict[tuple[int, int], float] = {}
        for f in self.flows:
            if f.src != f.dst and f.bytes > 0:
                key = (min(f.src, f.dst), max(f.src, f.dst))
                out[key] = out.get(key, 0.0) + f.bytes
        return dict(sorted(out.items()))

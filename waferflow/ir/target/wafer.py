"""The hardware target: a grid of cores joined by links, cut into dies.

Units are SI throughout: seconds, bytes, bytes/s, FLOP/s, Hz. Cores are numbered
row-major, ``core = row * cols + col``; coordinates are ``(row, col)``.

A ``Wafer`` is O(1) in memory whatever its size (a 750k-core WSE grid costs the same
as a 4 x 4 mesh): only faults are stored per core, and neighbours and links are
computed on demand. Every field is validated on construction (``ConfigError`` naming
the field by its TOML path, see ``toml_io``).

Topologies: ``mesh`` links each core to its 4 neighbours inside the grid; ``torus``
adds wrap-around links (a dimension of size 2 has one link between its two cores, not
two; a dimension of size 1 has none); ``crossbar`` links every ordered pair of cores.

Faults: a dead core has no links; a dead link is undirected (both directions fail).
In a coarse view (``coarsen``), a node holding fewer than k x k alive fine cores
(partly dead, or on the ragged last row / column when k does not divide the fine
grid, ``fine_rows`` / ``fine_cols``) keeps that fraction of the compute, SRAM and
SRAM bandwidth (``partial_cores``, ``capacity``); a link on a ragged edge is crossed
by fewer fine links and has that fraction of the bandwidth (``link_spec``); see
``coarsen.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from waferflow.ir.dtypes import DType
from waferflow.ir.target import coarsen as _coarsen
from waferflow.ir.target import describe as _describe
from waferflow.ir.target.fabric import FabricLevel, Tree
from waferflow.ir.target.parts import (
    Coord,
    CoreModel,
    Dataflow,
    FlowControl,
    Link,
    LinkSpec,
    MacArray,
    MemoryModel,
    Topology,
    VectorUnit,
    rate_for,
)
from waferflow.ir.target.ranges import AREA, MAX_SIDE, sane
from waferflow.ir.target.validate import normalize_and_validate

__all__ = [
    "CAPACITY_TIERS",
    "Coord",
    "CoreModel",
    "Dataflow",
    "FlowControl",
    "Link",
    "LinkSpec",
    "MacArray",
    "MemoryModel",
    "Topology",
    "VectorUnit",
    "Wafer",
]

# Layouts try full nodes first, then nodes with 95% of their cores, then 75%, then all.
CAPACITY_TIERS: tuple[float, ...] = (1.0, 0.95, 0.75)


@dataclass(frozen=True)
class Wafer:
    name: str
    rows: int = field(metadata=sane(1, MAX_SIDE, "cores", integer=True))
    cols: int = field(metadata=sane(1, MAX_SIDE, "cores", integer=True))
    topology: Topology
    clock_hz: float = field(metadata=sane(1e3, 1e11, "Hz"))
    # per core, by dtype (the range holds for each rate)
    peak_flops: tuple[tuple[DType, float], ...] = field(
        metadata=sane(1, 1e30, "FLOP/s", scale=AREA)
    )
    sram_bytes: int = field(metadata=sane(1, 2**40, "B", integer=True, scale=AREA))  # per core
    # bytes/s per core
    sram_bandwidth: float = field(metadata=sane(1, 1e30, "B/s", scale=AREA))
    link: LinkSpec
    # dies along the rows (the grid is cut into die_rows x die_cols dies)
    die_rows: int = field(default=1, metadata=sane(1, MAX_SIDE, "dies", integer=True))
    die_cols: int = field(default=1, metadata=sane(1, MAX_SIDE, "dies", integer=True))
    d2d_link: LinkSpec | None = None  # links that cross a die boundary
    dead_cores: frozenset[Coord] = field(default_factory=frozenset)
    dead_links: frozenset[tuple[Coord, Coord]] = field(default_factory=frozenset)  # undirected
    flow: FlowControl | None = None
    core: CoreModel | None = None  # how a core times an op (None: the roofline)
    memory: MemoryModel | None = None  # how SRAM is handed out (None: exact, reported only)
    host: LinkSpec | None = None  # the host's own link to every core (None: no host)
    # topology "tree": the switch levels, bottom first (``fabric.py``); () otherwise
    fabric: tuple[FabricLevel, ...] = ()
    # k when this is a k x k coarse view of a finer wafer
    coarsen_factor: int = field(default=1, metadata=sane(1, MAX_SIDE, "", integer=True))
    source: str = ""  # where the figures come from
    # coarse views only: nodes holding fewer than k**2 alive fine cores (partly dead, or on
    # a ragged edge), as ((row, col), alive fine cores), 1 <= alive < coarsen_factor**2;
    # such a node has that fraction of the nominal capacity. Normalisation lists every
    # healthy ragged node (with the fine cores it holds) when it is not given.
    partial_cores: tuple[tuple[Coord, int], ...] = ()
    # coarse views only: the fine grid's rows / cols when coarsen_factor does not divide
    # them (the last row / col of nodes is ragged); 0 = rows (cols) * coarsen_factor
    fine_rows: int = field(default=0, metadata=sane(0, MAX_SIDE, "cores", integer=True))
    fine_cols: int = field(default=0, metadata=sane(0, MAX_SIDE, "cores", integer=True))

    def __post_init__(self) -> None:
        # Also normalises: peak_flops sorted by dtype, dead_links as (min, max) pairs,
        # numbers as floats, a topology given as a string as the enum.
        normalize_and_validate(self)

    # --- numbering -------------------------------------------------------------------
    @property
    def num_cores(self) -> int:
        """Grid positions: cores, or on a coarse view nodes (see ``unit``)."""
        return self.rows * self.cols

    @property
    def unit(self) -> str:
        """What one grid position is: a ``core``, or on a coarse view a ``node`` of
        k x k cores; reports say it this way everywhere."""
        return "core" if self.coarsen_factor == 1 else "node"

    def units(self, n: int) -> str:
        """``n`` grid positions in words: ``'96 cores'``, or on a coarse view
        ``'96 nodes of 84x84 cores'``."""
        k = self.coarsen_factor
        plural = "" if n == 1 else "s"
        return f"{n:,} {self.unit}{plural}" + (f" of {k}x{k} cores" if k > 1 else "")

    def core_id(self, coord: Coord) -> int:
        return coord[0] * self.cols + coord[1]

    def coord(self, core: int) -> Coord:
        return divmod(core, self.cols)

    def in_grid(self, coord: Coord) -> bool:
        return 0 <= coord[0] < self.rows and 0 <= coord[1] < self.cols

    def _check(self, coord: Coord) -> None:
        if not self.in_grid(coord):
            raise ValueError(
                f"core {coord} is outside the {self.rows} x {self.cols} grid of {self.name}"
            )

    # --- dies ------------------------------------------------------------------------
    @property
    def die_shape(self) -> tuple[int, int]:
        """Cores per die, (rows, cols)."""
        return (self.rows // self.die_rows, self.cols // self.die_cols)

    @property
    def num_dies(self) -> int:
        return self.die_rows * self.die_cols

    def die_of(self, coord: Coord) -> tuple[int, int]:
        """The (die_row, die_col) of the die holding ``coord``."""
        self._check(coord)
        h, w = self.die_shape
        return (coord[0] // h, coord[1] // w)

    # --- faults and capacity ---------------------------------------------------------
    def is_dead(self, coord: Coord) -> bool:
        return coord in self.dead_cores

    @property
    def num_alive(self) -> int:
        return self.num_cores - len(self.dead_cores)

    def alive_cores(self) -> list[int]:
        """Ids of the cores that are not dead, ascending."""
        if not self.dead_cores:
            return list(range(self.num_cores))
        dead = {self.core_id(c) for c in self.dead_cores}
        return [i for i in range(self.num_cores) if i not in dead]

    @cached_property
    def _partial(self) -> dict[Coord, int]:
        return dict(self.partial_cores)

    # --- the fine grid of a coarse view ----------------------------------------------
    @property
    def fine_shape(self) -> tuple[int, int]:
        """(rows, cols) of the fine grid this view was made from: the grid itself when
        ``coarsen_factor`` is 1; smaller than ``rows * k x cols * k`` when ragged."""
        k = self.coarsen_factor
        return (self.fine_rows or self.rows * k, self.fine_cols or self.cols * k)

    def node_shape(self, coord: Coord) -> tuple[int, int]:
        """Fine (rows, cols) that the node at ``coord`` covers, dead or alive: k x k,
        fewer on the ragged last row / column of a coarse view."""
        self._check(coord)
        k = self.coarsen_factor
        if not (self.fine_rows or self.fine_cols):
            return (k, k)
        fr, fc = self.fine_shape
        return (min(k, fr - coord[0] * k), min(k, fc - coord[1] * k))

    def _cut_spec(self, spec: LinkSpec, a: Coord, b: Coord) -> LinkSpec:
        """``spec`` scaled to the fine links that cross the cut a | b: a coarse link
        along a ragged row (column) is crossed by fewer than k of them."""
        h, w = self.node_shape(a)
        width = h if a[0] == b[0] else w  # a row-wise link crosses the node's height
        k = self.coarsen_factor
        return spec if width == k else LinkSpec(spec.bandwidth * width / k, spec.latency)

    def nodes_below(self, fraction: float) -> frozenset[Coord]:
        """Alive nodes holding less than ``fraction`` of a full node's cores (on a coarse
        view: a ragged edge, or partly dead); layouts leave them out while the rest is
        enough (``CAPACITY_TIERS``), since a tensor-parallel group waits for its
        slowest rank."""
        return frozenset(c for c, _ in self.partial_cores if self.capacity(c) < fraction)

    def capacity(self, coord: Coord) -> float:
        """Fraction of the nominal per-core compute / SRAM at ``coord``: 0 when dead,
        alive/k**2 for a node of a k x k coarse view that holds fewer than k**2 alive
        fine cores (partly dead, or on a ragged edge), else 1."""
        if coord in self.dead_cores:
            return 0.0
        alive = self._partial.get(coord)
        return 1.0 if alive is None else alive / self.coarsen_factor**2

    @property
    def effective_cores(self) -> float:
        """Alive cores; coarse nodes with fewer than k**2 alive fine cores (partly
        dead or ragged) counted by that fraction."""
        full = self.coarsen_factor**2
        partial = sum(n for _, n in self.partial_cores)
        return self.num_alive - len(self.partial_cores) + partial / full

    # --- compute and memory ----------------------------------------------------------
    def peak(self, dtype: DType) -> float:
        """Peak FLOP/s of one (healthy) core for ``dtype``.

        When the wafer lists no rate for ``dtype``: bf16 uses the f16 rate and f16 the
        bf16 rate (same width, same datapath on every machine we model); then any dtype
        uses the f32 rate; with no f32 listed either, the slowest listed rate
        (conservative). E.g. ``peak(BF16)`` on a wafer listing only f32 is the f32 rate.
        """
        return rate_for(self.peak_flops, dtype)

    def core_peak(self, coord: Coord, dtype: DType) -> float:
        """Peak FLOP/s of the core at ``coord`` (scaled by ``capacity``)."""
        return self.peak(dtype) * self.capacity(coord)

    def core_sram_bytes(self, coord: Coord) -> int:
        if coord in self.dead_cores:
            return 0
        alive = self._partial.get(coord)
        return (
            self.sram_bytes if alive is None else self.sram_bytes * alive // self.coarsen_factor**2
        )

    def core_sram_bandwidth(self, coord: Coord) -> float:
        return self.sram_bandwidth * self.capacity(coord)

    def total_peak_flops(self, dtype: DType) -> float:
        return self.peak(dtype) * self.effective_cores

    def total_sram(self) -> int:
        """Bytes of SRAM over all alive cores."""
        healthy = self.num_alive - len(self.partial_cores)
        full = self.coarsen_factor**2
        return self.sram_bytes * healthy + sum(
            self.sram_bytes * n // full for _, n in self.partial_cores
        )

    # --- a switched fabric (topology "tree") ------------------------------------------
    @cached_property
    def tree(self) -> Tree | None:
        """The switch tree of a ``tree`` wafer (switches at coordinates ``(-level, i)``)."""
        return Tree(self.num_cores, self.fabric) if self.topology is Topology.TREE else None

    @property
    def num_nodes(self) -> int:
        """Cores, plus a switched fabric's switches (numbered after the cores)."""
        return self.num_cores + (self.tree.num_switches if self.tree is not None else 0)

    def node_id(self, coord: Coord) -> int:
        """The id of a core or (on a switched fabric) a switch."""
        if coord[0] >= 0:
            return coord[0] * self.cols + coord[1]
        assert self.tree is not None, f"{coord} is not a core of {self.name}"
        return self.tree.node_id(coord, self.cols)

    def physical_node(self, node: int) -> int:
        """A switch *unit* as its switch: on a switched fabric every id past the nodes
        (``num_nodes + t * switches + j``) is one more unit of switch ``j`` (a switch
        reduces and copies many streams at once: each in-network step runs on a unit
        of its own). Cores and switches are themselves."""
        if self.tree is None or node < self.num_nodes:
            return node
        return self.num_cores + (node - self.num_cores) % self.tree.num_switches

    def is_switch_node(self, node: int) -> bool:
        return self.tree is not None and node >= self.num_cores

    def count_cores(self, nodes: Iterable[int]) -> int:
        """How many of ``nodes`` are cores (a switched fabric's switch units are not)."""
        return sum(1 for n in nodes if n < self.num_cores)

    def node_coord(self, node: int) -> Coord:
        if node < self.num_cores or self.tree is None:
            return divmod(node, self.cols)
        return self.tree.coord_of(self.physical_node(node), self.cols)

    # --- topology --------------------------------------------------------------------
    def is_adjacent(self, a: Coord, b: Coord) -> bool:
        """Whether the topology has a link between ``a`` and ``b`` (faults ignored)."""
        if self.tree is not None:
            return a != b and self.tree.link_spec(a, b, self.cols) is not None
        if a == b or not (self.in_grid(a) and self.in_grid(b)):
            return False
        if self.topology is Topology.CROSSBAR:
            return True
        dr, dc = b[0] - a[0], b[1] - a[1]
        if self.topology is Topology.MESH:
            return abs(dr) + abs(dc) == 1
        dr, dc = dr % self.rows, dc % self.cols  # torus: distances around the ring
        return (dc == 0 and dr in (1, self.rows - 1)) or (dr == 0 and dc in (1, self.cols - 1))

    def neighbors(self, coord: Coord) -> list[Coord]:
        """Cores linked to ``coord`` by the topology, faults ignored (use ``has_link``
        to skip dead cores and links). Order: up, down, left, right; for a crossbar,
        every other core in row-major order; on a switched fabric, the switch above
        a core, and a switch's children then its parent."""
        if self.tree is not None:
            up = self.tree.parent(coord, self.cols)
            down = self.tree.children(coord, self.cols) if coord[0] < 0 else []
            return down + ([up] if up is not None else [])
        self._check(coord)
        r, c = coord
        if self.topology is Topology.CROSSBAR:
            return [divmod(i, self.cols) for i in range(self.num_cores) if i != r * self.cols + c]
        if self.topology is Topology.MESH:
            cand = [(r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)]
            return [x for x in cand if self.in_grid(x)]
        cand = [
            ((r - 1) % self.rows, c),
            ((r + 1) % self.rows, c),
            (r, (c - 1) % self.cols),
            (r, (c + 1) % self.cols),
        ]
        out: list[Coord] = []
        for x in cand:
            if x != coord and x not in out:
                out.append(x)
        return out

    def is_d2d(self, a: Coord, b: Coord) -> bool:
        """Whether ``a`` and ``b`` lie in different dies."""
        return self.die_of(a) != self.die_of(b)

    def link_spec(self, a: Coord, b: Coord) -> LinkSpec:
        """Spec of the link a -> b: the die-to-die spec when they lie in different dies
        and the wafer has one, else the on-die spec; on the ragged edge of a coarse
        view, with the bandwidth of the fine links that cross the cut (fewer than k).
        Faults are not checked (see ``has_link``); a pair the topology does not link
        is a ValueError."""
        if not self.is_adjacent(a, b):
            raise ValueError(f"{self.name}: no link between {a} and {b} in a {self.topology.value}")
        if self.tree is not None:
            tree_spec = self.tree.link_spec(a, b, self.cols)
            assert tree_spec is not None
            return tree_spec
        spec = self.link
        if self.d2d_link is not None and self.is_d2d(a, b):
            spec = self.d2d_link
        return self._cut_spec(spec, a, b) if self.fine_rows or self.fine_cols else spec

    def has_link(self, a: Coord, b: Coord) -> bool:
        """Whether a usable link a -> b exists: adjacent, both cores alive, link not dead."""
        return (
            self.is_adjacent(a, b)
            and a not in self.dead_cores
            and b not in self.dead_cores
            and (min(a, b), max(a, b)) not in self.dead_links
        )

    def links(self) -> Iterator[Link]:
        """Every usable directed link, by source in row-major order then by neighbour
        order; dead links and links touching dead cores are left out. Lazy."""
        if self.tree is not None:
            for child, parent in self.tree.edges(self.cols):
                spec = self.link_spec(child, parent)
                yield Link(child, parent, spec, False)
                yield Link(parent, child, spec, False)
            return
        dead, dead_links = self.dead_cores, self.dead_links
        d2d_spec = self.d2d_link or self.link
        ragged = bool(self.fine_rows or self.fine_cols)
        h, w = self.die_shape
        for i in range(self.num_cores):
            src = divmod(i, self.cols)
            if src in dead:
                continue
            src_die = (src[0] // h, src[1] // w)
            for dst in self.neighbors(src):
                if dst in dead or (dead_links and (min(src, dst), max(src, dst)) in dead_links):
                    continue
                d2d = (dst[0] // h, dst[1] // w) != src_die
                spec = d2d_spec if d2d else self.link
                yield Link(src, dst, self._cut_spec(spec, src, dst) if ragged else spec, d2d)

    def num_links(self) -> int:
        """``len(list(self.links()))`` in O(faults) time."""
        n = self.num_alive
        if self.tree is not None:
            return 2 * (self.num_cores + self.tree.num_switches - 1)
        if self.topology is Topology.CROSSBAR:
            undirected = n * (n - 1) // 2
        else:
            undirected = self._healthy_undirected_links()
            touching: set[tuple[Coord, Coord]] = set()
            for d in self.dead_cores:
                for x in self.neighbors(d):
                    touching.add((min(d, x), max(d, x)))
            undirected -= len(touching)
        for a, b in self.dead_links:
            if a not in self.dead_cores and b not in self.dead_cores:
                undirected -= 1
        return 2 * undirected

    def _healthy_undirected_links(self) -> int:
        if self.topology is Topology.MESH:
            return self.rows * (self.cols - 1) + self.cols * (self.rows - 1)

        def ring(n: int) -> int:  # distinct neighbour pairs on a ring of n
            return n if n >= 3 else n - 1

        return self.rows * ring(self.cols) + self.cols * ring(self.rows)

    # --- views -----------------------------------------------------------------------
    def coarsen(self, k: int) -> Wafer:
        """A k x k coarse view: each block of k x k cores becomes one node; when k
        does not divide the grid, the last row / column of nodes holds fewer cores
        (see ``coarsen.py`` for how compute, links, dies and faults scale)."""
        return _coarsen.coarsen(self, k)

    def with_dead_cores(self, fraction: float, seed: int) -> Wafer:
        """This wafer with ``round(fraction * num_cores)`` dead cores in total (existing
        dead cores stay dead; more are drawn uniformly from the alive ones with
        ``random.Random(seed)``). Deterministic; never kills every core."""
        return _coarsen.with_dead_cores(self, fraction, seed)

    # --- reports ---------------------------------------------------------------------
    def describe(self) -> str:
        """A multi-line human-readable listing of every figure of the wafer."""
        return _describe.describe(self)

    def summary_row(self) -> tuple[str, ...]:
        """Key figures for a table whose header is ``SUMMARY_HEADER``."""
        return _describe.summary_row(self)


SUMMARY_HEADER: tuple[str, ...] = _describe.SUMMARY_HEADER

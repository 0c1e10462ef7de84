"""In-network collectives: switches that add on the way up and copy on the way down.

Only a switched fabric (topology ``tree``, the ``fred`` preset) offers them: a FRED
switch reduces the streams of its children into one and multicasts a stream to its
children (Rashidi et al., FRED, ISCA 2025: "in-switch collective support", halving
the traffic of an all-reduce). For a group of ranks, the switches on the tree paths
between them form a tree whose top is their lowest common switch.

* ``all_reduce``: every rank streams its buffer up; each switch adds its children's
  streams and passes one stream up; the top switch sends the sum down, each switch
  copying it to its children (multicast).
* ``reduce_scatter``: the same way up; on the way down each child receives only the
  part of the sum that belongs to the ranks below it.
* ``all_gather``: the blocks stream up side by side (no adding) and the whole
  result is multicast down.

The buffer streams in ``k`` chunks of at most ``CHUNK_BYTES`` (at most
``MAX_CHUNKS``): a switch forwards a chunk once it holds it whole (store and
forward per chunk, a stated assumption: the paper's switches stream, which is the
limit of small chunks), so the chunks pipeline through the tree. Each step a switch
takes for one chunk is an actor on a *unit* of that switch (``Wafer.physical_node``:
switch units run at once and add at line rate, taking no time of their own), so
only the links take time. With ``c`` the bytes a link carries per chunk and ``B``,
``L`` its bandwidth and latency, over the deepest rank's path (its ``h`` links up to
the top switch and ``h`` down):

    T = sum over the path's links of (c / B + L)  +  (k - 1) max over them of c / B

which is what ``innet_seconds`` computes and the simulator reproduces (tests).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from waferflow.ir.opkind import OpKind
from waferflow.ir.target.wafer import Coord, Wafer

K = OpKind
INNET_KINDS = frozenset({K.ALL_REDUCE, K.REDUCE_SCATTER, K.ALL_GATHER})
CHUNK_BYTES = 64 * 1024
MAX_CHUNKS = 32


@dataclass(frozen=True)
class GroupTree:
    """The switches a group of ranks uses: each used node's parent (the top's is
    None) and its children, with the ranks below each."""

    top: Coord
    parent: dict[Coord, Coord]
    children: dict[Coord, list[Coord]]
    ranks_below: dict[Coord, int]
    members: tuple[Coord, ...]


def group_tree(wafer: Wafer, members: list[Coord]) -> GroupTree:
    """The part of the fabric's tree that joins ``members`` (distinct cores)."""
    tree = wafer.tree
    assert tree is not None
    chains = [tree.up(m, wafer.cols) for m in members]
    common = set(chains[0]).intersection(*map(set, chains[1:]))
    top = next(x for x in chains[0] if x in common)
    parent: dict[Coord, Coord] = {}
    below: dict[Coord, int] = {top: len(members)}
    for chain in chains:
        for a, b in itertools.pairwise(chain[: chain.index(top) + 1]):
            below[a] = below.get(a, 0) + 1
            parent[a] = b
    children: dict[Coord, list[Coord]] = {}
    for child, p in parent.items():
        children.setdefault(p, []).append(child)
    for kids in children.values():
        kids.sort()
    return GroupTree(top, parent, children, below, tuple(members))


def chunks(nbytes: int) -> int:
    return max(1, min(MAX_CHUNKS, -(-nbytes // CHUNK_BYTES)))


def _up_bytes(kind: OpKind, chunk: float, ranks: int) -> float:
    """Bytes a link carries up per chunk from a subtree of ``ranks`` ranks (``chunk``:
    one rank's chunk)."""
    return chunk * ranks if kind is K.ALL_GATHER else chunk


def _down_bytes(kind: OpKind, chunk: float, ranks: int, n: int) -> float:
    if kind is K.ALL_GATHER:
        return chunk * n
    if kind is K.REDUCE_SCATTER:
        return chunk * ranks / n
    return chunk


def innet_seconds(wafer: Wafer, members: list[Coord], kind: OpKind, per_rank: int) -> float:
    """The closed form of the module docstring; ``per_rank`` is what one rank puts in
    (its whole buffer, or its block for an all-gather)."""
    g = group_tree(wafer, members)
    n, k = len(members), chunks(per_rank)
    c = per_rank / k
    best = 0.0
    for m in members:
        path, worst = 0.0, 0.0
        node = m
        while node != g.top:
            up = g.parent[node]
            spec = wafer.link_spec(node, up)
            for nbytes in (_up_bytes(kind, c, g.ranks_below[node]),
                           _down_bytes(kind, c, g.ranks_below[node], n)):  # fmt: skip
                path += nbytes / spec.bandwidth + spec.latency
                worst = max(worst, nbytes / spec.bandwidth)
            node = up
        best = max(best, path + (k - 1) * worst)
    return best


MakeUnit = Callable[[Coord, str, int], int]  # (switch, label, bytes got) -> actor
MakeFinal = Callable[[int, int], int]  # (member, bytes got) -> actor on its core
Send = Callable[[int, int, int, tuple[int, int]], None]  # (src, dst, bytes, route ends)


def wire_innet(
    wafer: Wafer,
    kind: OpKind,
    member_cores: list[int],
    per_rank: int,
    entries: list[int],
    make_unit: MakeUnit,
    make_final: MakeFinal,
    node_of: Callable[[int], int],
    send: Send,
) -> list[int]:
    """Create the switch steps and each rank's final actor of one collective; returns
    the final actors. ``entries[i]`` holds rank i's input; ``make_unit(s, label, got)``
    creates a step on a fresh unit of switch ``s``, ``make_final(i, got)`` rank i's
    receiving actor, ``node_of(actor)`` its node; ``send(src, dst, bytes, ends)`` a
    message between neighbouring nodes."""
    coords = [divmod(c, wafer.cols) for c in member_cores]
    g = group_tree(wafer, coords)
    n, k = len(coords), chunks(per_rank)
    sizes = [per_rank // k + (1 if j < per_rank % k else 0) for j in range(k)]
    member_of = {c: i for i, c in enumerate(coords)}
    finals = [make_final(i, sum(int(_down_bytes(kind, c, 1, n)) for c in sizes)) for i in range(n)]
    order = _bottom_up(g)
    for j, c in enumerate(sizes):
        # up: each node's actor holding this chunk (a rank's input, a switch's sum)
        at: dict[Coord, int] = {x: entries[i] for i, x in enumerate(coords)}
        for s in order:
            kids = g.children[s]
            sent = [int(_up_bytes(kind, c, g.ranks_below[x])) for x in kids]
            a = make_unit(s, f"up{j}", sum(sent))
            for x, nbytes in zip(kids, sent, strict=True):
                send(at[x], a, nbytes, (node_of(at[x]), node_of(a)))
            at[s] = a
        # down: the top's actor multicasts; each switch below copies to its children
        for s in reversed(order):
            for x in g.children[s]:
                nbytes = int(_down_bytes(kind, c, g.ranks_below[x], n))
                if x in member_of:
                    dst = finals[member_of[x]]
                else:
                    dst = at[x] = make_unit(x, f"down{j}", nbytes)
                send(at[s], dst, nbytes, (node_of(at[s]), node_of(dst)))
    return finals


def _bottom_up(g: GroupTree) -> list[Coord]:
    """The used switches, lower levels first (children before parents)."""
    return sorted(g.children, key=lambda s: (-s[0], s[1]))


__all__ = [
    "CHUNK_BYTES",
    "INNET_KINDS",
    "MAX_CHUNKS",
    "GroupTree",
    "chunks",
    "group_tree",
    "innet_seconds",
    "wire_innet",
]

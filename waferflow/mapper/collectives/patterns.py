"""Building blocks shared by the algorithms: rings and pipelined trees.

Every function returns transfers starting at ``first_step`` and says (or lets the
caller compute) how many steps it used, so phases can be laid end to end.
"""

from __future__ import annotations

from collections.abc import Sequence

from waferflow.mapper.collectives.schedule import Transfer, make_transfer

# A rooted spanning tree over ranks: parent[r] is r's parent, None for the root.
Parents = tuple[int | None, ...]


def ring_reduce_scatter(
    order: Sequence[int],
    chunks_of_pos: Sequence[tuple[int, ...]],
    sizes: Sequence[int],
    first_step: int,
) -> list[Transfer]:
    """Ring reduce-scatter over ``order`` (position p sends to p+1, wrapping).

    The piece ``chunks_of_pos[q]`` ends fully reduced at position ``q``: it starts at
    q+1 and picks up one contribution per hop. Uses ``len(order) - 1`` steps.
    """
    n = len(order)
    out = []
    for s in range(n - 1):
        for p in range(n):
            piece = chunks_of_pos[(p - 1 - s) % n]
            out.append(
                make_transfer(first_step + s, order[p], order[(p + 1) % n], piece, sizes, True)
            )
    return out


def ring_all_gather(
    order: Sequence[int],
    chunks_of_pos: Sequence[tuple[int, ...]],
    sizes: Sequence[int],
    first_step: int,
) -> list[Transfer]:
    """Ring all-gather over ``order``: position q starts with ``chunks_of_pos[q]`` and
    every piece travels n-1 hops forward. Uses ``len(order) - 1`` steps."""
    n = len(order)
    out = []
    for s in range(n - 1):
        for p in range(n):
            piece = chunks_of_pos[(p - s) % n]
            out.append(
                make_transfer(first_step + s, order[p], order[(p + 1) % n], piece, sizes, False)
            )
    return out


def children_of(parents: Parents) -> tuple[tuple[int, ...], ...]:
    kids: list[list[int]] = [[] for _ in parents]
    for r, p in enumerate(parents):
        if p is not None:
            kids[p].append(r)
    return tuple(tuple(k) for k in kids)


def bfs_order(parents: Parents) -> tuple[int, ...]:
    """Ranks in breadth-first order from the root (parents before children)."""
    kids = children_of(parents)
    order = [r for r, p in enumerate(parents) if p is None]
    for r in order:  # the list grows while we walk it
        order.extend(kids[r])
    return tuple(order)


def depths(parents: Parents) -> tuple[int, ...]:
    """Distance of every rank from the root, in tree edges."""
    depth = [0] * len(parents)
    for r in bfs_order(parents):
        p = parents[r]
        if p is not None:
            depth[r] = depth[p] + 1
    return tuple(depth)


def heights(parents: Parents) -> tuple[int, ...]:
    """Longest distance from every rank down to a leaf of its subtree."""
    height = [0] * len(parents)
    for r in reversed(bfs_order(parents)):  # children are final before their parent
        p = parents[r]
        if p is not None:
            height[p] = max(height[p], height[r] + 1)
    return tuple(height)


def tree_broadcast(
    parents: Parents,
    pieces: Sequence[tuple[int, ...]],
    sizes: Sequence[int],
    first_step: int,
) -> list[Transfer]:
    """Pipelined broadcast down a tree: a rank at depth d forwards piece j to all its
    children at step d + j. Uses ``max_depth + len(pieces) - 1`` steps."""
    depth = depths(parents)
    out = []
    for child, parent in enumerate(parents):
        if parent is None:
            continue
        for j, piece in enumerate(pieces):
            out.append(
                make_transfer(first_step + depth[parent] + j, parent, child, piece, sizes, False)
            )
    return out


def tree_reduce(
    parents: Parents,
    pieces: Sequence[tuple[int, ...]],
    sizes: Sequence[int],
    first_step: int,
) -> list[Transfer]:
    """Pipelined reduce up a tree: a rank of height h adds piece j from all its
    children (they sent it by step h - 1 + j) and sends it up at step h + j.
    Uses ``height(root) + len(pieces) - 1`` steps."""
    height = heights(parents)
    out = []
    for child, parent in enumerate(parents):
        if parent is None:
            continue
        for j, piece in enumerate(pieces):
            out.append(
                make_transfer(first_step + height[child] + j, child, parent, piece, sizes, True)
            )
    return out


def chain(n: int, root: int, direction: int) -> Parents:
    """The ring walked from ``root`` in ``direction`` (+1 or -1): root is the head."""
    parents: list[int | None] = [None] * n
    for p in range(1, n):
        parents[(root + direction * p) % n] = (root + direction * (p - 1)) % n
    return tuple(parents)


def chain_into(n: int, root: int, direction: int) -> Parents:
    """The ring walked in ``direction`` ending at ``root``: data flows r -> r + direction."""
    return tuple(None if r == root else (r + direction) % n for r in range(n))


def heap_tree(n: int, root: int, arity: int) -> Parents:
    """A complete ``arity``-ary tree over positions (rank - root) mod n."""
    parents: list[int | None] = [None] * n
    for pos in range(1, n):
        parents[(root + pos) % n] = (root + (pos - 1) // arity) % n
    return tuple(parents)


def grid_tree(rows: int, cols: int, root: int) -> Parents:
    """A spanning tree of a row-major rows x cols grid: out from the root along its
    row in both directions, then up and down every column."""
    r0, c0 = divmod(root, cols)
    parents: list[int | None] = [None] * (rows * cols)
    for r in range(rows):
        for c in range(cols):
            if r != r0:
                pr, pc = (r - 1 if r > r0 else r + 1), c
            elif c != c0:
                pr, pc = r, (c - 1 if c > c0 else c + 1)
            else:
                continue
            parents[r * cols + c] = pr * cols + pc
    return tuple(parents)

"""Moving splits through views: a brute-force check of ``map_split_view``."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.ir.sharding import (
    PARTIAL,
    MeshAxis,
    Sharding,
    Split,
    map_split_permute,
    map_split_view,
    shard_shape,
)


def owner(shape: tuple[int, ...], split: Split, n: int, flat: int) -> int:
    """The rank holding row-major element ``flat`` of ``shape`` under ``split``."""
    idx = []
    for size in reversed(shape):
        flat, r = divmod(flat, size)
        idx.append(r)
    idx.reverse()
    return (idx[split.dim] // split.block) % n


def test_heads_split_survives_reshape_and_merge() -> None:
    # hidden 64 split in 4 -> [4 heads, 16]: the heads are split
    assert map_split_view((4, 32, 64), (4, 32, 4, 16), Split(2, 16), 4) == Split(2, 1)
    # batch x heads merged into one dim: a periodic split with block 1
    assert map_split_view((4, 4, 32, 16), (16, 32, 16), Split(1, 1), 4) == Split(0, 1)
    # and back again
    assert map_split_view((16, 32, 16), (4, 4, 32, 16), Split(0, 1), 4) == Split(1, 1)
    # 2 heads cannot be split 4 ways
    assert map_split_view((2, 32, 32), (2, 32, 2, 16), Split(2, 8), 4) is None


def test_padded_split_survives_unit_dims() -> None:
    # a vocabulary of 50257 padded to 4 x 12565: only unit dims change around it
    assert map_split_view((4, 32, 50257), (128, 50257), Split(2, 12565), 4) == Split(1, 12565)
    assert map_split_view((50257,), (1, 50257), Split(0, 12565), 4) == Split(1, 12565)


def test_permute_and_sharding_helpers() -> None:
    assert map_split_permute(Split(1, 3), (2, 0, 1)) == Split(2, 3)
    s = Sharding.of({MeshAxis.TP: Split(1, 8), MeshAxis.DP: PARTIAL})
    assert str(s) == "{dp: P, tp: S(1/8)}"
    assert shard_shape((4, 32), s, {MeshAxis.TP: 4, MeshAxis.DP: 2}) == (4, 8)
    assert s.with_(MeshAxis.DP, Sharding().get(MeshAxis.DP)) == Sharding.of(
        {MeshAxis.TP: Split(1, 8)}
    )


def _factors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def reshapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], Split, int]:
    src = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8]), min_size=1, max_size=4)))
    total = math.prod(src)
    dst: list[int] = []
    rest = total
    while rest > 1 and len(dst) < 4:
        f = draw(st.sampled_from([d for d in _factors(rest) if d > 1]))
        dst.append(f)
        rest //= f
    if rest > 1:
        dst.append(rest)
    if draw(st.booleans()):
        dst.insert(draw(st.integers(0, len(dst))), 1)
    dims = [d for d, s in enumerate(src) if s > 1]
    dim = draw(st.sampled_from(dims)) if dims else 0
    n = draw(st.sampled_from([d for d in _factors(src[dim]) if d > 1] or [1]))
    block = draw(st.sampled_from([b for b in _factors(src[dim] // n)]))
    return src, tuple(dst) or (1,), Split(dim, block), n


@settings(max_examples=300, deadline=None)
@given(reshapes())
def test_mapped_split_puts_every_element_on_the_same_rank(
    case: tuple[tuple[int, ...], tuple[int, ...], Split, int],
) -> None:
    src, dst, split, n = case
    mapped = map_split_view(src, dst, split, n)
    if mapped is None:
        return
    for flat in range(math.prod(src)):
        assert owner(src, split, n, flat) == owner(dst, mapped, n, flat)

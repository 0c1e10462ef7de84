"""``gc_paused`` pauses the cyclic collector inside its block only, nesting included."""

from __future__ import annotations

import gc
import weakref

from waferflow.perf import gc_paused


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds
    assert gc.isenabled()
    try:
        with gc_paused():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_what_survives_the_block_is_moved_to_the_oldest_generation() -> None:
    """The first young collection after the block must not scan what the block made
    (a second on the demo), and a cycle made there is still found by a collection."""
    with gc_paused():
        kept = [_Node() for _ in range(1000)]
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle, garbage once the names go
        ref = weakref.ref(a)
        del a, b
    young = {id(x) for x in gc.get_objects(generation=0)} | {
        id(x) for x in gc.get_objects(generation=1)
    }
    assert not any(id(x) in young for x in kept)
    assert all(id(x) in {id(y) for y in gc.get_objects(generation=2)} for x in kept[:10])
    gc.collect()
    assert ref() is None


def test_a_function_can_run_paused() -> None:
    @gc_paused()
    def inside() -> bool:
        return gc.isenabled()

    assert not inside()
    assert gc.isenabled()

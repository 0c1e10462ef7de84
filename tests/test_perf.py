"""``gc_paused`` pauses the cyclic collector inside its block only, nesting included."""

from __future__ import annotations

import gc

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

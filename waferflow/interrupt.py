"""Ctrl-C: the one place that decides what SIGINT does.

Python turns SIGINT into ``KeyboardInterrupt`` in the main thread, between bytecodes;
the CLI catches it, prints ``waferflow: interrupted`` and exits 130, and outputs are
only renamed into place at the very end (``fileio.Staged``), so nothing is written.
Two things would break that, and are handled here:

* native code that runs a long time: CP-SAT's ``solve`` releases the GIL but the main
  thread sits inside it, so Python could not act on Ctrl-C until the solve ended.
  ``run_interruptible`` runs such a call in a helper thread and waits for it in the
  main thread, where Ctrl-C is seen at once; it then asks the call to stop (CP-SAT's
  ``stop_search``), waits for it and raises ``KeyboardInterrupt``. (CP-SAT's own
  ``catch_sigint_signal`` must stay off: it replaces Python's handler, ends the
  search early *as if it had finished*, and leaves a handler that kills the process
  on the next Ctrl-C.)
* a group of renames that must not be cut in half: ``deferred`` holds Ctrl-C back
  until the block ends and then raises it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a process ended by Ctrl-C


def install() -> None:
    """Make SIGINT raise ``KeyboardInterrupt`` (the CLI calls this first). A process
    started with SIGINT ignored (a background job of a script) keeps ignoring it."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_interruptible(work: Callable[[], T], stop: Callable[[], None]) -> T:
    """``work()``, run so that Ctrl-C interrupts it: on ``KeyboardInterrupt`` in the
    main thread, ``stop()`` is called, ``work`` is waited for, and the interrupt is
    raised again. Off the main thread (where signals never arrive) ``work`` runs
    directly."""
    if threading.current_thread() is not threading.main_thread():
        return work()
    done = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the main thread below
            box["error"] = exc
        finally:
            done.set()

    helper = threading.Thread(target=run, name="waferflow-solve", daemon=True)
    try:
        with deferred():  # once started, the helper is always stopped and waited for
            helper.start()
        # Waited for in short steps: a signal that lands just before a blocking wait
        # does not interrupt it, and would only be seen once the work had finished.
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        with deferred():  # a second Ctrl-C while it stops changes nothing
            while not done.wait(0.05):
                stop()  # again, should the first call come before the work began
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold Ctrl-C back inside the block; raise it (once) when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN or previous is None:
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt

"""Run fuzz cases and sort their outcomes: ``loaded``, ``refused: <ErrorClass>``, or a
bug: ``crash: <ExceptionClass>`` / ``hang``.

``python -m tests.fuzz.runner --cases 20000`` (``make fuzz``) prints the counts per
format and outcome and exits 1 if any case crashed or hung, with the first few cases
(format, seed) to replay: ``python -m tests.fuzz.runner --replay ir-json:1234``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import signal
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Iterator

from tests.fuzz.formats import FORMATS, Format
from tests.fuzz.mutate import mutate
from waferflow.errors import WaferflowError

HANG_GUARD = 30.0  # seconds: only to catch a hang; a case takes milliseconds


class Hang(Exception):
    """A case ran past the hang guard."""


@contextlib.contextmanager
def hang_guard(seconds: float = HANG_GUARD) -> Iterator[None]:
    """Raise ``Hang`` in the block after ``seconds`` (main thread only; elsewhere no
    guard). A hang guard, not a timing assertion: it never fires on a working case."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum: int, frame: object) -> None:
        raise Hang(f"no result after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def case(fmt: Format, seed: int) -> bytes:
    rng = random.Random(f"{fmt.name}:{seed}")
    return mutate(rng, rng.choice(fmt.seeds()), fmt.json)


def outcome(fmt: Format, data: bytes) -> tuple[str, BaseException | None]:
    """What loading ``data`` did; the exception when it was a bug."""
    try:
        with hang_guard():
            fmt.load(data)
    except Hang as exc:
        return "hang", exc
    except WaferflowError as exc:
        if not str(exc).strip():
            return "crash: empty message", exc
        return f"refused: {type(exc).__name__}", None
    except Exception as exc:
        return f"crash: {type(exc).__name__}", exc
    return "loaded", None


def run(cases: int, start: int = 0) -> tuple[Counter[tuple[str, str]], list[str]]:
    counts: Counter[tuple[str, str]] = Counter()
    bugs: list[str] = []
    per_format = -(-cases // len(FORMATS))
    for fmt in FORMATS:
        for seed in range(start, start + per_format):
            what, exc = outcome(fmt, case(fmt, seed))
            counts[(fmt.name, what)] += 1
            if exc is not None and len(bugs) < 10:
                bugs.append(f"{fmt.name}:{seed}: {what}: {str(exc)[:200]}")
    return counts, bugs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000, help="cases over all formats")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--replay", metavar="FORMAT:SEED", help="run one case, with traceback")
    args = parser.parse_args(argv)
    if args.replay:
        name, _, seed = args.replay.partition(":")
        fmt = next(f for f in FORMATS if f.name == name)
        data = case(fmt, int(seed))
        print(repr(data[:2000]))
        with hang_guard():
            try:
                fmt.load(data)
                print("loaded")
            except WaferflowError as exc:
                print(f"refused: {type(exc).__name__}: {exc}")
            except Exception:
                traceback.print_exc()
        return 0
    counts, bugs = run(args.cases, args.start)
    total = sum(counts.values())
    print(f"{total} mutated inputs over {len(FORMATS)} formats")
    for fmt in FORMATS:
        rows = sorted((what, n) for (name, what), n in counts.items() if name == fmt.name)
        print(f"  {fmt.name}: " + ", ".join(f"{what} {n}" for what, n in rows))
    outcomes: Counter[str] = Counter({"crash": 0, "hang": 0})  # printed even when 0
    for (_, what), n in counts.items():
        outcomes[what.split(":")[0]] += n
    print("outcomes: " + ", ".join(f"{what} {n}" for what, n in sorted(outcomes.items())))
    for bug in bugs:
        print(f"BUG {bug}")
    return 1 if outcomes["crash"] or outcomes["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())

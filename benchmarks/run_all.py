"""Run every benchmark in this folder (``make bench``), each in its own process so that
peak-memory figures do not leak between them. Each prints its own table with ratios
against a baseline measured in the same run."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    names = argv if argv else sorted(p.stem for p in HERE.glob("bench_*.py"))
    failed: list[str] = []
    for name in names:
        path = HERE / f"{name}.py"
        print(f"\n=== {name} " + "=" * max(0, 70 - len(name)), flush=True)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, str(path)], check=False)
        print(
            f"--- {name}: exit {proc.returncode}, {time.perf_counter() - start:.1f} s", flush=True
        )
        if proc.returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

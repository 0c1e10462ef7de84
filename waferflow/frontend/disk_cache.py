"""Traced zoo graphs kept on disk, so that a new process skips torch and the trace.

Tracing GPT-2's training step costs seconds (importing torch and transformers, then
``torch.export``); reading its IR text back costs a twentieth of a second. Entries
live in ``$WAFERFLOW_CACHE_DIR/traces`` (else ``$XDG_CACHE_HOME/waferflow/traces``,
else ``~/.cache/waferflow/traces``); ``WAFERFLOW_CACHE_DIR=off`` turns the cache off.

An entry is named by a hash of everything that shapes the trace: the model's
arguments (``TraceKey``), the installed torch and transformers (their versions read
from the package metadata, without importing them), Python's version and a hash of
waferflow's frontend and IR sources, so editing the tracer or the text format
retires every entry. Its first line holds a checksum of the IR text that follows.
Nothing here raises: an entry that cannot be read, whose checksum or key does not
match, or that does not parse is a miss (and is written anew after the trace); a
folder that cannot be written is skipped. At most ``MAX_ENTRIES`` entries are kept,
the least recently used dropped first.

Only this module and ``waferflow.ir`` run on a hit: nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from waferflow.fileio import write_text
from waferflow.ir.graph import Graph
from waferflow.ir.parser import parse_graph
from waferflow.ir.printer import print_graph

CACHE_ENV = "WAFERFLOW_CACHE_DIR"
OFF = "off"
MAX_ENTRIES = 64
FORMAT = 1  # of an entry file; bump when its layout changes
_SUFFIX = ".ir"
_PACKAGES = ("torch", "transformers")  # what tracing a zoo model runs
_SOURCES = ("frontend", "ir")  # waferflow's folders whose code shapes the graph or its text
_STALE_S = 24 * 3600  # a temporary file this old is no write in flight


@dataclass(frozen=True)
class TraceKey:
    """The arguments of ``trace_model`` (``spec`` canonical): one traced graph each."""

    spec: str
    mode: str
    optimizer: str
    batch: int | None
    seq: int | None
    dtype: str | None
    name: str | None
    moe_skew: float


def cache_dir() -> Path | None:
    """The cache's folder, or None when ``$WAFERFLOW_CACHE_DIR`` is ``off`` (or no
    home folder can be found)."""
    raw = os.environ.get(CACHE_ENV, "")
    if raw.strip().lower() == OFF:
        return None
    if raw:
        return Path(raw).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the XDG spec: a relative path is ignored
        return Path(xdg) / "waferflow"
    try:
        return Path.home() / ".cache" / "waferflow"
    except RuntimeError:  # no $HOME and no password entry
        return None


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def source_hash(root: Path) -> str:
    """A hash of the modules in ``root``'s ``frontend`` and ``ir`` folders (``root``:
    the waferflow package), names and bytes; raises ``OSError`` when one is unreadable."""
    digest = hashlib.sha256()
    for folder in _SOURCES:
        for path in sorted((root / folder).glob("*.py")):
            digest.update(f"{folder}/{path.name}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


@functools.cache
def environment() -> dict[str, str] | None:
    """What besides the key shapes a trace: library versions and waferflow's sources
    (None, and no cache, when the sources cannot be read). Computed once per process,
    in a few milliseconds."""
    try:
        sources = source_hash(Path(__file__).resolve().parents[1])
    except OSError:
        return None
    env = {p: _version(p) for p in _PACKAGES}
    env["python"] = ".".join(map(str, sys.version_info[:2]))
    env["sources"] = sources
    return env


def _material(key: TraceKey) -> dict[str, object] | None:
    env = environment()
    return None if env is None else {"format": FORMAT, "key": asdict(key), "env": env}


def _entry_path(folder: Path, material: dict[str, object]) -> Path:
    text = json.dumps(material, sort_keys=True)
    return folder / "traces" / (hashlib.sha256(text.encode()).hexdigest()[:32] + _SUFFIX)


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load(key: TraceKey) -> Graph | None:
    """The graph stored for ``key``, or None (no cache, no entry, or a bad one)."""
    folder = cache_dir()
    material = _material(key)
    if folder is None or material is None:
        return None
    path = _entry_path(folder, material)
    try:
        data = path.read_bytes()
        head, _, body = data.decode("utf-8").partition("\n")
        meta = json.loads(head)
        if meta.get("material") != material or meta.get("sha256") != _checksum(body):
            return None
        graph = parse_graph(body, source=str(path))
    except Exception:  # missing, torn, edited or foreign: a miss, never an error
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: evicted last
    return graph


def store(key: TraceKey, graph: Graph) -> None:
    """Keep ``graph`` for ``key``, if its text reads back as itself and the folder
    can be written; then drop the least recently used entries beyond ``MAX_ENTRIES``."""
    folder = cache_dir()
    material = _material(key)
    if folder is None or material is None:
        return
    text = print_graph(graph)
    try:
        if print_graph(parse_graph(text)) != text:
            return  # the text form would lose something: never hand out another graph
    except Exception:
        return
    path = _entry_path(folder, material)
    head = json.dumps({"material": material, "sha256": _checksum(text)}, sort_keys=True)
    try:
        write_text(path, head + "\n" + text)
        _evict(path.parent)
    except OSError:
        return  # a read-only or full disk: the compile goes on without the cache


def _evict(traces: Path) -> None:
    entries = []
    now = time.time()
    for p in traces.iterdir():
        with contextlib.suppress(OSError):
            mtime = p.stat().st_mtime_ns
            if not p.name.startswith("."):
                if p.suffix == _SUFFIX:
                    entries.append((mtime, p.name, p))
            elif now - mtime / 1e9 > _STALE_S:  # a write a killed process left behind
                p.unlink()
    entries.sort()
    for _, _, p in entries[: max(0, len(entries) - MAX_ENTRIES)]:
        with contextlib.suppress(OSError):
            p.unlink()


__all__ = [
    "CACHE_ENV",
    "MAX_ENTRIES",
    "OFF",
    "TraceKey",
    "cache_dir",
    "environment",
    "load",
    "source_hash",
    "store",
]

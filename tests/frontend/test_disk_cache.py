"""Traced zoo graphs kept on disk: a later process reads the IR text back instead of
importing torch and tracing; any bad entry is a miss, any unwritable folder a skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from waferflow.frontend import clear_trace_cache, disk_cache, trace_model
from waferflow.frontend.disk_cache import TraceKey
from waferflow.ir import print_graph

TINY = {"mode": "infer", "batch": 2, "seq": 16}


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An empty cache folder (its ``traces`` subfolder) and an empty in-process cache."""
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path / "cache"))
    clear_trace_cache()
    yield tmp_path / "cache" / "traces"
    clear_trace_cache()


def entries(traces: Path) -> list[Path]:
    return sorted(p for p in traces.iterdir() if not p.name.startswith("."))


def test_a_new_process_reads_the_graph_back_instead_of_tracing(
    traces: Path, loads: list[str]
) -> None:
    cold = trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16)
    assert loads == ["hf:gpt2-tiny"] and len(entries(traces)) == 1
    clear_trace_cache()  # what a new process starts with
    warm = trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16)
    assert loads == ["hf:gpt2-tiny"]  # not traced again
    assert print_graph(warm) == print_graph(cold)
    assert [v.name for v in warm.outputs] == [v.name for v in cold.outputs]
    warm.erase_ops([warm.ops[-1]])  # a pass rewriting its copy leaves both caches alone
    again = trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16)
    assert print_graph(again) == print_graph(cold)
    clear_trace_cache()
    assert print_graph(trace_model("HF:GPT2-Tiny", mode="train", batch=2, seq=16)) == print_graph(cold)  # fmt: skip
    assert loads == ["hf:gpt2-tiny"]


@pytest.mark.parametrize(
    ("model", "change"),
    [
        ("hf:gpt2-tiny", {"batch": 3}),
        ("hf:gpt2-tiny", {"seq": 8}),
        ("hf:gpt2-tiny", {"mode": "train"}),
        ("hf:gpt2-tiny", {"dtype": "bf16"}),
        ("hf:gpt2-tiny", {"name": "other"}),
        ("hf:mixtral-tiny", {"moe_skew": 1.5}),  # a skew needs experts to size
    ],
)
def test_every_argument_that_shapes_the_trace_is_in_the_key(
    traces: Path, loads: list[str], model: str, change: dict[str, object]
) -> None:
    trace_model(model, **TINY)
    clear_trace_cache()
    trace_model(model, **{**TINY, **change})  # type: ignore[arg-type]
    assert len(loads) == 2 and len(entries(traces)) == 2


@pytest.mark.parametrize("field", ["torch", "transformers", "python", "sources"])
def test_another_library_version_or_waferflow_source_is_a_miss(
    traces: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    trace_model("hf:gpt2-tiny", **TINY)
    env = disk_cache.environment()
    assert env is not None
    monkeypatch.setattr(disk_cache, "environment", lambda: {**env, field: "changed"})
    clear_trace_cache()
    trace_model("hf:gpt2-tiny", **TINY)
    assert len(loads) == 2 and len(entries(traces)) == 2


def test_the_environment_reads_versions_without_importing_and_hashes_the_sources(
    tmp_path: Path,
) -> None:
    import importlib.metadata

    env = disk_cache.environment()
    assert env is not None
    assert env["torch"] == importlib.metadata.version("torch")
    assert env["transformers"] == importlib.metadata.version("transformers")
    root = tmp_path / "waferflow"
    for folder in ("frontend", "ir"):
        (root / folder).mkdir(parents=True)
        (root / folder / "a.py").write_text("x = 1\n")
    before = disk_cache.source_hash(root)
    (root / "ir" / "a.py").write_text("x = 2\n")  # an edit to the IR code
    edited = disk_cache.source_hash(root)
    (root / "frontend" / "b.py").write_text("")  # a new frontend module
    assert len({before, edited, disk_cache.source_hash(root)}) == 3
    real = Path(disk_cache.__file__).resolve().parents[1]
    assert env["sources"] == disk_cache.source_hash(real)


def _rewrite_body(path: Path, body: str, checksum: bool) -> None:
    head, _, _ = path.read_text(encoding="utf-8").partition("\n")
    if checksum:  # a consistent entry whose text is no graph
        meta = json.loads(head)
        meta["sha256"] = disk_cache._checksum(body)
        head = json.dumps(meta)
    path.write_text(head + "\n" + body, encoding="utf-8")


NOT_A_GRAPH = "graph @g {\n  %x = bogus\n}\n"


def _body(path: Path) -> str:
    return path.read_text(encoding="utf-8").partition("\n")[2]


CORRUPTIONS = {
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "not UTF-8": lambda p: p.write_bytes(b"\xff\xfe" + p.read_bytes()),
    "no header": lambda p: p.write_text(_body(p)),
    "edited text": lambda p: _rewrite_body(p, _body(p).replace("f32", "f16"), checksum=False),
    "unparsable, checksum right": lambda p: _rewrite_body(p, NOT_A_GRAPH, checksum=True),
    "another key": lambda p: p.write_text(p.read_text().replace('"batch": 2', '"batch": 5', 1)),
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=list(CORRUPTIONS))
def test_a_bad_entry_is_traced_again_and_rewritten(
    traces: Path, loads: list[str], corrupt: object
) -> None:
    good = print_graph(trace_model("hf:gpt2-tiny", **TINY))
    [entry] = entries(traces)
    corrupt(entry)  # type: ignore[operator]
    clear_trace_cache()
    assert print_graph(trace_model("hf:gpt2-tiny", **TINY)) == good
    assert len(loads) == 2  # traced again, never a wrong graph
    clear_trace_cache()
    assert print_graph(trace_model("hf:gpt2-tiny", **TINY)) == good
    assert len(loads) == 2 and entries(traces) == [entry]  # the rewritten entry serves


def test_off_turns_the_disk_cache_off(
    loads: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(disk_cache.CACHE_ENV, "Off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    clear_trace_cache()
    trace_model("hf:gpt2-tiny", **TINY)
    clear_trace_cache()
    trace_model("hf:gpt2-tiny", **TINY)
    assert len(loads) == 2 and list(tmp_path.iterdir()) == []
    clear_trace_cache()


def test_the_folder_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path / "mine"))
    assert disk_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv(disk_cache.CACHE_ENV, "off")
    assert disk_cache.cache_dir() is None
    monkeypatch.delenv(disk_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert disk_cache.cache_dir() == tmp_path / "xdg" / "waferflow"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert disk_cache.cache_dir() == tmp_path / "home" / ".cache" / "waferflow"


def test_an_unwritable_folder_is_skipped(
    loads: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache's folder would be\n")
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(blocker / "cache"))  # no root can write there
    clear_trace_cache()
    graph = trace_model("hf:gpt2-tiny", **TINY)
    assert graph.ops and loads == ["hf:gpt2-tiny"]
    assert blocker.read_text().startswith("a file")
    clear_trace_cache()


def test_the_least_recently_used_entries_are_dropped(
    traces: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(disk_cache, "MAX_ENTRIES", 2)
    trace_model("hf:gpt2-tiny", **{**TINY, "batch": 1})
    [first] = entries(traces)
    trace_model("hf:gpt2-tiny", **{**TINY, "batch": 2})
    [second] = [p for p in entries(traces) if p != first]
    os.utime(first, (1_000, 1_000))
    os.utime(second, (2_000, 2_000))
    clear_trace_cache()
    trace_model("hf:gpt2-tiny", **{**TINY, "batch": 1})  # a hit: now the newest
    assert len(loads) == 2
    stale = traces / f".{first.name}.x.tmp.ir"  # a write a killed process left
    stale.write_text("")
    os.utime(stale, (1_000, 1_000))
    trace_model("hf:gpt2-tiny", **{**TINY, "batch": 3})
    assert len(loads) == 3
    left = entries(traces)
    assert len(left) == 2 and first in left and second not in left
    assert not stale.exists()


def test_a_graph_whose_text_does_not_read_back_is_not_stored(
    traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = trace_model("hf:gpt2-tiny", **TINY)
    other = trace_model("hf:gpt2-tiny", **{**TINY, "batch": 3})
    monkeypatch.setattr(disk_cache, "parse_graph", lambda text, source="": other)
    key = TraceKey("hf:gpt2-tiny", "infer", "sgd", 2, 16, None, "x", 1.0)
    disk_cache.store(key, graph)
    assert len(entries(traces)) == 2  # the two traces above, not this one


def test_a_model_file_is_never_stored(
    traces: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = tmp_path / "m.py"
    model.write_text(
        textwrap.dedent("""
        import torch
        def make(batch=2):
            return torch.nn.Linear(4, 4), (torch.randn(batch, 4),)
        """)
    )
    monkeypatch.chdir(tmp_path)
    trace_model("m.py:make")
    trace_model("hf:gpt2-tiny", **TINY)
    assert len(entries(traces)) == 1


_PROBE = """
import sys
from waferflow.frontend import trace_model
from waferflow.ir import print_graph
graph = trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16)
sys.stdout.write(print_graph(graph))
print("TORCH" if "torch" in sys.modules else "NO-TORCH", file=sys.stderr)
"""


def test_a_warm_process_never_imports_torch(traces: Path) -> None:
    cold = print_graph(trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False
    )  # the environment names the same folder
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "NO-TORCH"
    assert proc.stdout == cold


def test_the_trace_command_is_warm_without_torch(traces: Path, tmp_path: Path) -> None:
    trace_model("hf:gpt2-tiny", **TINY)
    probe = (
        "import sys\nfrom waferflow.cli import main\ncode = main(sys.argv[1:])\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', code, file=sys.stderr)\n"
    )
    out = tmp_path / "g.ir"
    argv = ["trace", "hf:gpt2-tiny", "--batch", "2", "--seq", "16", "-o", str(out)]
    proc = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=False
    )
    assert proc.stderr.strip().endswith("NO-TORCH 0"), proc.stderr
    assert out.read_text() == print_graph(trace_model("hf:gpt2-tiny", **TINY))


def test_a_warm_compile_never_imports_torch(traces: Path) -> None:
    """``waferflow.compile`` of a zoo model imports the tracer only on a miss."""
    trace_model("hf:gpt2-tiny", **TINY)
    probe = (
        "import sys\nimport waferflow as wf\n"
        "c = wf.compile('hf:gpt2-tiny', wafer='mesh16x16', mode='infer', batch=2, seq=16, "
        "plan='dp=2', place='none')\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )  # the environment names the same folder
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().endswith("NO-TORCH"), proc.stderr

"""The command line under signals, run as a real process: Ctrl-C during placement ends
the run (exit 130, ``waferflow: interrupted``, no output written); SIGKILL while the
outputs are written leaves the old file, never a partial one.

The tests wait on what the process shows (a progress line, a temporary file), never
on the clock; the long timeouts only keep a broken build from hanging the suite.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HANG_GUARD = 900.0  # seconds: a loaded 2-core machine is slow, a hang is forever

MODEL = """
import torch
from torch import nn


def make(batch=8):
    layers = []
    for _ in range(8):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    return nn.Sequential(*layers), (torch.randn(batch, 64),)
"""


def _command(tmp_path: Path, *extra: str, wafer: str = "mesh16x16") -> list[str]:
    model = tmp_path / "mlp.py"
    model.write_text(MODEL, encoding="utf-8")
    return [
        sys.executable, "-m", "waferflow.cli", "compile", f"{model}:make", "--mode", "train",
        "--wafer", wafer, "--plan", "dp=2,tp=2,pp=4,microbatches=2", *extra,
    ]  # fmt: skip


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as from a terminal, whatever runs the tests


def test_ctrl_c_during_placement_ends_the_run_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    # a deterministic budget far beyond what the test waits for: the run is in placement
    cmd = _command(tmp_path, "--place-time", "600", "-o", str(out))
    master, slave = pty.openpty()  # progress lines are shown on a terminal only
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=slave, cwd=tmp_path, preexec_fn=_default_sigint
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + HANG_GUARD
    try:
        while b"parallelize+place" not in seen:
            assert proc.poll() is None, f"ended before placement: {seen.decode(errors='replace')}"
            assert time.monotonic() < deadline, "no placement progress line (hang guard)"
            if select.select([master], [], [], 1.0)[0]:
                seen += os.read(master, 4096)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=HANG_GUARD)
        while select.select([master], [], [], 0.1)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = seen.decode(errors="replace")
    assert code == 130, text
    assert "waferflow: interrupted" in text and "Traceback" not in text
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["mlp.py"]  # no temporary left either


def test_sigkill_while_writing_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    old = '{"old": "complete"}\n'
    out.write_text(old, encoding="utf-8")
    # a small wafer: only the writing matters here
    png = str(tmp_path / "p.png")
    cmd = _command(
        tmp_path, "--place-time", "0.1", "-o", str(out), "--png", png, "-q", wafer="mesh4x4"
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    deadline = time.monotonic() + HANG_GUARD
    try:
        # the outputs are being written once a temporary appears beside plan.json
        while not any(p.name.startswith(".plan.json.") for p in tmp_path.iterdir()):
            assert proc.poll() is None, "finished without writing through a temporary file"
            assert time.monotonic() < deadline, "no output written (hang guard)"
            time.sleep(0.002)
        proc.kill()  # SIGKILL: no handler, no cleanup
        proc.wait(timeout=HANG_GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    text = out.read_text(encoding="utf-8")
    # the old file, or (had the rename just happened) the new one whole: never a part
    assert text == old or json.loads(text)["format"] == "waferflow.compiled"
    assert not (tmp_path / "p.png").exists() or text != old


@pytest.mark.parametrize("argv", [["--coarsen", "0"], ["--coarsen", "-3"]])
def test_coarsen_below_one_is_an_error(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from waferflow.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["compile", "cnn:amcoda", "--wafer", "mesh4x4", *argv])
    assert exc.value.code == 2
    assert "--coarsen: expected an integer >= 1" in capsys.readouterr().err


def test_the_command_line_imports_nothing_heavy_before_it_owns_ctrl_c() -> None:
    """``import waferflow.cli`` (what the ``waferflow`` script does before ``main``)
    loads no heavy module, so Ctrl-C while torch, numpy or OR-Tools import happens
    inside ``main``, which reports it."""
    probe = (
        "import sys, waferflow.cli; "
        "print(sorted(m for m in ('torch', 'numpy', 'ortools', 'waferflow.api', "
        "'waferflow.cli_amcoda') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_ctrl_c_while_the_package_imports(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import waferflow.cli as cli

    def importing() -> None:
        raise KeyboardInterrupt  # as if pressed while the subcommands' modules import

    monkeypatch.setattr(cli, "build_parser", importing)
    old = signal.getsignal(signal.SIGINT)
    try:
        assert cli.main(["compile", "cnn:amcoda", "--wafer", "mesh4x4"]) == 130
    finally:
        signal.signal(signal.SIGINT, old)
    assert capsys.readouterr().err == "waferflow: interrupted\n"

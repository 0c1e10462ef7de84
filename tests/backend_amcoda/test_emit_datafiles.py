"""Input files (§5): layout, padding, values, and slices that agree with the whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.backend_amcoda.test_emit import GOLDEN, check_golden, tiny_cnn
from waferflow.backend_amcoda import Cnn, generate_experiment
from waferflow.backend_amcoda.datafiles import (
    COLUMN,
    FileKind,
    InputFile,
    count_problem,
    file_values,
    format_file,
    plan_input_files,
    read_numbers,
    split_tensor,
    write_input_files,
)
from waferflow.backend_amcoda.emit import emit_experiment
from waferflow.errors import PlanError


def numbers(root: Path, name: str) -> np.ndarray:
    return read_numbers(root / "script" / name)


def test_files_of_a_plan_and_their_shapes() -> None:
    files = {f.name: f for f in plan_input_files(generate_experiment(tiny_cnn(), "gpipe=2"))}
    assert sorted(files) == [
        "data_1.txt", "data_2.txt", "label_1.txt", "label_2.txt",
        "weight1.txt", "weight2.txt", "weight4.txt",
    ]  # fmt: skip
    assert files["data_2.txt"] == InputFile("data_2.txt", FileKind.DATA, (2, 4, 8, 8), 0, 2)
    assert files["weight1.txt"].shape == (8, 4, 3, 3) and files["weight1.txt"].row == 9
    assert files["weight4.txt"].shape == (1, 1, 32, 4) and files["weight4.txt"].row == 4
    assert files["data_1.txt"].row == 8 and files["label_1.txt"].row == 4


def test_layout_columns_rows_and_correct_padding() -> None:
    # 2 samples x 4 classes = 8 values: 24 zeros make the package full (the authors'
    # generator would append 8 mod 32 = 8, leaving the last package short)
    f = InputFile("label.txt", FileKind.LABEL, (2, 1, 1, 4))
    codes = np.array([0, 100, 0, 0, 0, 0, 0, 100])
    text = format_file(f, codes).decode()
    lines = text.splitlines()
    assert lines[0] == "0         1         0         0         "
    assert lines[1].split() == ["0", "0", "0", "1"]
    assert lines[2].split() == ["0"] * 24
    assert all(len(ln) == COLUMN * len(ln.split()) for ln in lines)
    assert len(text.split()) == 32 == f.padded
    w = InputFile("weight1.txt", FileKind.WEIGHT, (2, 1, 3, 3), 1)
    wt = format_file(w, np.arange(-9, 9)).decode().splitlines()
    assert wt[0].split() == ["-0.09", "-0.08", "-0.07", "-0.06", "-0.05", "-0.04", "-0.03",
                             "-0.02", "-0.01"]  # fmt: skip
    assert len(wt) == 3 and wt[2].split() == ["0"] * 14


def test_values_follow_the_authors_distributions(tmp_path: Path) -> None:
    cnn = tiny_cnn(batch=8)
    root = emit_experiment(generate_experiment(cnn, "pipe"), tmp_path / "x", seed=5)
    w = numbers(root, "weight2.txt")
    assert w.size == 8 * 8 * 9 and set(np.round(w * 100)) <= set(range(-10, 11))
    labels = numbers(root, "label.txt").reshape(8, 4)
    assert (labels.sum(axis=1) == 1).all() and set(labels.ravel()) <= {0.0, 1.0}
    cls = labels.argmax(axis=1)
    data = numbers(root, "data.txt").reshape(8, 4, 8, 8)
    assert set(np.abs(data).ravel()) <= set(range(11))
    hit = (np.arange(8) % 4)[None, None, None, :] == cls[:, None, None, None]
    assert (data[np.broadcast_to(hit, data.shape)] >= 0).all()
    assert (data[np.broadcast_to(~hit, data.shape)] <= 0).all()


def test_slices_agree_with_the_whole(tmp_path: Path) -> None:
    whole = emit_experiment(generate_experiment(tiny_cnn(), "pipe"), tmp_path / "pipe")
    dt = emit_experiment(generate_experiment(tiny_cnn(), "layers=dt,ways=2"), tmp_path / "dt")
    g2 = emit_experiment(generate_experiment(tiny_cnn(), "gpipe=2"), tmp_path / "g2")
    # replica data: contiguous samples; weight slices: contiguous output channels
    assert np.array_equal(
        np.concatenate([numbers(dt, "data_1.txt"), numbers(dt, "data_2.txt")]),
        numbers(whole, "data.txt"),
    )
    w2 = numbers(whole, "weight2.txt")
    parts = [numbers(dt, "weight2_1.txt"), numbers(dt, "weight2_2.txt")]
    assert np.array_equal(np.concatenate(parts), w2)
    assert parts[0].size == 4 * 8 * 9
    assert np.array_equal(numbers(dt, "weight1.txt"), numbers(whole, "weight1.txt"))
    # micro-batches, padded on their own (2 samples x 4 classes -> one full package each)
    lab = [numbers(g2, "label_1.txt"), numbers(g2, "label_2.txt")]
    assert [x.size for x in lab] == [32, 32]
    assert np.array_equal(np.concatenate([x[:8] for x in lab]), numbers(whole, "label.txt")[:16])


def test_split_tensor_by_batch_and_by_channel() -> None:
    full = np.arange(2 * 4 * 2 * 2).reshape(2, 4, 2, 2)
    assert np.array_equal(split_tensor(full, 2, 1, by="batch"), full[1:2])
    by_c = split_tensor(full, 2, 1, by="channel")
    assert by_c.shape == (2, 2, 2, 2) and np.array_equal(by_c, full[:, 2:4])
    # channel slices of every sample, in order, rebuild the whole
    assert np.array_equal(
        np.concatenate([split_tensor(full, 4, i, by="channel") for i in range(4)], axis=1), full
    )
    with pytest.raises(ValueError, match="divide"):
        split_tensor(full, 3, 0, by="batch")


def test_one_name_with_two_sizes_is_refused() -> None:
    exp = generate_experiment(tiny_cnn(), "pipe")
    p2 = exp.programs[1]
    bad = p2.host_inputs[0].__class__("weight1.txt", p2.host_inputs[0].floats)
    exp = exp.__class__(exp.name, (exp.programs[0], p2.__class__(
        p2.actor, p2.entries, (bad,), p2.host_outputs, p2.role, p2.layer
    ), *exp.programs[2:]))  # fmt: skip
    with pytest.raises(PlanError, match=r"weight1\.txt is sent with"):
        plan_input_files(exp)


def test_count_problem(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    assert "missing" in (count_problem(f, 32) or "")
    f.write_text(" ".join(["1"] * 31))
    assert "holds 31 numbers" in (count_problem(f, 32) or "")
    f.write_text(" ".join(["1"] * 31 + ["x"]))
    assert "'x'" in (count_problem(f, 32) or "")
    assert count_problem(f, 32, parse=False) is None


def test_small_files_golden(tmp_path: Path) -> None:
    cnn = Cnn(2, tiny_cnn().layers)
    files = plan_input_files(generate_experiment(cnn, "pipe"))
    values = file_values(files, seed=0)
    text = "".join(
        f"=== {f.name}\n" + format_file(f, values[f.name]).decode()
        for f in files
        if f.name in ("label.txt", "weight4.txt")
    )
    check_golden(GOLDEN / "tiny_pipe_label_weight4.txt", text)
    written = write_input_files(generate_experiment(cnn, "pipe"), tmp_path)
    assert sorted(p.name for p in written) == sorted(f.name for f in files)

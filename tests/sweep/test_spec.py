"""Sweep files: the jobs they name (product, then points), their keys, and an error
naming the file and the field for every kind of bad input, before any job runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from waferflow.errors import ConfigError
from waferflow.sweep.spec import build_wafer, load_sweep, override_columns, wafer_of


def test_grid_is_a_product_in_file_order_then_the_points(write_sweep) -> None:
    path = write_sweep(
        """
[grid]
plan = ["auto", "dp=1,tp=2"]
override.link.bandwidth = ["50 GB/s", "100 GB/s"]

[[points]]
model = "hf:llama-tiny"
plan = "none"
"""
    )
    s = load_sweep(path)
    got = [(j.model, j.plan, dict(j.override).get("link.bandwidth")) for j in s.jobs]
    assert got == [
        ("hf:gpt2-tiny", "auto", "50 GB/s"),
        ("hf:gpt2-tiny", "auto", "100 GB/s"),
        ("hf:gpt2-tiny", "dp=1,tp=2", "50 GB/s"),
        ("hf:gpt2-tiny", "dp=1,tp=2", "100 GB/s"),
        ("hf:llama-tiny", None, None),
    ]
    assert [j.index for j in s.jobs] == [0, 1, 2, 3, 4]
    assert s.varied == ("model", "plan", "link.bandwidth")
    assert s.override_paths == ("link.bandwidth",)
    assert s.output == path.parent / "s.sweep"
    # the job's wafer is the preset with the override, read as a wafer file reads it
    w = wafer_of(s.jobs[0])
    assert w.link.bandwidth == 50e9 and w.rows == 4 and w.name == "mesh4x4"
    assert wafer_of(s.jobs[4]).link.bandwidth == 100e9  # the preset's own
    assert override_columns(s.jobs[1], wafer_of(s.jobs[1])) == {"link.bandwidth": 100e9}


def test_only_points_and_a_view_with_overrides(write_sweep) -> None:
    path = write_sweep(
        """
[[points]]
wafer = "mesh16x16@4x"
override.wafer.sram_bytes = "2 MiB"
override.faults.random_dead_fraction = 0.25
"""
    )
    (job,) = load_sweep(path).jobs
    w = wafer_of(job)
    fine = build_wafer("mesh16x16", job.override, path.parent)
    assert fine.sram_bytes == 2 * 2**20 and len(fine.dead_cores) == 64
    assert (w.rows, w.cols, w.coarsen_factor) == (4, 4, 4)
    assert w == fine.coarsen(4)
    cols = override_columns(job, w)
    assert cols["faults.random_dead_fraction"] == 0.25  # no such field in a wafer: as given


def test_list_valued_overrides_vary(write_sweep) -> None:
    s = load_sweep(write_sweep("[grid]\noverride.faults.dead_cores = [[[0, 1]], [[2, 2], [3, 3]]]"))
    assert s.varied == ("faults.dead_cores",)
    assert [len(wafer_of(j).dead_cores) for j in s.jobs] == [1, 2]


def test_keys_follow_inputs_and_version_not_position(write_sweep) -> None:
    a = load_sweep(write_sweep('[grid]\nplan = ["auto", "none"]', name="a")).jobs
    b = load_sweep(write_sweep('[grid]\nplan = ["none", "auto"]', name="b")).jobs
    assert a[0].key("0.1.0") == b[1].key("0.1.0")  # same inputs, other position
    assert a[0].key("0.1.0") != a[1].key("0.1.0")
    assert a[0].key("0.1.0") != a[0].key("0.2.0")
    c = load_sweep(write_sweep("[job.override]\nlink.latency = 2e-9", name="c")).jobs
    assert c[0].key("0.1.0") != b[0].key("0.1.0")


GRID = "[grid]\n"


@pytest.mark.parametrize(
    ("top", "body", "needle"),
    [
        ("", GRID + 'palce = ["none"]', "unknown key grid.palce (did you mean 'place'?)"),
        ('colour = "red"', "", "unknown key colour"),
        ("", GRID + 'batch = [1, "two"]', "grid.batch[1] = 'two': must be an integer >= 1"),
        ("", GRID + "batch = []", "grid.batch must be a non-empty list"),
        ("", GRID + 'override.link.bandwidth = ["50 GB/s", "fast"]',
         "grid.override.link.bandwidth[1] = 'fast'"),
        ("", GRID + 'override.link.bandwith = ["50 GB/s"]', "did you mean 'bandwidth'?"),
        ("", GRID + "override.dies.rows = [2, 3]", "grid.override.dies.rows[1] = 3"),
        ("", '[[points]]\nplan = "dp=2,tq=2"',
         "points[0].plan = 'dp=2,tq=2': plan: unknown key 'tq'"),
        ("", '[[points]]\nmode = "training"',
         "points[0].mode = 'training' (did you mean 'train'?)"),
        # only wrong together: 8 die rows fit torus8x8, not mesh4x4
        ("", GRID + 'wafer = ["torus8x8", "mesh4x4"]\noverride.dies.rows = [8]',
         "job 1 (hf:gpt2-tiny mesh4x4 dies.rows=8)"),
        ("", GRID + 'model = ["hf:gpt3"]', "job 0 (hf:gpt3 mesh4x4): model:"),
        # an inference job has no optimizer update: the CLI refuses the pair, so does a sweep
        ("", GRID + 'mode = ["train", "infer"]\noptimizer = ["adamw"]',
         "job 1 (hf:gpt2-tiny mesh4x4): optimizer = 'adamw' applies to training only, and this "
         "job has mode = 'infer'"),
        ("", GRID + 'wafer = ["mesh5x5"]', "job 0"),
        ("points = 3", "", "points must be an array of tables"),
    ],
)  # fmt: skip
def test_bad_input_names_the_file_and_field(write_sweep, top: str, body: str, needle: str) -> None:
    path = write_sweep(body, top=top)
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and needle in message, message
    assert not (path.parent / "s.sweep").exists()


def test_a_job_needs_a_model_and_a_wafer(write_sweep) -> None:
    path = write_sweep("", job='[job]\nwafer = "mesh4x4"')
    with pytest.raises(ConfigError, match=r"job 0: no model: give job\.model, grid\.model"):
        load_sweep(path)


def test_malformed_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[grid\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: malformed TOML"):
        load_sweep(bad)
    with pytest.raises(ConfigError, match="no such sweep file"):
        load_sweep(tmp_path / "none.toml")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(("name", "jobs"), [("sweep_d2d", 12), ("sweep_faults", 22)])
def test_shipped_sweeps_read(name: str, jobs: int) -> None:
    s = load_sweep(EXAMPLES / f"{name}.toml")
    assert len(s.jobs) == jobs and s.output == Path(f"{name}.sweep")
    assert any(j.plan == "auto" for j in s.jobs)


def test_job_overrides_are_checked_with_the_grid_ones(write_sweep) -> None:
    # a die-to-die latency alone is incomplete: its bandwidth comes from the grid
    ok = "[job.override]\ndies.rows = 2\ndies.link.latency = '5 ns'\n"
    grid = '[grid]\noverride.dies.link.bandwidth = ["10 GB/s", "20 GB/s"]'
    assert len(load_sweep(write_sweep(ok + grid)).jobs) == 2
    with pytest.raises(ConfigError, match=r"job\.override: missing dies\.link\.bandwidth"):
        load_sweep(write_sweep(ok))


def test_wafer_file_with_overrides_is_read_relative_to_a_relatively_named_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `waferflow sweep sweeps/s.toml` from the folder above: the wafer file is joined to
    # the sweep's folder once (it was joined twice, sweeps/sweeps/../w.toml, when overridden)
    (tmp_path / "w.toml").write_text('preset = "mesh4x4"\n[wafer]\nname = "w"\n')
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "s.toml").write_text(
        '[job]\nmodel = "hf:gpt2-tiny"\nwafer = "../w.toml"\n'
        '[grid]\noverride.link.bandwidth = ["50 GB/s", "100 GB/s"]\n'
    )
    monkeypatch.chdir(tmp_path)
    s = load_sweep(Path("sweeps/s.toml"))
    assert [wafer_of(j).link.bandwidth for j in s.jobs] == [50e9, 100e9]
    assert build_wafer("../w.toml", (("link.bandwidth", "50 GB/s"),), Path("sweeps")).rows == 4

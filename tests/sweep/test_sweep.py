"""``dlsched sweep``: a grid of simulations on Ray gives what the same runs give one by one, and resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.sim.config import RunConfig
from dlsched.sim.run import resolve_data_dir, simulate
from dlsched.sweep.config import SweepConfig, cells
from dlsched.sweep.store import CellStore

runner = CliRunner()
#: Summary keys that measure this machine's wall clock, not the run: they differ between any two runs.
WALL_CLOCK_KEYS = {"sim_wall_s", "policy_time_median_s", "policy_time_p99_s"}
GRID = {
    "cluster": "sia-physical-44",
    "presets": ["fifo", "sia", "gavel"],
    "traces": ["synthetic:rate=10,hours=1,seed=1", "synthetic:rate=10,hours=1,seed=2",
               "synthetic:rate=6,hours=1,seed=3", "synthetic:rate=12,hours=0.5,seed=4"],
    "seeds": 2,
}
#: The grid runs on a local Ray: with every other Ray test, on one xdist worker (tests/runtime/test_ray_runtime.py).
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="the runtime extra (Ray) is not installed")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    yield ray
    ray.shutdown()


def _write(path: Path, grid: dict) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(grid))
    return path


def _without_wall_clock(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in WALL_CLOCK_KEYS}


def test_sweep_equals_the_runs_made_one_by_one(tmp_path: Path, local_ray):
    cfg = _write(tmp_path / "grid.yaml", GRID)
    res = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "out"), "--format", "json"],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    grid = cells(SweepConfig(**GRID), data_dir=resolve_data_dir(None))  # as the command resolves it
    assert len(grid) == 3 * 4 * 2
    store = CellStore(tmp_path / "out")
    for cell in grid:
        alone = simulate(RunConfig(cluster=GRID["cluster"], trace=cell.trace, policy=cell.preset, seed=cell.seed))
        swept = store.load(cell)["summary"]
        mine = _without_wall_clock(alone.summary)
        assert {k: swept[k] for k in mine} == mine  # exactly: the same function on the same configuration
        assert swept["completed"] == alone.summary["completed"] > 0
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(rows) == 3 * 4 and all(r["seeds"] == 2 for r in rows)
    table = (tmp_path / "out" / "results.csv").read_text().splitlines()
    assert len(table) == 1 + 24
    report = (tmp_path / "out" / "report.md").read_text()
    assert all(f"## {t}" in report for t in GRID["traces"])


def test_interrupted_sweep_reruns_only_unfinished_cells(tmp_path: Path, local_ray):
    from dlsched.sweep.execute import run_cells

    grid = cells(SweepConfig(**GRID))
    store = CellStore(tmp_path)
    seen: list[str] = []

    def stop_after_three(cell, record):
        seen.append(cell.key)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_cells(grid, store, on_cell=stop_after_three)
    finished = {p.stem: p.stat().st_mtime_ns for p in store.cells_dir.glob("*.json")}
    assert set(finished) == set(seen)
    ran = run_cells(grid, store)
    assert {c.key for c in ran} == {c.key for c in grid} - set(finished)
    assert all(store.done(c) for c in grid)
    assert {p.stem: p.stat().st_mtime_ns for p in store.cells_dir.glob("*.json") if p.stem in finished} == finished
    assert run_cells(grid, store) == []


@settings(max_examples=25, deadline=None)
@given(presets=st.lists(st.sampled_from(["fifo", "sia", "gavel", "las"]), min_size=1, max_size=4, unique=True),
       seeds=st.integers(1, 4), penalties=st.lists(st.sampled_from([1.0, 1.5, 2.0]), min_size=0, max_size=3,
                                                   unique=True))
def test_grid_has_one_distinct_cell_per_combination(presets, seeds, penalties):
    spec = SweepConfig(cluster="sia-physical-44", presets=presets, traces=["sia-philly:1", "sia-philly:2"],
                       seeds=seeds, tunables={"world.locality_penalty": penalties} if penalties else {})
    grid = cells(spec)
    assert len(grid) == len(presets) * 2 * seeds * max(1, len(penalties))
    assert len({c.key for c in grid}) == len(grid)
    for c in grid:
        assert (c.config.policy, c.config.trace, c.config.seed) == (c.preset, c.trace, c.seed)


@pytest.mark.parametrize(("text", "words"), [
    ("presets: [fifo", ("grid.yaml:", "not YAML")),
    ("cluster: sia-physical-44\npresets: [fifo]\ntraces: [sia-philly:1]\nseeds: 0\n", ("field 'seeds'",)),
    ("cluster: sia-physical-44\npresets: [fifo, fifo]\ntraces: [sia-philly:1]\n", ("field 'presets'", "more than once")),
    ("cluster: sia-physical-44\npresets: [fifo]\ntraces: [sia-philly:1]\nrun: {seed: 3}\n", ("field 'run'", "seed")),
    ("cluster: sia-physical-44\npresets: [fifo]\ntraces: [sia-philly:1]\nbogus: 1\n", ("field 'bogus'", "unknown")),
    ("cluster: sia-physical-44\npresets: [nope]\ntraces: [sia-philly:1]\n", ("grid.yaml", "unknown policy 'nope'")),
    ("cluster: sia-physical-44\npresets: [fifo]\ntraces: [sia-philly:1]\nrun: {round_s: -1}\n",
     ("field 'round_s'", "allowed")),
])
def test_bad_sweep_file_is_one_error_line(tmp_path: Path, text, words):
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out")], catch_exceptions=False)
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for w in words:
        assert w in lines[0]
    assert not (tmp_path / "out").exists()

"""``dlsched.simulate``, ``compare`` and ``configure``: the runs the CLI makes, from Python."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dlsched
from dlsched.cli import app
from dlsched.core import InputError
from testkit import DATA, needs_data

TRACE = "synthetic:rate=20,hours=1,seed=1"
SMALL = {"cluster": "sia-hetero-64", "trace": TRACE, "jobs": 8}


def plain_values(value: object) -> bool:
    """True when ``value`` holds only Python numbers, strings, None, lists and dicts (nothing from numpy)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain_values(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain_values(v) for v in value)
    return value is None or type(value) in (int, float, str, bool)


def test_import_is_cheap_and_exports_the_api() -> None:
    code = ("import sys, dlsched; heavy = [m for m in ('numpy', 'pandas', 'pydantic', 'dlsched.sim') "
            "if m in sys.modules]; print(heavy); print(callable(dlsched.simulate), dlsched.RunConfig.__name__, "
            "dlsched.Ordering.__name__, dlsched.AllocationStage.__name__, dlsched.PlacementStage.__name__)")
    src = str(Path(dlsched.__file__).parents[1])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": src},
                         timeout=120, check=True).stdout.splitlines()
    assert out == ["[]", "True RunConfig Ordering AllocationStage PlacementStage"]
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        dlsched.simulat  # noqa: B018


def test_simulate_returns_plain_summary_tables_and_the_resolved_config(tmp_path: Path) -> None:
    r = dlsched.simulate(policy="tiresias", seed=2, **SMALL)
    assert plain_values(r.summary)
    assert r.summary["policy"] == "tiresias" and r.summary["jobs"] == 8
    assert isinstance(r.jobs, pd.DataFrame) and isinstance(r.rounds, pd.DataFrame)
    assert len(r.jobs) == 8 and len(r.rounds) > 0
    assert r.config.round_s == 60.0 and r.config.seed == 2 and r.config.ordering == "tiresias-2dlas"
    assert math.isclose(r.summary["avg_jct_s"], float(r.jobs["jct_s"].mean()))
    # the same run from the CLI writes the same tables, column for column
    out = tmp_path / "cli"
    res = CliRunner().invoke(app, ["simulate", "--policy", "tiresias", "--seed", "2", "--cluster", SMALL["cluster"],
                                   "--trace", TRACE, "--jobs", "8", "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    for name, frame in (("jobs.csv", r.jobs), ("rounds.csv", r.rounds)):
        written = pd.read_csv(out / name)
        assert list(written.columns) == list(frame.columns)
        as_csv = pd.read_csv(io.StringIO(frame.to_csv(index=False)))  # None reads back as NaN, as in the file
        timed = [c for c in ("policy_s",) if c in written]  # the policy's wall-clock time differs run to run
        pd.testing.assert_frame_equal(written.drop(columns=timed), as_csv.drop(columns=timed))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["avg_jct_s"] == pytest.approx(r.summary["avg_jct_s"])


def test_a_saved_result_replays_with_the_cli(tmp_path: Path) -> None:
    r = dlsched.simulate(policy="fifo", **SMALL)
    folder = r.save(tmp_path / "run")
    replay = CliRunner().invoke(app, ["simulate", "--config", str(folder / "config.json"), "--format", "json"],
                                catch_exceptions=False)
    assert replay.exit_code == 0, replay.output
    assert json.loads(replay.stdout)["avg_jct_s"] == pytest.approx(r.summary["avg_jct_s"])


def test_a_resolved_config_replays_the_run() -> None:
    r = dlsched.simulate(policy="las", **SMALL)
    again = dlsched.simulate(config=r.config)
    assert again.config == r.config
    assert again.summary["avg_jct_s"] == r.summary["avg_jct_s"]


def test_options_route_to_fields_world_settings_and_tunables() -> None:
    cfg = dlsched.configure(policy="tiresias", jobs=5, locality_penalty=2.0, starvation_factor=3,
                            settings={"world.restart_delay_scale": "0.5", "max_time_s": "7200",
                                      "ftf.share": "cluster", "ordering.queue_limits_gpu_s": "100,1000"})
    assert cfg.jobs == 5 and cfg.max_time_s == 7200
    assert cfg.world.locality_penalty == 2.0 and cfg.world.restart_delay_scale == 0.5  # type: ignore[attr-defined]
    assert cfg.ftf.share == "cluster"
    assert cfg.settings == {"starvation_factor": "3", "ordering.queue_limits_gpu_s": "100,1000"}


def test_options_go_over_a_base_config() -> None:
    base = dlsched.configure(policy="sia", jobs=5, world={"locality_penalty": 1.5})
    cfg = dlsched.configure(config=base, seed=3, world={"restart_delay_scale": 2.0})
    assert (cfg.policy, cfg.jobs, cfg.seed) == ("sia", 5, 3)
    assert cfg.world.locality_penalty == 1.5 and cfg.world.restart_delay_scale == 2.0  # type: ignore[attr-defined]
    assert "calibration" not in cfg.world.model_fields_set  # the cluster's own default still applies


@pytest.mark.parametrize(("options", "field", "hint"), [
    ({"policy": "sai"}, "policy", "did you mean 'sia'"),
    ({"policy": "fifo", "ordering": "lass"}, "ordering", "did you mean 'las'"),
    ({"policy": "fifo", "placement": "packd"}, "placement", "did you mean 'packed'"),
    ({"policy": "sia", "settings": {"pp": "1"}}, "pp", "did you mean 'p'"),
    ({"policy": "tiresias", "starvation_factr": 2}, "starvation_factr", "did you mean 'starvation_factor'"),
    ({"job": 20}, "job", "did you mean 'jobs'"),
    ({"world": {"locality_penalti": 2}}, "world.locality_penalti", "unknown world option"),
    ({"jobs": 0}, "jobs", "allowed"),
    ({"policy": "tiresias", "starvation_factor": -1}, "starvation_factor", "must be"),
    ({"policy": "fifo", "placement": "pal-placement"}, "placement", "unknown placement"),
])
def test_bad_options_fail_when_the_config_is_built_naming_the_field(options: dict, field: str, hint: str) -> None:
    with pytest.raises(InputError, match=hint) as info:
        dlsched.configure(**options)
    assert info.value.field == field


def test_compare_averages_seeds_with_their_spread_and_keeps_every_run() -> None:
    c = dlsched.compare("fifo", {"policy": "fifo", "ordering": "las", "label": "fifo-las"}, seeds=2, workers=1,
                        **SMALL)
    assert list(c.summary.index) == ["fifo", "fifo-las"]
    assert list(c.summary["seeds"]) == [2, 2]
    assert {"avg_jct_s", "avg_jct_s_std", "jobs", "jobs_std"} <= set(c.summary.columns)
    for label, runs in c.runs.items():
        assert [r.config.seed for r in runs] == [0, 1]
        assert runs[0].config.trace != runs[1].config.trace  # a generated trace moves on with the seed
        means = [r.summary["avg_jct_s"] for r in runs]
        assert c.summary.loc[label, "avg_jct_s"] == pytest.approx(np.mean(means))
        assert c.summary.loc[label, "avg_jct_s_std"] == pytest.approx(np.std(means, ddof=1))
    assert c["fifo-las"][0].label == "fifo-las"


def test_compare_takes_configs_and_refuses_what_it_cannot_tell_apart() -> None:
    cfg = dlsched.configure(policy="las", **SMALL)
    c = dlsched.compare(cfg, "fifo", workers=1, **SMALL)
    assert list(c.summary.index) == ["las", "fifo"] and "avg_jct_s_std" not in c.summary.columns
    with pytest.raises(InputError, match="two runs are called 'fifo'"):
        dlsched.compare("fifo", "fifo", **SMALL)
    with pytest.raises(InputError, match="at least 1") as info:
        dlsched.compare("fifo", seeds=0)
    assert info.value.field == "seeds"
    with pytest.raises(InputError, match="did you mean 'gavel'"):
        dlsched.compare("fifo", "gavle", **SMALL)


@needs_data("sia", "workloads", "philly")
def test_the_readme_line_runs() -> None:
    code = ("import dlsched; r = dlsched.simulate(cluster='sia-hetero-64', trace='sia-philly:1', policy='sia', "
            "jobs=20); print(r.jobs.shape, r.summary['avg_jct_s'])")
    src = str(Path(dlsched.__file__).parents[1])
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": src, "DLSCHED_DATA": str(DATA)})
    assert run.returncode == 0, run.stderr
    shape, _, jct = run.stdout.strip().partition(") ")
    assert shape.startswith("(20, ") and float(jct) > 0

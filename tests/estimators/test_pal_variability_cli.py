"""``dlsched variability show|fit`` on a user profile file (and on PAL's data when present)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dlsched.cli import app
from testkit import needs_data

runner = CliRunner()


def _profile(tmp_path):
    path = tmp_path / "prof.csv"
    rows = ["GPU_ID,PerfVar_classA,PerfVar_classD"]
    vals = [1.0] * 20 + [1.1] * 10 + [2.5]
    rows += [f"{i},{v + 0.001 * (i % 3)},{1.0}" for i, v in enumerate(vals)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_show_json_and_table(tmp_path):
    path = _profile(tmp_path)
    res = runner.invoke(app, ["variability", "show", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    a = data["classes"]["classA"]
    assert a["k"] == 2 and a["outliers"] == [2.5] and a["num_gpus"] == 31
    assert data["classes"]["classA"]["traversal"][0][0] == "within node"
    res = runner.invoke(app, ["variability", "show", str(path), "--class", "classA"])
    assert res.exit_code == 0 and "outlier" in res.stdout and "traversal" in res.stdout


def test_fit_writes_json_and_plot(tmp_path):
    path = _profile(tmp_path)
    out, plot = tmp_path / "bins.json", tmp_path / "bins.png"
    res = runner.invoke(app, ["variability", "fit", str(path), "--out", str(out), "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["classes"]["classD"]["levels"] == [1.0]
    assert plot.stat().st_size > 1000


def test_bad_input_is_one_error_line(tmp_path):
    res = runner.invoke(app, ["variability", "show", str(tmp_path / "missing.csv")])
    assert res.exit_code == 2 and "error:" in res.output
    res = runner.invoke(app, ["variability", "show", str(_profile(tmp_path)), "--class", "classZ"])
    assert res.exit_code == 2


@needs_data("pal", "aggregated_data")
def test_measured_family_sampled_cluster():
    res = runner.invoke(app, ["variability", "show", "longhorn", "--gpus", "64", "--runs", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["classes"]["classA"]["num_gpus"] == 64

"""The Gimbal command line: `--coordinator gimbal` on the Gimbal cluster and trace, and its refusals."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dlsched.cli import app
from testkit import needs_data

runner = CliRunner()
BASE = ["simulate", "--cluster", "gimbal-32", "--trace", "gimbal-philly:seed=1", "--jobs", "40", "--format", "json"]


@needs_data("sia", "traces", "philly.csv")
def test_lucid_with_and_without_gimbal_runs_every_job():
    plain = runner.invoke(app, [*BASE, "--policy", "lucid"])
    coordinated = runner.invoke(app, [*BASE, "--policy", "lucid", "--coordinator", "gimbal"])
    assert plain.exit_code == 0 and coordinated.exit_code == 0, coordinated.output
    a, b = (json.loads(r.stdout.splitlines()[0]) for r in (plain, coordinated))
    assert a["completed"] == b["completed"] == 40
    assert b["avg_jct_s"] > 0


@needs_data("sia", "traces", "philly.csv")
def test_an_unknown_objective_is_one_error_line():
    got = runner.invoke(app, [*BASE, "--policy", "lucid", "--coordinator", "gimbal", "--set", "objective=fairness"])
    assert got.exit_code == 2
    lines = [ln for ln in got.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "objective" in lines[0]

"""The hops preset's throughput store from the command line: a file kept across runs, and its refusals."""

from __future__ import annotations

import json
import sqlite3

from typer.testing import CliRunner

from dlsched.cli import app

runner = CliRunner()
BASE = ["simulate", "--cluster", "hops-64", "--trace", "hops-table3:seed=1", "--jobs", "4", "--policy", "hops",
        "--format", "json"]


def _count(path, table: str) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_a_second_run_on_the_same_store_keeps_the_records_and_does_not_profile_again(tmp_path):
    path = tmp_path / "hops.sqlite"
    first = runner.invoke(app, [*BASE, "--set", f"store=sqlite:///{path}"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout.splitlines()[0])["completed"] == 4
    observed, profiled = _count(path, "observations"), _count(path, "components")
    assert profiled == 4 * 3  # every job on each of the three GPU types
    second = runner.invoke(app, [*BASE, "--set", f"store={path}"])
    assert second.exit_code == 0, second.output
    assert _count(path, "observations") > observed  # the first run's records stay, the second's add to them
    assert _count(path, "components") == profiled
    # nobody is profiled again, so no job spends the time of its profiles before it runs: jobs end sooner.
    # (The waits from submission are the same: a job waits for the round that profiles it in the first run,
    # for the round that plans it in the second, and is planned the moment its profile ends.)
    a, b = (json.loads(r.stdout.splitlines()[0]) for r in (first, second))
    assert b["avg_jct_s"] < a["avg_jct_s"]


def test_a_store_that_is_not_sqlite_is_one_error_line(tmp_path):
    got = runner.invoke(app, [*BASE, "--set", "store=postgresql://db/hops"])
    assert got.exit_code == 2
    lines = [ln for ln in got.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "store" in lines[0]
    got = runner.invoke(app, [*BASE, "--set", f"store={tmp_path}"])
    assert got.exit_code == 2 and "directory" in got.output

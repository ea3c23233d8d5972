"""What a user sees: the version, the line saying what was run, a table that fits 100 columns, ``--wide``,
and ``--seeds`` drawing a new trace as well as a new world."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from dlsched import __version__
from dlsched.cli import app

runner = CliRunner()
TRACE = "synthetic:rate=6,hours=1,seed=3"
SMALL = ["--trace", TRACE, "--cluster", "sia-hetero-64"]


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_version():
    res = invoke("--version")
    assert res.exit_code == 0
    assert res.stdout.strip() == f"dlsched {__version__}"


def test_table_is_headed_by_what_was_run():
    res = invoke("simulate", *SMALL, "--policy", "tiresias", "--seed", "2")
    assert res.exit_code == 0, res.output
    header = res.stdout.split("┏")[0]  # everything above the table
    for part in (f"dlsched {__version__}", "cluster sia-hetero-64", f"trace {TRACE}", "seed 2",
                 "policy tiresias all/tiresias-2dlas/gang/packed-sticky/none",
                 "stages: admission/ordering/allocation/placement/coordination"):
        assert part in " ".join(header.split()), header


def test_default_table_fits_100_columns_and_wide_shows_every_column():
    # Piped output (the runner is not a terminal) is not cut to a terminal's width: count its characters.
    res = invoke("compare", "--policies", "fifo,fifo@random-sticky", *SMALL, "--workers", "1")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 100, "\n".join(lines)
    for title in ("policy", "done", "avg JCT h", "p99 JCT h", "makespan h", "wait min", "util", "restarts/job"):
        assert title in res.stdout
    assert "fifo@random-sticky" in res.stdout

    wide = invoke("compare", "--policies", "fifo,fifo@random-sticky", *SMALL, "--workers", "1", "--wide")
    assert wide.exit_code == 0, wide.output
    for title in ("GPU-h/job", "FTF max", "frag/round", "wall s"):
        assert title in wide.stdout and title not in res.stdout


def test_summary_json_and_report_say_what_was_run(tmp_path: Path):
    out = tmp_path / "run"
    res = invoke("simulate", *SMALL, "--policy", "las", "--out", str(out), "--format", "json")
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dlsched_version"] == __version__ and summary["cluster"] == "sia-hetero-64"
    assert summary["trace"] == TRACE and summary["scheduler"].startswith("las (admission=")
    assert summary["seed_values"] == [0] and summary["trace_seed_values"] == [3]
    report = (out / "report.html").read_text()
    top = report[:report.index("<h2>")]
    assert "cluster sia-hetero-64" in top and TRACE in top and "las all/las/gang/packed-sticky/none" in top
    assert "avg_jct (h)" in report  # times in hours where people read them
    cfg = json.loads((out / "config.json").read_text())
    assert set(cfg["data"]) >= {"dir", "gpu_speeds", "packaged"}


def test_seeds_vary_a_generated_trace_and_say_so():
    res = invoke("compare", "--policies", "fifo", "--trace", "synthetic:rate=6,hours=2,seed=5", "--seeds", "3",
                 "--workers", "1", "--format", "json")
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)
    assert row["trace_seed_values"] == [5, 6, 7] and row["seed_values"] == [0, 1, 2]
    assert row["seeds_varied"] == ["seed", "world_seed", "trace_seed"]
    assert re.search(r"--seeds 3: .*varying the scheduler, world and trace seeds", res.stderr), res.stderr


def test_seeds_keep_a_fixed_trace_and_say_so(tmp_path: Path):
    trace = tmp_path / "t.csv"
    assert invoke("trace", "convert", TRACE, str(trace)).exit_code == 0
    res = invoke("compare", "--policies", "fifo", "--trace", str(trace), "--seeds", "2", "--workers", "1",
                 "--format", "json")
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)
    assert row["seeds_varied"] == ["seed", "world_seed"] and row["trace_seed_values"] == []
    assert "the trace is fixed" in res.stderr


def test_a_policy_restarting_far_more_than_the_others_is_warned_about():
    # a handful of jobs: a job re-placed every round barely progresses, so each one costs many rounds
    res = invoke("compare", "--policies", "fifo,fifo@random", "--trace", "synthetic:rate=20,hours=1,seed=3",
                 "--jobs", "8", "--workers", "1", "--format", "json")
    assert res.exit_code == 0, res.output
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "fifo@random restarts each job" in warnings[0], res.stderr


def test_progress_stays_off_a_pipe():
    cmd = [sys.executable, "-m", "dlsched", "compare", "--policies", "fifo,las", *SMALL, "--workers", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    assert "\r" not in out.stderr and "\x1b[" not in out.stderr


def test_simulate_warns_when_restarts_per_job_pass_the_threshold():
    from dlsched.sim.sanity import RESTARTS_PER_JOB_WARN

    res = invoke("simulate", "--placement", "random", "--trace", "synthetic:rate=20,hours=1,seed=3",
                 "--jobs", "8", "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["checkpoint_restores_per_job"] > RESTARTS_PER_JOB_WARN
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "fifo@random restarts each job" in warnings[0], res.stderr
    quiet = invoke("simulate", "--trace", "synthetic:rate=20,hours=1,seed=3", "--jobs", "8", "--format", "json")
    assert "warning:" not in quiet.stderr

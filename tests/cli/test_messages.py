"""What a user reads when something is wrong: a missing file says "not found", a misspelt name gets the
closest valid one, ``--jobs`` beyond the trace says so, and a missing optional extra ends in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dlsched
from dlsched.cli import app

runner = CliRunner()
SRC = str(Path(dlsched.__file__).resolve().parents[1])


def refused(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 2, res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.output, res.output
    return errors[0]


@pytest.mark.parametrize(("flag", "name"), [
    ("--config", "nope.json"), ("--cluster", "nope.yaml"), ("--trace", "nope.csv"), ("--quotas", "nope.yaml"),
])
def test_a_missing_file_says_not_found(tmp_path, flag, name):
    extra = ("--admission", "quota") if flag == "--quotas" else ()
    line = refused("simulate", flag, str(tmp_path / name), *extra, "--jobs", "3")
    assert "not found" in line and name in line


def test_a_missing_sweep_file_says_not_found(tmp_path):
    line = refused("sweep", str(tmp_path / "nope.yaml"))
    assert "not found" in line and "nope.yaml" in line


@pytest.mark.parametrize(("args", "suggestion"), [
    (("--policy", "lucd"), "lucid"),
    (("--policy", "TIRESIAS"), "tiresias"),
    (("--ordering", "la"), "las"),
    (("--placement", "packd-sticky"), "packed-sticky"),
    (("--policy", "tiresias", "--set", "starvation_factr=2"), "starvation_factor"),
    (("--cluster", "gimbal32"), "gimbal-32"),
    (("--trace", "sia-phily:1"), "sia-philly"),
    (("--set", "world.locality_penalt=2"), "locality_penalty"),
])
def test_a_misspelt_name_gets_did_you_mean(args, suggestion):
    line = refused("simulate", *args, "--jobs", "3")
    assert f"did you mean '{suggestion}'" in line, line


def test_a_misspelt_trace_column_gets_did_you_mean(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,model,num_gpus,adaptivity,duraton_s\na,0,philly,2,rigid,600\n")
    line = refused("simulate", "--trace", str(trace))
    assert "did you mean 'duration_s'" in line and "t.csv" in line
    trace.write_text("job_id,submit_time_s,model,num_gpu,adaptivity,duration_s\na,0,philly,2,rigid,600\n")
    line = refused("simulate", "--trace", str(trace))
    assert "missing column(s) num_gpus" in line and "did you mean 'num_gpus'" in line


def test_a_misspelt_variant_key_on_the_command_line_gets_did_you_mean():
    line = refused("compare", "--variant", "a:policy=fifo,coordinater=gimbal", "--jobs", "3")
    assert "did you mean 'coordinator'" in line


def test_jobs_beyond_the_trace_say_so():
    res = runner.invoke(app, ["simulate", "--trace", "synthetic:rate=10,hours=1,seed=2", "--jobs", "5000",
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    (row,) = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
    warning = [ln for ln in res.stderr.splitlines() if "--jobs 5000" in ln]
    assert warning and warning[0].startswith("warning:")
    assert f"holds ({row['jobs']} jobs)" in warning[0]


#: Makes ``import ray`` fail as it does where the runtime extra is not installed (the package stays).
BLOCK_RAY = textwrap.dedent("""
    import sys
    class _NoRay:
        def find_spec(self, name, path=None, target=None):
            if name == "ray" or name.startswith("ray."):
                raise ModuleNotFoundError("No module named 'ray'", name="ray")
            return None
    sys.meta_path.insert(0, _NoRay())
""")


def without_ray(tmp_path: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    blocker = tmp_path / "blocker"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(BLOCK_RAY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), SRC]), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "dlsched", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or tmp_path, timeout=600)


def test_the_blocker_really_blocks_ray(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_RAY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), SRC])}
    res = subprocess.run([sys.executable, "-c", "import ray"], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode != 0 and "No module named 'ray'" in res.stderr


def test_run_without_the_runtime_extra_ends_in_one_error_line_naming_it(tmp_path):
    res = without_ray(tmp_path, "run", "--max-time-s", "5")
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert "dlsched[runtime]" in lines[0] and "Traceback" not in res.stderr


def test_sweep_without_ray_runs_on_local_processes(tmp_path):
    sweep = tmp_path / "grid.yaml"
    sweep.write_text('cluster: sia-homo-64\npresets: [fifo, sjf]\ntraces: ["synthetic:rate=20,hours=1,seed=1"]\n'
                     "seeds: 1\nrun:\n  jobs: 6\n")
    res = without_ray(tmp_path, "sweep", str(sweep), "--out", str(tmp_path / "out"), "--workers", "2",
                      "--window-start", "1j", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert "Ray is not installed: running the cells on local processes" in res.stderr
    rows = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
    assert len(rows) == 2 and all(r["jobs"] == 5 for r in rows)  # the window left out the first job
    again = without_ray(tmp_path, "sweep", str(sweep), "--out", str(tmp_path / "out"), "--window-start", "1j")
    assert again.returncode == 0 and "already finished" in again.stderr  # resumable as with Ray


def test_serve_without_the_runtime_extra_ends_in_one_error_line_naming_it(tmp_path):
    res = without_ray(tmp_path, "serve", "--state", str(tmp_path / "state"), "--port", "0")
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert "dlsched[runtime]" in lines[0] and "Traceback" not in res.stderr
    assert not (tmp_path / "state" / "server.json").exists()

"""Named traces, statistics and the ``dlsched trace`` sub-app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.trace import app
from dlsched.core import Adaptivity, InputError, JobSpec
from dlsched.traces import limit_jobs, read_canonical, resolve_trace, synthetic, trace_stats, write_trace

runner = CliRunner()


# -- resolve ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "count"), [
    ("sia-philly:1", 160), ("sia-saturn:10", 160), ("sia-scale:rate_30:2", 240), ("sia-scale:scale_2x:1", 320),
    ("pollux:6", 160), ("pollux-0.5:1", 80), ("pollux-realistic:1", 160), ("pal-philly:8", 160),
    ("pal-blox:sia-160job-trace", 160), ("gavel:23dbec", 9), ("gavel:23dbec:4", 9),
    ("gavel-physical:small_test", None), ("tiresias", 60), ("philly:25", 25),
])
def test_named_traces(data, spec, count):
    jobs, name = resolve_trace(spec)
    assert name == spec and jobs
    if count is not None:
        assert len(jobs) == count
    assert [j.submit_time_s for j in jobs] == sorted(j.submit_time_s for j in jobs)


def test_adaptivity_suffix(data):
    jobs, _ = resolve_trace("sia-philly:2@rigid")
    assert all(j.adaptivity is Adaptivity.RIGID for j in jobs)
    with pytest.raises(InputError, match="only Sia/Pollux"):
        resolve_trace("pal-philly:1@rigid")
    with pytest.raises(InputError, match="unknown adaptivity"):
        resolve_trace("pollux:1@elastic")


def test_missing_named_file_names_path_and_setting(data):
    with pytest.raises(InputError) as err:
        resolve_trace("sia-philly:9")
    msg = str(err.value)
    assert "sia/workloads/philly/workload-9.csv" in msg and "DLSCHED_DATA" in msg and "workload-8.csv" in msg


def test_named_trace_without_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match="DLSCHED_DATA") as err:
        resolve_trace("pollux:1")
    assert "nowhere" in str(err.value)
    jobs, _ = resolve_trace("synthetic:rate=10,hours=2")  # needs no data
    assert jobs


def test_synthetic_spec():
    jobs, name = resolve_trace("synthetic:rate=30, hours=2, seed=4")
    assert name == "synthetic:rate=30, hours=2, seed=4"
    assert jobs == synthetic(rate=30, hours=2, seed=4)
    assert resolve_trace("synthetic")[0] == synthetic()
    jobs, _ = resolve_trace("synthetic:kind=rigid-duration,jobs=12,max_gpus=4,seed=3")
    assert len(jobs) == 12 and all(j.model == "philly" and j.num_gpus <= 4 for j in jobs)
    assert resolve_trace("synthetic:adaptivity=rigid,jobs=3")[0][0].adaptivity is Adaptivity.RIGID


@pytest.mark.parametrize(("spec", "needle"), [
    ("synthetic:foo=1", "unknown key 'foo'"), ("synthetic:rate", "key=value"), ("synthetic:rate=x", "number"),
    ("synthetic:seed=1,seed=2", "twice"), ("sia-philly:0", "workload number"), ("sia-philly", "expected"),
    ("sia-scale:rate_x:1", "rate_R"), ("gavel:../x", "invalid name"), ("no/such/file.csv", "named traces"),
    ("", "empty"),
])
def test_bad_specs(spec, needle):
    with pytest.raises(InputError, match=needle):
        resolve_trace(spec)


def test_file_paths_and_limit(tmp_path):
    jobs = synthetic(num_jobs=10, seed=1)
    path = write_trace(jobs, tmp_path / "mine.csv")
    back, name = resolve_trace(str(path))
    assert name == "mine.csv" and len(back) == 10
    assert limit_jobs(back, 3) == back[:3]
    with pytest.raises(InputError):
        limit_jobs(back, 0)


# -- stats -----------------------------------------------------------------------------------------------------

def test_trace_stats():
    jobs = [
        JobSpec("a", 0.0, "philly", 2, duration_s=3600.0),
        JobSpec("b", 1800.0, "vgg19", 1, iterations=100.0, user="u2"),
        JobSpec("c", 3600.0, "cifar10", 4, adaptivity=Adaptivity.ADAPTIVE, deadline_s=9000.0),
    ]
    s = trace_stats(jobs)
    assert s["jobs"] == 3 and s["span_hours"] == 1.0 and s["arrival_rate_per_hour"] == 2.0
    assert s["gpu_demand"] == {1: 1, 2: 1, 4: 1} and s["max_gpus"] == 4
    assert s["adaptivity"] == {"adaptive": 1, "rigid": 2} and s["users"] == 2
    assert (s["jobs_with_duration"], s["jobs_with_iterations"], s["jobs_adaptive_model"]) == (1, 1, 1)
    assert s["total_gpu_hours"] == 2.0 and s["total_iterations"] == 100.0 and s["jobs_with_deadline"] == 1
    json.dumps(s)
    empty = trace_stats([])
    assert empty["jobs"] == 0 and empty["arrival_rate_per_hour"] is None


# -- CLI -------------------------------------------------------------------------------------------------------

def test_cli_validate_ok_and_error(tmp_path):
    r = runner.invoke(app, ["validate", "synthetic:jobs=5"])
    assert r.exit_code == 0 and r.stdout == "ok: 5 jobs\n"
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time_s,model,num_gpus\na,1,m,0\n")
    r = runner.invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"error: {bad}:2 field 'num_gpus'") and r.stderr.count("\n") == 1


def test_cli_stats(tmp_path):
    r = runner.invoke(app, ["stats", "synthetic:jobs=20,seed=2", "--format", "json"])
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert out["jobs"] == 20 and out["trace"] == "synthetic:jobs=20,seed=2"
    r = runner.invoke(app, ["stats", "synthetic:jobs=20,seed=2"])
    assert r.exit_code == 0 and "arrival_rate_per_hour" in r.stdout
    r = runner.invoke(app, ["stats", "synthetic:bogus=1"])
    assert r.exit_code == 2 and r.stderr.startswith("error: ")


def test_cli_convert(tmp_path):
    out = tmp_path / "sub" / "out.csv"
    r = runner.invoke(app, ["convert", "synthetic:jobs=8,seed=3", str(out)])
    assert r.exit_code == 0, r.stderr
    assert [j.job_id for j in read_canonical(out)] == [j.job_id for j in synthetic(num_jobs=8, seed=3)]
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.csv"]
    before = out.read_text()
    r = runner.invoke(app, ["convert", "synthetic:rate=-1", str(out)])
    assert r.exit_code == 2 and out.read_text() == before

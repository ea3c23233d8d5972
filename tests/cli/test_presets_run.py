"""Every cluster preset runs as it is: with no ``--trace`` it plays the trace it lists first (its paper's), and
a trace that does not fit a cluster is refused naming the cause and the traces that do fit."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.clusters import cluster_file, preset_names
from testkit import DATA

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize("preset", preset_names())
def test_every_preset_simulates_its_default_trace(preset: str):
    """``dlsched simulate --cluster C --jobs 10`` exits 0 for every preset ``dlsched clusters`` lists."""
    if not DATA.exists() and not cluster_file(preset).traces[0].startswith(("synthetic", "hops", "copter")):
        pytest.skip(f"{preset}'s default trace reads measured data, not found at {DATA} (set DLSCHED_DATA)")
    res = run("simulate", "--cluster", preset, "--jobs", "10", "--format", "json")
    assert res.exit_code == 0, res.output
    (row,) = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
    assert row["jobs"] == 10 and row["cluster"] == preset
    assert row["trace"].partition(":")[0] == cluster_file(preset).traces[0].partition(":")[0]


def test_the_clusters_listing_is_the_set_of_presets_tested():
    res = run("clusters", "--format", "json")
    assert res.exit_code == 0, res.output
    rows = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
    assert sorted(r["name"] for r in rows if "simulate" in r["for"]) == preset_names()
    # the service's built-in cluster is listed too, for the commands that take it
    assert [(r["name"], r["gpus"], r["for"]) for r in rows if "simulate" not in r["for"]] == [
        ("ray-local-4", 8, "run, serve")]


@pytest.mark.parametrize("preset", preset_names())
def test_every_listed_trace_fits_its_preset(preset: str):
    """The traces a preset names as fitting it are the ones its refusals suggest: each must run."""
    if not DATA.exists():
        pytest.skip(f"measured data not found at {DATA} (set DLSCHED_DATA)")
    for trace in cluster_file(preset).traces:
        res = run("simulate", "--cluster", preset, "--trace", trace, "--jobs", "3", "--format", "json")
        assert res.exit_code == 0, (trace, res.output)


def test_a_trace_whose_models_have_no_profile_on_the_cluster_names_the_models_and_the_traces_that_fit():
    res = run("simulate", "--cluster", "gimbal-32", "--trace", "synthetic:rate=20,hours=1", "--jobs", "10")
    assert res.exit_code == 2, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "does not fit cluster 'gimbal-32'" in line and "no profile on GPU type a40" in line
    assert "traces that fit gimbal-32: gimbal-philly, gimbal-alibaba" in line
    assert "inf s" not in line


def test_a_trace_with_a_job_larger_than_the_cluster_says_so(tmp_path):
    trace = tmp_path / "big.csv"
    trace.write_text("job_id,submit_time_s,model,num_gpus,batch_size,min_gpus,max_gpus,adaptivity,duration_s,"
                     "iterations\na,0,philly,2,,,,rigid,600,\nb,10,philly,48,,,,rigid,600,\n")
    res = run("simulate", "--cluster", "gimbal-32", "--trace", str(trace))
    assert res.exit_code == 2, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "larger than the cluster" in line and "job 'b'" in line and "at most 32" in line
    assert "traces that fit gimbal-32" in line


def test_a_cluster_file_without_traces_is_offered_those_of_presets_with_its_gpu_types(tmp_path):
    cluster = tmp_path / "mine.yaml"
    cluster.write_text("name: mine\nnodes:\n  - {gpu_type: a40, count: 4, gpus_per_node: 2}\n")
    res = run("simulate", "--cluster", str(cluster), "--jobs", "5")
    assert res.exit_code == 2, res.output
    assert "traces that fit" in res.stderr and "gimbal-philly" in res.stderr

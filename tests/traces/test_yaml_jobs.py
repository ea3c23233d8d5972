"""Job specs in YAML: the same jobs and checks as the canonical table, errors at the job's line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.core import InputError
from dlsched.traces.readers import read_trace
from dlsched.traces.schema import strip_origin, write_trace

JOBS = """\
jobs:
  - job_id: a
    submit_time_s: 0
    model: wav2vec
    num_gpus: 4
    adaptivity: strong-scaling
    gpu_counts: [2, 4, 8]
    gpu_types: [rtx3090, titanxp]
    per_gpu_batch: true
    batch_size: 16
    learning_rates: {4: 0.1}
    lr_scaling: sqrt
    duration_s: 1800
    reference_gpu: 1080ti
  - job_id: b
    submit_time_s: 60
    model: regnet-cifar10
    num_gpus: 3
    min_gpus: 1
    max_gpus: 8
    gpu_levels: 4
    adaptivity: strong-scaling
    per_gpu_batch: true
    batch_size: 32
    duration_s: 900
    reference_gpu: 1080ti
"""


def test_yaml_jobs_are_the_jobs_of_the_equivalent_table(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    jobs = read_trace(path)
    a, b = jobs
    assert (a.gpu_counts, a.gpu_types, a.per_gpu_batch, a.lr_scaling) == ((2, 4, 8), ("rtx3090", "titanxp"), True,
                                                                        "sqrt")
    assert a.learning_rate(8) == pytest.approx(0.1 * 2 ** 0.5)
    assert b.gpu_counts == (1, 3, 6, 8)  # four levels between 1 and 8
    assert a.origin == f"{path}:2" and b.origin == f"{path}:15"
    table = read_trace(write_trace(jobs, tmp_path / "jobs.csv"))
    assert strip_origin(table) == strip_origin(jobs)


@pytest.mark.parametrize(("edit", "line", "match"), [
    (("gpu_counts: [2, 4, 8]", "gpu_counts: [2, 4, 8]\n    colour: red"), 2, "unknown key"),
    (("num_gpus: 3\n", "num_gpus: 2\n"), 15, "num_gpus 2 is not one of gpu_counts"),
    (("learning_rates: {4: 0.1}", "learning_rates: {5: 0.1}"), 2, "does not accept"),
    (("  - job_id: b\n", "  - model_only: b\n"), 15, "unknown key"),
])
def test_a_bad_job_is_one_error_at_the_line_its_mapping_starts(tmp_path, edit, line, match):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS.replace(*edit))
    with pytest.raises(InputError, match=match) as err:
        read_trace(path)
    assert f"{path}:{line}" in str(err.value)


@pytest.mark.parametrize(("text", "match"), [("jobs: [a, b", "not YAML"), ("- a\n- b\n", "list 'jobs'"),
                                             ("jobs: []\n", "list 'jobs'"), ("jobs: [{}]\nowner: x\n", "unknown key")])
def test_a_file_that_is_not_a_job_list_is_refused(tmp_path, text, match):
    path = tmp_path / "jobs.yml"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        read_trace(path)


def test_simulate_runs_a_yaml_job_file_under_hops(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    res = CliRunner().invoke(app, ["simulate", "--cluster", "hops-64", "--trace", str(path), "--policy", "hops",
                                   "--set", "throughputs=oracle", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["completed"] == 2


def test_a_bad_yaml_job_exits_2_with_one_error_line(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS.replace("lr_scaling: sqrt", "lr_scaling: cubic"))
    res = CliRunner().invoke(app, ["trace", "validate", str(path)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and f"{path}:2" in lines[0]

"""The COpter workloads: Alibaba-derived model jobs (``copter:jobs=N,hours=H,seed=S``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dlsched.cli.trace import app
from dlsched.core import Adaptivity, InputError
from dlsched.traces.copter import alibaba_stats, copter_trace
from dlsched.traces.resolve import resolve_trace
from dlsched.traces.synthetic import BATCH_RANGE

runner = CliRunner()
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_named_trace_has_exactly_the_jobs_in_the_window_and_is_seeded():
    jobs, name = resolve_trace("copter:jobs=2000,hours=24,seed=3")
    assert name == "copter:jobs=2000,hours=24,seed=3" and len(jobs) == 2000
    times = [j.submit_time_s for j in jobs]
    assert times == sorted(times) and 0.0 <= times[0] and times[-1] < 24 * 3600
    assert len({j.job_id for j in jobs}) == 2000
    assert resolve_trace("copter:jobs=2000,hours=24,seed=3")[0] == jobs
    assert resolve_trace("copter:jobs=2000,hours=24,seed=4")[0] != jobs
    assert len(resolve_trace("copter")[0]) == 40_000  # the thesis's 10k-GPU workload by default


def test_jobs_are_profiled_adaptive_models_with_the_traces_gpu_counts():
    jobs = copter_trace(5000, 24.0, seed=1)
    for j in jobs:
        lo, hi = BATCH_RANGE[j.model]
        assert lo <= j.batch_size <= hi and j.adaptivity is Adaptivity.ADAPTIVE
        assert j.num_gpus in (1, 2, 4, 8) and j.duration_s is None
    stats = alibaba_stats()
    one = np.mean([j.num_gpus == 1 for j in jobs])
    assert abs(one - stats["num_gpus"]["probs"][0]) < 0.01
    # Sia's mapping of GPU-hours to models: < 1 GPU-hour is cifar10, > 100 is imagenet
    cats = stats["gpu_hour_categories"]
    assert abs(np.mean([j.model == "cifar10" for j in jobs]) - cats["[0, 1)"]) < 0.02
    assert abs(np.mean([j.model in ("bert", "deepspeech2") for j in jobs]) - cats["[1, 10)"]) < 0.02


def test_arrivals_follow_the_daily_profile():
    jobs = copter_trace(40_000, 24.0, seed=0)
    hours = np.bincount([int(j.submit_time_s // 3600) for j in jobs], minlength=24) / len(jobs)
    profile = np.asarray(alibaba_stats()["arrivals_by_hour"])
    assert np.max(np.abs(hours - profile)) < 0.005
    assert hours.argmax() == profile.argmax() and hours.argmin() == profile.argmin()


@settings(max_examples=25, deadline=None)
@given(jobs=st.integers(1, 300), hours=st.floats(0.01, 72.0), seed=st.integers(0, 2**32))
def test_any_valid_options_give_that_many_jobs_inside_the_window(jobs, hours, seed):
    specs = copter_trace(jobs, hours, seed)
    times = np.array([s.submit_time_s for s in specs])
    assert len(specs) == jobs
    assert np.all(np.diff(times) >= 0) and times.min() >= 0.0 and times.max() <= hours * 3600.0


@pytest.mark.parametrize(("spec", "words"), [
    ("copter:jobs=0", "jobs must be in"), ("copter:jobs=2000000", "jobs must be in"),
    ("copter:hours=0", "hours must be in"), ("copter:hours=9000", "hours must be in"),
    ("copter:seed=-1", "seed must be"), ("copter:seed=1.5", "seed must be"),
    ("copter:rate=3", "unknown key"), ("copter:jobs=5,jobs=6", "given twice"),
])
def test_bad_options_are_refused_with_the_range(spec, words):
    with pytest.raises(InputError, match=words):
        resolve_trace(spec)


def test_cli_refuses_bad_options_with_one_error_line():
    r = runner.invoke(app, ["validate", "copter:jobs=0"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and "jobs" in r.stderr
    r = runner.invoke(app, ["validate", "copter:jobs=50,seed=2"])
    assert r.exit_code == 0 and r.stdout == "ok: 50 jobs\n"


def test_packaged_statistics_are_what_the_script_derives_from_the_data(data, tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    try:
        import fit_alibaba_stats
    finally:
        sys.path.remove(str(SCRIPTS))
    out = tmp_path / "alibaba_stats.json"
    assert fit_alibaba_stats.main(["--out", str(out)]) == 0
    import json

    assert json.loads(out.read_text()) == alibaba_stats()

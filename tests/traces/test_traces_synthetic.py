"""The synthetic generator: deterministic, calibrated, and independent of the data directory."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from dlsched.core import Adaptivity, InputError
from dlsched.traces import read_canonical, synthetic, trace_stats, write_trace
from dlsched.traces.schema import strip_origin
from dlsched.traces.synthetic import BATCH_RANGE, philly_stats, user_batch_size
from dlsched.traces.validation import check_spec


def test_deterministic_per_seed():
    assert synthetic(seed=3) == synthetic(seed=3)
    assert synthetic(seed=3) != synthetic(seed=4)
    assert synthetic(kind="rigid-duration", seed=2) == synthetic(kind="rigid-duration", seed=2)


@pytest.mark.parametrize("rate", [5.0, 20.0, 60.0])
def test_arrival_rate_matches_request(rate):
    hours = 4000.0 / rate  # about 4000 arrivals: the Poisson count has a relative sd of about 1.6%
    jobs = synthetic(rate=rate, hours=hours, seed=11)
    assert abs(len(jobs) / hours - rate) / rate < 0.06
    assert trace_stats(jobs)["arrival_rate_per_hour"] == pytest.approx(rate, rel=0.06)
    times = [j.submit_time_s for j in jobs]
    assert times == sorted(times) and 0 < times[0] and times[-1] <= hours * 3600
    gaps = np.diff([0.0, *times])
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.1)  # exponential gaps: cv = 1


def test_default_trace_is_sia_like():
    jobs = synthetic()
    assert 100 < len(jobs) < 220  # 20 jobs/h for 8 h
    for j in jobs:
        check_spec(j)
        assert j.adaptivity is Adaptivity.ADAPTIVE and j.duration_s is None and j.iterations is None
        lo, hi = BATCH_RANGE[j.model]
        assert lo <= j.batch_size <= hi and j.batch_size % lo == 0
        ratio = j.batch_size // lo
        assert ratio & (ratio - 1) == 0  # a power of two times the smallest batch
        assert 1 <= j.num_gpus <= 16
        assert j.batch_size >= min(j.num_gpus * lo, hi)  # at least the smallest batch per GPU
    assert len({j.job_id for j in jobs}) == len(jobs)


def test_model_mix_follows_philly_gpu_hours():
    jobs = synthetic(rate=100, hours=100, seed=5, ncf_share=0.0)
    mix = Counter(j.model for j in jobs)
    cats = philly_stats()["gpu_hour_categories"]
    n = len(jobs)
    assert mix["ncf"] == 0
    assert mix["cifar10"] / n == pytest.approx(cats["[0, 1)"], abs=0.02)
    assert (mix["bert"] + mix["deepspeech2"]) / n == pytest.approx(cats["[1, 10)"], abs=0.02)
    assert mix["yolov3"] / n == pytest.approx(cats["[10, 100)"], abs=0.01)
    assert mix["imagenet"] / n == pytest.approx(cats["[100, inf)"], abs=0.01)
    ones = sum(1 for j in jobs if j.num_gpus == 1) / n
    assert ones == pytest.approx(philly_stats()["num_gpus"]["probs"][0], abs=0.02)


def test_rigid_duration_kind():
    jobs = synthetic(kind="rigid-duration", rate=50, hours=40, seed=9, max_request_gpus=8)
    assert all(j.model == "philly" and j.adaptivity is Adaptivity.RIGID and j.duration_s >= 1 for j in jobs)
    assert max(j.num_gpus for j in jobs) <= 8
    median = float(np.median([j.duration_s for j in jobs if j.num_gpus == 1]))
    assert 300 < median < 3000  # Philly single-GPU median run time is about 15 minutes
    with pytest.raises(InputError, match="rigid"):
        synthetic(kind="rigid-duration", adaptivity="adaptive")


def test_exact_job_count_and_other_adaptivity():
    jobs = synthetic(num_jobs=37, adaptivity="strong-scaling")
    assert len(jobs) == 37 and all(j.adaptivity is Adaptivity.STRONG_SCALING for j in jobs)


@pytest.mark.parametrize("kwargs", [{"rate": 0}, {"rate": math.inf}, {"hours": -1}, {"seed": -1},
                                    {"kind": "weird"}, {"adaptivity": "elastic"}, {"num_jobs": 0},
                                    {"ncf_share": 2.0}, {"max_request_gpus": 0}])
def test_bad_arguments(kwargs):
    with pytest.raises(InputError):
        synthetic(**kwargs)


def test_runs_without_data_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path / "does-not-exist"))
    monkeypatch.chdir(tmp_path)
    philly_stats.cache_clear()
    from dlsched.datadir import data_dir

    assert data_dir() is None
    jobs = synthetic(seed=7)
    assert jobs and jobs == synthetic(seed=7)


def test_round_trips_through_canonical_csv(tmp_path):
    jobs = synthetic(seed=2) + synthetic(kind="rigid-duration", seed=2)
    path = write_trace(jobs, tmp_path / "syn.csv")
    expected = sorted(strip_origin(jobs), key=lambda s: s.submit_time_s)
    assert strip_origin(read_canonical(path)) == expected


def test_user_batch_size_scales_with_gpus():
    rng = np.random.default_rng(0)
    assert {user_batch_size("cifar10", 1, rng) for _ in range(50)} == {128, 256, 512}
    assert {user_batch_size("cifar10", 16, rng) for _ in range(50)} == {2048, 4096}
    assert {user_batch_size("bert", 3, rng) for _ in range(50)} == {48, 96, 192}

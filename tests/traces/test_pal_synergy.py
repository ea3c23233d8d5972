"""Synergy-style traces for PAL's load sweeps (Philly demands, Poisson arrivals, PAL's models)."""

from __future__ import annotations

import numpy as np
import pytest

from dlsched.core import InputError
from dlsched.traces import resolve_trace
from dlsched.traces.synergy import TASK_MODELS, synergy


def test_shape_and_determinism():
    jobs = synergy(rate=8, jobs=2000, seed=3)
    assert len(jobs) == 2000 and [j.job_id for j in jobs[:3]] == ["0", "1", "2"]
    single = np.mean([j.num_gpus == 1 for j in jobs])
    assert single > 0.8
    assert {j.model for j in jobs} <= {m for pair in TASK_MODELS for m in pair}
    assert all(j.iterations >= 1 for j in jobs)
    gaps = np.diff([j.submit_time_s for j in jobs])
    assert (gaps >= 0).all() and np.mean(gaps) == pytest.approx(3600 / 8, rel=0.1)
    assert synergy(rate=8, jobs=50, seed=3) == jobs[:50]
    assert synergy(rate=8, jobs=50, seed=4) != jobs[:50]
    assert max(j.num_gpus for j in synergy(rate=8, jobs=2000, seed=3, max_gpus=8)) <= 8


def test_named_trace_and_errors():
    jobs, name = resolve_trace("synergy:rate=12,jobs=100,seed=2")
    assert len(jobs) == 100 and name == "synergy:rate=12,jobs=100,seed=2"
    for bad in ("synergy:rate=0,jobs=10", "synergy:speed=1", "synergy:jobs=x", "synergy:jobs=5,jobs=6"):
        with pytest.raises(InputError):
            resolve_trace(bad)

"""How a decision's per-worker settings become what each worker is told (no Ray needed)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch", reason="the runtime extra (PyTorch) is not installed")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dlsched.runtime.driver import worker_mps_percent, worker_shares  # noqa: E402


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8))
def test_shares_always_cover_the_whole_batch(split):
    n = len(split)
    shares = worker_shares(tuple(split), n)
    assert len(shares) == n and math.isclose(sum(shares), 1.0) and min(shares) >= 0
    if sum(split) > 0:
        assert shares == pytest.approx([s / sum(split) for s in split])


@given(st.integers(1, 8), st.integers(1, 8))
def test_a_split_for_another_worker_count_falls_back_to_equal_shares(n, m):
    split = tuple([1.0 / m] * m)
    if m != n:
        assert worker_shares(split, n) == pytest.approx([1.0 / n] * n)


def test_mps_limits_per_worker_share_or_none():
    assert worker_mps_percent((30, 70), 1.0, 2) == [30, 70]
    assert worker_mps_percent((100, 50), 1.0, 2) == [None, 50]
    assert worker_mps_percent((), 0.5, 3) == [50, 50, 50]
    assert worker_mps_percent((), 1.0, 2) == [None, None]
    assert worker_mps_percent((40,), 1.0, 2) == [None, None]


def test_a_runtime_job_hands_its_per_count_rates_to_the_scheduler_and_workers():
    """The rate each world size trains at is the JobSpec's rule applied to the user's rates."""
    from pydantic import ValidationError

    from dlsched.runtime.workload import RuntimeJob

    job = RuntimeJob(job_id="j", model="mlp", gpus=2, max_gpus=8, epochs=1, learning_rates={2: 0.1},
                     lr_scaling="sqrt")
    spec = job.job_spec()
    assert spec.learning_rates == ((2, 0.1),)
    assert [spec.learning_rate(k) for k in (1, 2, 8)] == pytest.approx([0.1 / math.sqrt(2), 0.1, 0.2])
    assert RuntimeJob(job_id="k", model="mlp", epochs=1).job_spec().learning_rate(4) is None
    with pytest.raises(ValidationError, match="outside the job's counts"):
        RuntimeJob(job_id="j", model="mlp", gpus=2, max_gpus=8, epochs=1, learning_rates={16: 0.1})

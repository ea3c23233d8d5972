"""Real training rounds without Ray: real criteria, checkpoint and resume on other batches, input shares."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="the runtime extra (PyTorch) is not installed")

from dlsched.runtime.models import MODELS  # noqa: E402
from dlsched.runtime.training import (  # noqa: E402
    TrainSpec,
    WorkerPlan,
    load_checkpoint,
    split_counts,
    train_round,
)


def assert_sampler_audit(history, samples: int) -> None:
    """Steps numbered 0..n-1 in order; within each epoch the batches tile the data set exactly once."""
    assert [h[0] for h in history] == list(range(len(history)))
    expected_epoch, expected_offset = 0, 0
    for _, epoch, offset, batch in history:
        assert (epoch, offset) == (expected_epoch, expected_offset)
        assert 1 <= batch <= samples - offset
        expected_offset = offset + batch
        if expected_offset == samples:
            expected_epoch, expected_offset = epoch + 1, 0


@pytest.mark.parametrize("model", sorted(MODELS))
def test_each_model_learns_and_stops_at_its_epochs(tmp_path: Path, model):
    spec = TrainSpec(job_id="j", model=model, samples=256, init_batch=16, max_batch=128, epochs=4)
    report = train_round(spec, WorkerPlan(0, 1, "", 16, (1.0,), budget_s=120), tmp_path)
    state, _, _ = load_checkpoint(tmp_path)
    assert report.done and report.progress_fraction == 1.0
    assert report.samples_seen == 4 * 256 and report.epoch == 4
    assert state.first_loss is not None and report.loss is not None and report.loss < state.first_loss
    assert report.grad_sqr is not None and report.grad_sqr > 0 and report.grad_var is not None
    assert report.grad_var >= 0


def test_target_loss_stops_training_before_the_epoch_cap(tmp_path: Path):
    spec = TrainSpec(job_id="j", model="mlp", samples=2048, init_batch=32, max_batch=256, epochs=50,
                     target_loss=1.2)
    report = train_round(spec, WorkerPlan(0, 1, "", 64, (1.0,), budget_s=120), tmp_path)
    assert report.done and report.loss is not None and report.loss <= 1.2
    assert report.samples_seen < 50 * 2048


def test_rounds_resume_from_the_checkpoint_with_new_batches(tmp_path: Path):
    spec = TrainSpec(job_id="j", model="mlp", samples=1000, init_batch=16, max_batch=256, epochs=6)
    steps_before = 0
    for batch, budget in [(16, 0.3), (100, 0.3), (48, 0.3), (256, 0.3), (16, 120)]:
        report = train_round(spec, WorkerPlan(0, 1, "", batch, (1.0,), budget_s=budget, checkpoint_every=7),
                             tmp_path)
        assert report.resumed_step == steps_before  # nothing lost, nothing repeated between rounds
        steps_before = report.step
    assert report.done
    state, _, _ = load_checkpoint(tmp_path)
    assert_sampler_audit(state.history, 1000)
    assert sum(h[3] for h in state.history) == 6 * 1000


def test_emulated_slowdown_stretches_reported_step_times(tmp_path: Path):
    spec = TrainSpec(job_id="j", model="resnet", samples=512, init_batch=32, max_batch=64, epochs=1)
    train_round(spec, WorkerPlan(0, 1, "", 32, (1.0,), budget_s=60), tmp_path / "warm-up")  # first-use costs
    # interleaved repeats, each side's quickest: a load spike on a shared machine (tests run in parallel)
    # slows one round, not all three of one side
    fast, slow = [], []
    for i in range(3):
        fast.append(train_round(spec, WorkerPlan(0, 1, "", 32, (1.0,), budget_s=60), tmp_path / f"a{i}"))
        slow.append(train_round(spec, WorkerPlan(0, 1, "", 32, (1.0,), budget_s=60, slowdown=3.0),
                                tmp_path / f"b{i}"))
    assert min(r.step_time_s for r in slow) > 2.0 * min(r.step_time_s for r in fast)
    assert min(r.wall_s for r in slow) > 2.0 * min(r.wall_s for r in fast) * 0.8


@settings(max_examples=200, deadline=None)
@given(total=st.integers(0, 5000), weights=st.lists(st.floats(0.01, 10.0), min_size=1, max_size=8))
def test_unequal_shares_split_every_sample_once(total, weights):
    shares = tuple(w / sum(weights) for w in weights)
    counts = split_counts(total, shares)
    assert sum(counts) == total and all(c >= 0 for c in counts)
    assert all(abs(c - total * s) < 1.0 + 1e-9 for c, s in zip(counts, shares, strict=True))


def test_a_round_trains_at_the_rate_its_plan_names_else_at_adascales(tmp_path: Path):
    """Hops's per-count rates reach the optimiser as given; without one AdaScale scales the base rate."""
    spec = TrainSpec(job_id="j", model="mlp", samples=256, init_batch=16, max_batch=128, epochs=1, lr=0.05)
    given = train_round(spec, WorkerPlan(0, 1, "", 16, (1.0,), budget_s=120, lr=0.0123), tmp_path / "a")
    assert given.lr == 0.0123
    _, _, optimiser = load_checkpoint(tmp_path / "a")
    assert optimiser["param_groups"][0]["lr"] == 0.0123
    adapted = train_round(spec, WorkerPlan(0, 1, "", 64, (1.0,), budget_s=120), tmp_path / "b")
    assert adapted.lr >= 0.05  # AdaScale's gain is at least 1 for a batch above the initial one


def _rank_round(rank: int, port: int, slowdown: float, folder: str, out) -> None:
    spec = TrainSpec(job_id="pair", model="mlp", samples=100_000, init_batch=64, max_batch=64, epochs=50)
    # the budget counts from the process's start, rendezvous included: on a loaded machine the two spawned
    # ranks import torch seconds apart, so it leaves room for that and still for many steps
    plan = WorkerPlan(rank, 2, f"127.0.0.1:{port}", 64, (0.5, 0.5), slowdown=slowdown, budget_s=12.0,
                      checkpoint_every=10_000)
    out.put((rank, train_round(spec, plan, folder).steps))


def _two_worker_steps(slowdown: float, folder: Path) -> int:
    import multiprocessing
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank_round, args=(r, port, slowdown, str(folder), out)) for r in range(2)]
    for p in procs:
        p.start()
    steps = [out.get(timeout=120)[1] for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert steps[0] == steps[1]  # the ranks stepped together
    return steps[0]


def test_an_emulated_slow_type_slows_a_two_worker_job_by_its_factor_not_without_bound(tmp_path: Path):
    """Each worker's computation is stretched, not its wait for its peer: stretching the wait fed one worker's
    sleep into the other's next wait and, on a type three times slower, doubled the lag every step."""
    fast = _two_worker_steps(1.0, tmp_path / "fast")
    slow = _two_worker_steps(3.0, tmp_path / "slow")
    assert fast >= 8, f"only {fast} steps in the budget: the ratio below would say nothing"
    assert slow >= fast / 3.0 * 0.5, (fast, slow)

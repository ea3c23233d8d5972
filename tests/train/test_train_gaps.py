"""What a real training script needs of dlsched.train beyond plain SGD, with real ranks over gloo: gradient
accumulation, mixed precision with a GradScaler, Adam, and a multi-process loader resumed on other world
sizes. Noise-scale estimates are checked against the truth from per-sample gradients at fixed parameters."""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path

import pytest
import torch
from job_script import make_data, make_net
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F  # noqa: N812
from train_launch import Job, run

from dlsched.train.reports import read_reports

pytestmark = pytest.mark.timeout(240)

#: 2048 samples at a global batch of 32 for 4 epochs: 256 steps with the parameters held fixed (lr 0).
GNS_ARGS = ["--samples", "2048", "--batch-size", "32", "--epochs", "4", "--lr", "0"]


def _ok(results: list[tuple[int, str]], world: int) -> None:
    assert [rc for rc, _ in results] == [0] * world, results


def _per_sample_grads(samples: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    data, net = make_data(samples, dtype), make_net(dtype)
    params = {k: v.detach() for k, v in net.named_parameters()}
    x, y, _ = data.tensors

    def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(net, p, (xi[None],)), yi[None])

    out: dict[str, torch.Tensor] = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    return out


def _truth(grads: dict[str, torch.Tensor], precond: dict[str, torch.Tensor] | None = None) -> tuple[float, float]:
    """``(S, |G|^2)`` over the data set from per-sample gradients (divided by a preconditioner if given)."""
    n = next(iter(grads.values())).shape[0]
    parts = [(g / precond[k] if precond is not None else g).reshape(n, -1) for k, g in grads.items()]
    flat = torch.cat(parts, dim=1)
    mean = flat.mean(dim=0)
    return float((flat - mean).square().sum() / (n - 1)), float(mean.square().sum())


def _gns(tmp_path: Path, world: int, args: list[str], name: str) -> dict[str, float]:
    out = tmp_path / f"{name}.json"
    _ok(run(None, world, [*args, "--gns-out", str(out)], timeout=180), world)
    est: dict[str, float] = json.loads(out.read_text())
    return est


def _params(tmp_path: Path, world: int, args: list[str], name: str) -> dict[str, torch.Tensor]:
    out = tmp_path / f"{name}.pt"
    _ok(run(None, world, [*args, "--params-out", str(out)]), world)
    params: dict[str, torch.Tensor] = torch.load(out)
    return params


def test_accumulating_four_micro_batches_equals_the_four_times_larger_batch(tmp_path: Path) -> None:
    # 60 samples a step over 2 ranks: 30 each, in micro-batches of 8, 8, 7 and 7 (unequal on purpose)
    args = ["--samples", "600", "--batch-size", "60", "--steps", "8", "--lr", "0.1", "--float64"]
    whole = _params(tmp_path, 2, args, "whole")
    micro = _params(tmp_path, 2, [*args, "--accumulate", "4"], "micro")
    init = make_net(torch.float64).state_dict()
    for key, value in whole.items():
        assert (value - init[key]).abs().max() > 1e-3  # the parameters really moved
        assert torch.allclose(value, micro[key], rtol=0, atol=1e-6), key


@pytest.mark.parametrize("world", [1, 2])
def test_accumulation_noise_scale_matches_per_sample_gradients(tmp_path: Path, world: int) -> None:
    true_noise, true_sqr = _truth(_per_sample_grads(2048, torch.float64))
    est = _gns(tmp_path, world, [*GNS_ARGS, "--float64", "--accumulate", "4"], "acc")
    assert est["measurements"] >= 250
    # without the micro-batches counted as pieces the estimate would be some k times too small
    assert est["noise"] == pytest.approx(true_noise, rel=0.10)
    assert est["noise"] / est["grad_sqr"] == pytest.approx(true_noise / true_sqr, rel=0.10)


def test_mixed_precision_trains_and_measures_unscaled_gradients(tmp_path: Path) -> None:
    loss_out = tmp_path / "loss.json"
    _ok(run(None, 2, ["--samples", "1024", "--batch-size", "32", "--epochs", "3", "--lr", "0.2", "--amp",
                      "--loss-out", str(loss_out)]), 2)
    losses = json.loads(loss_out.read_text())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.8 * losses[0]  # it trains

    fp32 = _gns(tmp_path, 2, GNS_ARGS, "fp32")
    # bfloat16 autocast under a GradScaler whose scale is 2^16: unscaled, the estimate is fp32's
    amp = _gns(tmp_path, 2, [*GNS_ARGS, "--amp"], "amp")
    assert amp["scale"] == 2.0 ** 16
    assert amp["noise"] == pytest.approx(fp32["noise"], rel=0.10)
    assert amp["noise"] / amp["grad_sqr"] == pytest.approx(fp32["noise"] / fp32["grad_sqr"], rel=0.10)
    # float16 from a scale of 2^24 overflows: the scaler skips those steps and so do the statistics
    f16 = _gns(tmp_path, 2, [*GNS_ARGS, "--amp", "--amp-dtype", "float16", "--init-scale", str(2.0 ** 24)], "f16")
    assert f16["optimizer_steps"] < 256 and f16["scale"] < 2.0 ** 24
    assert f16["measurements"] <= f16["optimizer_steps"]
    assert f16["noise"] == pytest.approx(fp32["noise"], rel=0.10)


def test_adam_measures_the_preconditioned_noise_scale(tmp_path: Path) -> None:
    est = _gns(tmp_path, 2, [*GNS_ARGS, "--float64", "--optimizer", "adam"], "adam")
    adam = torch.load(tmp_path / "adam.adam.pt")
    eps, beta2 = 1e-8, 0.999
    precond = {k: (v / (1 - beta2 ** step)).sqrt() + eps for k, (v, step) in adam.items()}
    true_noise, true_sqr = _truth(_per_sample_grads(2048, torch.float64), precond)
    plain_noise, _ = _truth(_per_sample_grads(2048, torch.float64))
    assert est["measurements"] >= 240  # all but Adam's first steps, before its second moments are trusted
    assert abs(true_noise / plain_noise - 1) > 0.5  # preconditioning matters here: the check can tell
    assert est["noise"] == pytest.approx(true_noise, rel=0.10)
    assert est["noise"] / est["grad_sqr"] == pytest.approx(true_noise / true_sqr, rel=0.10)


def _steps_seen(indices_dir: Path) -> dict[int, list[int]]:
    steps: dict[int, list[int]] = collections.defaultdict(list)
    for path in indices_dir.iterdir():
        for line in path.read_text().splitlines():
            step, _pid, *idx = line.split()
            steps[int(step)].extend(int(i) for i in idx)
    return steps


def test_worker_loader_resumes_on_other_world_sizes_without_losing_a_sample(tmp_path: Path) -> None:
    """Two ranks, then one, then three: the last resume leaves 2 samples of the epoch for 3 ranks."""
    job = Job(tmp_path / "job", tmp_path / "job" / "checkpoints")
    job.job_dir.mkdir()
    indices = tmp_path / "indices"
    args = ["--samples", "42", "--batch-size", "8", "--epochs", "2", "--num-workers", "2", "--collate",
            "--indices-dir", str(indices)]
    _ok(run(job, 2, [*args, "--write-stop-at", "2"], DLSCHED_REPORT_S="0"), 2)
    _ok(run(job, 1, [*args, "--write-stop-at", "5"], DLSCHED_REPORT_S="0", DLSCHED_RESUME_STEP="2",
            DLSCHED_INCARNATION="1"), 1)
    last = run(job, 3, args, DLSCHED_REPORT_S="0", DLSCHED_RESUME_STEP="5", DLSCHED_INCARNATION="2")
    _ok(last, 3)
    reports = read_reports(job.job_dir)
    stopped = [r["step"] for r in reports if r["type"] == "stopped"]
    assert stopped == [2, 5]
    done = [r for r in reports if r["type"] == "done"]
    assert len(done) == 1
    steps = _steps_seen(indices)
    assert sorted(steps) == list(range(1, done[0]["step"] + 1))  # every step once
    assert len(steps[6]) == 2  # the step after the grow: 2 samples left for 3 ranks
    order = [i for s in sorted(steps) for i in steps[s]]
    assert sorted(order[:42]) == list(range(42)) and sorted(order[42:]) == list(range(42))
    progress = [r for r in reports if r["type"] == "progress" and r["incarnation"] == 2]
    assert all(r["loss"] is None or math.isfinite(r["loss"]) for r in progress)

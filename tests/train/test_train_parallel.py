"""Data parallelism and the gradient noise scale of dlsched.train, with real processes over gloo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from job_script import make_data, make_net
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F  # noqa: N812
from train_launch import run

pytestmark = pytest.mark.timeout(180)


def _train(tmp_path: Path, world: int, args: list[str], name: str) -> dict[str, torch.Tensor]:
    out = tmp_path / f"{name}.pt"
    results = run(None, world, [*args, "--params-out", str(out)])
    assert [rc for rc, _ in results] == [0] * world, results
    params: dict[str, torch.Tensor] = torch.load(out)
    return params


def test_two_ranks_equal_one_process_after_20_steps(tmp_path: Path) -> None:
    args = ["--samples", "512", "--batch-size", "16", "--steps", "20", "--lr", "0.1"]
    one = _train(tmp_path, 1, args, "one")
    two = _train(tmp_path, 2, args, "two")
    init = make_net(torch.float32).state_dict()
    for key, value in one.items():
        assert (value - init[key]).abs().max() > 1e-3  # the parameters really moved
        assert torch.allclose(value, two[key], rtol=0, atol=1e-6), key


def test_unequal_shares_still_give_the_global_mean_gradient(tmp_path: Path) -> None:
    args = ["--samples", "512", "--batch-size", "16", "--steps", "10", "--lr", "0.1", "--float64"]
    one = _train(tmp_path, 1, args, "one")
    out = tmp_path / "shares.pt"
    results = run(None, 2, [*args, "--params-out", str(out)], DLSCHED_BATCH_SHARES="3,1")
    assert [rc for rc, _ in results] == [0, 0], results
    two = torch.load(out)
    for key, value in one.items():
        assert torch.allclose(value, two[key], rtol=0, atol=1e-9), key


def _per_sample_truth(samples: int) -> tuple[float, float]:
    """``(S, |G|^2)`` over the whole data set from per-sample gradients at the initial parameters."""
    data, net = make_data(samples, torch.float64), make_net(torch.float64)
    params = {k: v.detach() for k, v in net.named_parameters()}
    x, y, _ = data.tensors

    def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(net, p, (xi[None],)), yi[None])

    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    flat = torch.cat([g.reshape(samples, -1) for g in grads.values()], dim=1)
    mean = flat.mean(dim=0)
    noise = float((flat - mean).square().sum() / (samples - 1))
    return noise, float(mean.square().sum())


@pytest.mark.parametrize("world", [1, 2])
def test_noise_scale_matches_per_sample_gradients(tmp_path: Path, world: int) -> None:
    """With the parameters held fixed (lr 0) the averaged estimate converges to the per-sample truth, at the
    library's default smoothing (0.999 per unit of scale)."""
    true_noise, true_sqr = _per_sample_truth(2048)
    out = tmp_path / "gns.json"
    results = run(None, world, ["--samples", "2048", "--batch-size", "32", "--epochs", "4", "--lr", "0",
                                "--float64", "--gns-out", str(out)])  # at the default smoothing
    assert [rc for rc, _ in results] == [0] * world, results
    est = json.loads(out.read_text())
    assert est["measurements"] >= 250
    assert est["noise"] == pytest.approx(true_noise, rel=0.10)
    assert est["noise"] / est["grad_sqr"] == pytest.approx(true_noise / true_sqr, rel=0.10)

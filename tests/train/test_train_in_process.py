"""dlsched.train in the test's own process (a one-process group): the emulated slowdown and AdaScale's rate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

import dlsched.train as dt


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "DLSCHED_JOB_DIR", "DLSCHED_CHECKPOINT_DIR",
                 "DLSCHED_RESUME_STEP", "DLSCHED_BATCH_SIZE", "DLSCHED_LR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    yield
    dt.reset_session()


def _train(steps: int, batch: int = 16,
           seen: list[tuple[float, float]] | None = None) -> tuple[dt.DataParallel, torch.optim.Optimizer, dt.DataLoader]:
    dt.init_process_group()
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x @ torch.randn(8, 3)).argmax(dim=1)
    net = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 3))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    model = dt.DataParallel(net, optimizer)
    loader = dt.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch, max_batch_size=128)
    for i, (xb, yb) in enumerate(loader):
        if i == steps:
            break
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if seen is not None:
            state = model._hook_state
            seen.append((state.compute_s or 0.0, state.slept_s))
    return model, optimizer, loader


def test_slowdown_stretches_the_computation_by_its_factor(session: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLSCHED_SLOWDOWN", "3")
    seen: list[tuple[float, float]] = []
    _train(steps=4, seen=seen)
    assert all(compute > 0 for compute, _ in seen)
    # the model's gradients fit one bucket, so each step pauses for twice its own computation (forward and
    # backward, measured without the pause) before its gradient exchange
    for compute, pause in seen:
        assert pause == pytest.approx(2 * compute)


def test_one_replica_measures_the_noise_and_adascale_raises_the_rate(session: None) -> None:
    _, optimizer, loader = _train(steps=12)
    sess = dt.current_session()
    assert sess.gns is not None and sess.gns.measurements >= 10  # every step but the first pairs with its previous
    assert sess.gns.grad_sqr is not None and sess.gns.grad_var is not None
    assert sess.lr == pytest.approx(0.1)  # at the initial batch the gain is 1
    loader.set_batch_size(64)
    sess.step_take = 64
    gain = sess.gain()
    assert 1.0 < gain <= 4.0
    assert optimizer.param_groups[0]["lr"] == 0.1  # the user's base rate is left as it was


def test_lr_from_the_protocol_overrides(session: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLSCHED_LR", "0.02")
    _train(steps=2)
    assert dt.current_session().lr == pytest.approx(0.02)


def test_accessors_are_defined_from_the_first_step(session: None) -> None:
    dt.init_process_group()
    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
    net = nn.Sequential(nn.Linear(8, 3))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    model = dt.DataParallel(net, optimizer)
    loader = dt.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    assert (dt.batch_size(), dt.local_batch_size()) == (16, 16)
    seen, losses = [], []
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        dt.report_loss(loss)
        losses.append(loss.item())
        seen.append(dt.smoothed_loss())
        assert (dt.batch_size(), dt.local_batch_size()) == (16, len(yb))
    assert seen[0] == pytest.approx(losses[0])  # a number in the very first step, before any boundary
    assert all(v is not None for v in seen) and len(seen) == 4
    assert seen[1] == pytest.approx(losses[0])  # in step 2: the average through step 1's boundary


def test_adam_follows_the_square_root_of_adascales_gain(session: None) -> None:
    dt.init_process_group()
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x @ torch.randn(8, 3)).argmax(dim=1)
    net = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    model = dt.DataParallel(net, optimizer)
    loader = dt.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, max_batch_size=128)
    sess = dt.current_session()
    for i, (xb, yb) in enumerate(loader):
        if i == 12:
            loader.set_batch_size(64)
        if i == 14:
            break
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i == 13:
            gain = sess.gain()
            assert 1.0 < gain and sess.lr == pytest.approx(0.01 * gain ** 0.5)
    assert sess.gns is not None and sess.gns.measurements >= 6  # after Adam's warm-up steps


@pytest.mark.parametrize("wrap", ["fsdp", "fully_shard", "ddp"])
def test_sharded_or_wrapped_modules_are_refused(session: None, wrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard

    dt.init_process_group()
    net: nn.Module = nn.Sequential(nn.Linear(4, 4))
    if wrap == "fsdp":
        net = FullyShardedDataParallel(net, device_id=torch.device("cpu"))
    elif wrap == "fully_shard":
        fully_shard(net)
    else:
        net = torch.nn.parallel.DistributedDataParallel(net)
    with pytest.raises(SystemExit) as exit_:
        dt.DataParallel(net, torch.optim.SGD(net.parameters(), lr=0.1))
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and ("FSDP" in err if wrap != "ddp" else "already wrapped" in err)

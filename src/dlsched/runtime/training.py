"""One worker of a data-parallel training job: a round of real training between two checkpoints.

Every round, each worker of a job loads the job's checkpoint (model, optimiser, sampler position, gradient
statistics) from the shared directory, trains in step with the others until the round's wall-clock budget or
the job's stopping criterion, and rank 0 writes the checkpoint back. The world size, the global batch and
the workers' input shares may differ from round to round; nothing else carries over, so a job resumes the
same way after a re-allocation, a preemption or a worker that died.

Data parallelism without a wrapper: each worker sums the loss over its share of the global batch, and one
all-reduce (gloo on CPU, NCCL on GPUs) adds the workers' gradient sums together with the statistics below,
so the update is the mean gradient of the global batch however unequal the shares are (Gimbal's stealing).

The sampler walks a per-epoch permutation of the data set drawn from the job's seed; its position (epoch,
offset) advances by exactly the global batch each step and is checkpointed with the model, so a job that
resumes, on any world size, takes the next samples: no sample is lost or seen twice within an epoch, and
the checkpoint's step history lets anyone check that.

Gradient noise scale (McCandlish et al., as Pollux measures it): each worker takes the gradient of the two
halves of its share separately. With ``E|g_b|^2 = |G|^2 + S/b`` for a mean gradient over ``b`` samples,
the halves' squared norms and the global batch's give unbiased ``S`` (trace of the per-sample gradient
covariance) and ``|G|^2``, smoothed over steps. A job reports them as Pollux's ``grad_sqr`` (``|G|^2``) and
``grad_var`` (``S / B0``, the noise of an initial-size batch), and scales its learning rate by AdaScale's
gain for its current batch, as Pollux's jobs do.

Emulated GPU types: on a machine without the GPU type a node claims, ``slowdown`` stretches each worker's
computation of a step (forward and backward) by sleeping ``(slowdown - 1)`` times its measured length, before
the gradient exchange; reports carry the steps' real, stretched lengths. The exchange is not stretched: a GPU
type does not change the network, and stretching a step's wait for its peers would feed each worker's sleep
back into the others' waits, so that a job with two workers on a type more than twice as slow as the reference
slowed down without bound from one step to the next.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from dlsched.runtime.models import make_data, make_model, model_kind

#: Smoothing of the gradient statistics and the loss (weight of the history per step).
SMOOTHING = 0.9
CHECKPOINT_FILE = "checkpoint.pt"


@dataclass(frozen=True)
class TrainSpec:
    """A real training job: its model, data, batch limits and when it is done."""

    job_id: str
    model: str
    samples: int
    init_batch: int
    max_batch: int
    lr: float = 0.05
    #: Stop after this many passes over the data (fractions allowed) ...
    epochs: float | None = None
    #: ... or once the smoothed training loss reaches this (whichever comes first).
    target_loss: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        model_kind(self.model)
        if self.epochs is None and self.target_loss is None:
            raise ValueError(f"job {self.job_id}: give epochs or target_loss (when the job is done)")
        if not 1 <= self.init_batch <= self.max_batch:
            raise ValueError(f"job {self.job_id}: need 1 <= init_batch <= max_batch")


@dataclass(frozen=True)
class WorkerPlan:
    """What one round asks of one worker."""

    rank: int
    world_size: int
    #: ``host:port`` where rank 0 rendezvouses (unused for one worker).
    master: str
    batch_size: int
    #: Every rank's share of each global batch (sums to 1; equal shares unless stealing moves them).
    shares: tuple[float, ...]
    #: Emulated GPU type: each step stretched to this multiple of its measured time (1: real speed).
    slowdown: float = 1.0
    budget_s: float = 10.0
    checkpoint_every: int = 20
    #: CUDA MPS active-thread percentage for this worker's process (GPUs only; None: whole GPU).
    mps_percent: int | None = None
    #: The learning rate the job's user gives for this world size (Hops's per-count rates or scaling rule);
    #: None: the job's base rate, adapted to the batch by AdaScale's gain.
    lr: float | None = None


@dataclass
class RoundReport:
    """What a job reports after a round: its progress, step timing and gradient statistics."""

    job_id: str
    resumed_step: int
    step: int
    steps: int
    samples_seen: int
    epoch: int
    offset: int
    done: bool
    loss: float | None
    batch_size: int
    local_bsz: int
    step_time_s: float
    sync_time_s: float
    grad_sqr: float | None
    grad_var: float | None
    progress_fraction: float
    wall_s: float
    #: The learning rate of the round's last step (the user's rate for this world size, or AdaScale's).
    lr: float = 0.0


@dataclass
class TrainState:
    """What a checkpoint holds besides the model and optimiser."""

    step: int = 0
    epoch: int = 0
    offset: int = 0
    samples_seen: int = 0
    loss_ema: float | None = None
    first_loss: float | None = None
    grad_sqr: float | None = None
    noise: float | None = None
    done: bool = False
    #: (step, epoch, offset, batch) of every step taken, in order: the audit trail of the sampler.
    history: list[tuple[int, int, int, int]] = field(default_factory=list)


def checkpoint_path(ckpt_dir: str | Path) -> Path:
    return Path(ckpt_dir) / CHECKPOINT_FILE


def load_checkpoint(ckpt_dir: str | Path) -> tuple[TrainState, dict[str, Any] | None, dict[str, Any] | None]:
    """The job's state, model and optimiser state dicts (a fresh state and None, None if never saved)."""
    path = checkpoint_path(ckpt_dir)
    if not path.is_file():
        return TrainState(), None, None
    blob = torch.load(path, map_location="cpu", weights_only=False)
    state = TrainState(**blob["state"])
    state.history = [tuple(h) for h in state.history]  # type: ignore[misc]
    return state, blob["model"], blob["optimizer"]


def save_checkpoint(ckpt_dir: str | Path, state: TrainState, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer) -> None:
    """Write the checkpoint whole or not at all (temporary file, then rename)."""
    path = checkpoint_path(ckpt_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({"state": asdict(state), "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
    os.replace(tmp, path)


def split_counts(total: int, shares: tuple[float, ...]) -> list[int]:
    """``total`` samples split by ``shares`` (largest remainders get the leftovers; ties to lower ranks)."""
    raw = [total * s for s in shares]
    counts = [math.floor(r) for r in raw]
    order = sorted(range(len(shares)), key=lambda i: (-(raw[i] - counts[i]), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def permutation(seed: int, epoch: int, n: int) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))


def adascale_gain(batch: int, init_batch: int, grad_sqr: float | None, grad_var: float | None) -> float:
    """AdaScale's gain for ``batch`` (Pollux's learning-rate scaling): 1 at the initial batch or without
    statistics, up to ``batch / init_batch`` when gradient noise dominates."""
    scale = batch / init_batch
    if grad_sqr is None or grad_var is None or grad_sqr + grad_var <= 0:
        return 1.0
    return (grad_var + grad_sqr) / (grad_var / scale + grad_sqr)


def progress_fraction(spec: TrainSpec, state: TrainState) -> float:
    """How much of its training the job has done, by whichever criterion is nearer."""
    if state.done:
        return 1.0
    parts = []
    if spec.epochs is not None:
        parts.append(state.samples_seen / (spec.epochs * spec.samples))
    if spec.target_loss is not None and state.first_loss is not None and state.loss_ema is not None:
        span = math.log(state.first_loss) - math.log(spec.target_loss)
        if span > 0:
            parts.append((math.log(state.first_loss) - math.log(max(state.loss_ema, 1e-12))) / span)
    return min(1.0, max([0.0, *parts]))


def _finished(spec: TrainSpec, state: TrainState) -> bool:
    if spec.epochs is not None and state.samples_seen >= spec.epochs * spec.samples:
        return True
    return spec.target_loss is not None and state.loss_ema is not None and state.loss_ema <= spec.target_loss


def _smooth(old: float | None, new: float) -> float:
    return new if old is None else SMOOTHING * old + (1 - SMOOTHING) * new


def train_round(spec: TrainSpec, plan: WorkerPlan, ckpt_dir: str | Path) -> RoundReport:
    """Train one round as rank ``plan.rank`` of ``plan.world_size``; every rank returns the same report."""
    t_start = time.monotonic()
    torch.set_num_threads(1)
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")
    distributed = plan.world_size > 1
    if distributed:
        host, port = plan.master.rsplit(":", 1)
        dist.init_process_group("nccl" if use_cuda else "gloo", init_method=f"tcp://{host}:{port}",
                                rank=plan.rank, world_size=plan.world_size)
    try:
        return _train(spec, plan, ckpt_dir, device, distributed, t_start)
    finally:
        if distributed:
            dist.destroy_process_group()


def _train(spec: TrainSpec, plan: WorkerPlan, ckpt_dir: str | Path, device: torch.device, distributed: bool,
           t_start: float) -> RoundReport:
    kind = model_kind(spec.model)
    data = make_data(spec.model, spec.samples, spec.seed)
    model = make_model(spec.model, spec.seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=0.9)
    state, model_sd, optim_sd = load_checkpoint(ckpt_dir)
    if model_sd is not None and optim_sd is not None:
        model.load_state_dict(model_sd)
        optimizer.load_state_dict(optim_sd)
    resumed = state.step
    params = [p for p in model.parameters() if p.requires_grad]
    sizes = [p.numel() for p in params]
    n_params = sum(sizes)
    perm = permutation(spec.seed, state.epoch, spec.samples)
    step_times: list[float] = []
    sync_times: list[float] = []
    local_max = 0
    used_lr = plan.lr if plan.lr is not None else spec.lr
    last_loss: float | None = None
    batch = plan.batch_size
    while not state.done:
        t0 = time.monotonic()
        take = min(batch, spec.samples - state.offset)
        counts = split_counts(take, plan.shares)
        first = state.offset + sum(counts[: plan.rank])
        mine = perm[first: first + counts[plan.rank]]
        local_max = max(local_max, max(counts))
        halves = [mine[: (len(mine) + 1) // 2], mine[(len(mine) + 1) // 2:]]
        packed = torch.zeros(n_params + 5, dtype=torch.float64)
        model.train()
        for idx in halves:
            if len(idx) == 0:
                continue
            optimizer.zero_grad(set_to_none=True)
            loss = kind.loss_sum(model(data.inputs[idx].to(device)), data.targets[idx].to(device))
            loss.backward()
            grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                              for p in params]).double().cpu()
            packed[:n_params] += grad
            packed[n_params] += float(loss.detach())
            packed[n_params + 1] += float((grad / len(idx)).square().sum())
            packed[n_params + 2] += 1.0
            packed[n_params + 3] += 1.0 / len(idx)
        if plan.slowdown > 1.0:  # the emulated GPU computes more slowly; the exchange below is not stretched
            time.sleep((time.monotonic() - t0) * (plan.slowdown - 1.0))
        over_budget = time.monotonic() - t_start + (step_times[-1] if step_times else 0.0) >= plan.budget_s
        packed[n_params + 4] = 1.0 if over_budget else 0.0
        t_sync = time.monotonic()
        if distributed:
            # all_reduce works in place: reduce the very tensor read below (on CUDA, NCCL needs a device copy,
            # which must be the one kept; reducing a temporary and dropping it left each rank its own sums)
            reduced = packed.to(device) if device.type == "cuda" else packed
            dist.all_reduce(reduced)
            packed = reduced.cpu()
        sync_s = time.monotonic() - t_sync
        mean_grad = packed[:n_params] / take
        offset = 0
        for p, n in zip(params, sizes, strict=True):
            p.grad = mean_grad[offset: offset + n].view_as(p).to(p.dtype).to(device)
            offset += n
        gain = adascale_gain(take, spec.init_batch, state.grad_sqr,
                             None if state.noise is None else state.noise / spec.init_batch)
        used_lr = plan.lr if plan.lr is not None else spec.lr * gain
        for group in optimizer.param_groups:
            group["lr"] = used_lr
        optimizer.step()
        # statistics of this step: E|g_b|^2 = |G|^2 + S/b over the halves (b = their sizes) and the whole
        global_sq = float(mean_grad.square().sum())
        halves_n = float(packed[n_params + 2])
        mean_sq, mean_inv = float(packed[n_params + 1]) / halves_n, float(packed[n_params + 3]) / halves_n
        if mean_inv - 1.0 / take > 1e-12:
            noise = max(0.0, (mean_sq - global_sq) / (mean_inv - 1.0 / take))
            sqr = max(global_sq - noise / take, 1e-12)
            state.noise, state.grad_sqr = _smooth(state.noise, noise), _smooth(state.grad_sqr, sqr)
        last_loss = float(packed[n_params]) / take
        state.first_loss = last_loss if state.first_loss is None else state.first_loss
        state.loss_ema = _smooth(state.loss_ema, last_loss)
        state.history.append((state.step, state.epoch, state.offset, take))
        state.step += 1
        state.samples_seen += take
        state.offset += take
        if state.offset >= spec.samples:
            state.epoch, state.offset = state.epoch + 1, 0
            perm = permutation(spec.seed, state.epoch, spec.samples)
        state.done = _finished(spec, state)
        step_times.append(time.monotonic() - t0)
        sync_times.append(sync_s)
        if plan.rank == 0 and (state.step % plan.checkpoint_every == 0 or state.done):
            save_checkpoint(ckpt_dir, state, model, optimizer)
        if bool(packed[n_params + 4]):
            break
    if plan.rank == 0 and step_times:
        save_checkpoint(ckpt_dir, state, model, optimizer)
    if distributed:
        dist.barrier()  # the checkpoint is complete before any worker reports the round over
    return RoundReport(
        job_id=spec.job_id, resumed_step=resumed, step=state.step, steps=state.step - resumed,
        samples_seen=state.samples_seen, epoch=state.epoch, offset=state.offset, done=state.done,
        loss=state.loss_ema if last_loss is not None else state.loss_ema, batch_size=batch, local_bsz=local_max,
        step_time_s=sum(step_times) / len(step_times) if step_times else 0.0,
        sync_time_s=sum(sync_times) / len(sync_times) if sync_times else 0.0,
        grad_sqr=state.grad_sqr, grad_var=None if state.noise is None else state.noise / spec.init_batch,
        progress_fraction=progress_fraction(spec, state), wall_s=time.monotonic() - t_start, lr=used_lr)

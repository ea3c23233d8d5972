"""``DataParallel``: PyTorch's DistributedDataParallel with a communication hook that measures the gradient
noise scale, AdaScale's learning rate, and the emulated GPU types' slowdown.

The hook does what DDP's default all-reduce does, weighted by this rank's share of the global batch (each
rank's loss is the mean over its own samples, so ``sum_r (b_r / B) g_r`` is the mean gradient of the global
batch however unequal the shares), and on the way takes the two squared norms the noise scale needs: the
local bucket's before the all-reduce and the reduced one's after it (as AdaptDL does). Both stay on the
device until the step boundary reads them in one transfer; nothing runs a second backward pass or copies
the gradients to the host. With one replica the hook keeps the previous step's gradient on the device and
takes its dot product with this step's, the two steps standing in for two replicas.

Emulated GPU types (``DLSCHED_SLOWDOWN`` > 1): the first bucket of a step waits ``(slowdown - 1)`` times the
step's computation (forward and backward) before any exchange starts. When the gradients fit one bucket (small
models) that is this step's own computation, measured as the bucket becomes ready; with several buckets the
first is ready before the backward pass ends, so the previous step's full computation stands in. The exchange itself is not stretched: a GPU type does not change the network,
and stretching the wait for peers would feed each rank's sleep into the others' waits.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dlsched.train.gns import SMOOTHING
from dlsched.train.session import Session, StepStats
from dlsched.train.state import current_session


def _sqr(t: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(t, dtype=torch.float64).square()


class _HookState:
    """What the communication hook accumulates over one step's buckets."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.world = session.env.world_size
        self.rank = session.env.rank
        self.prev: dict[int, torch.Tensor] = {}
        self.compute_s: float | None = None
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.local: list[torch.Tensor] = []
        self.reduced: list[torch.Tensor] = []
        self.prev_sqr: list[torch.Tensor] = []
        self.cur_sqr: list[torch.Tensor] = []
        self.dots: list[torch.Tensor] = []
        self.pair_valid = True
        self.slept_s = 0.0
        self.first = True
        self.ready_t: float | None = None
        self.done_t: float | None = None

    def weight(self) -> float:
        counts = self.session.step_counts
        return counts[self.rank] / sum(counts) if counts else 1.0 / self.world

    def stretch(self, last: bool) -> None:
        """Sleep for the emulated slowdown before the step's first exchange; measure the computation."""
        session = self.session
        start = session.step_start
        now = time.monotonic()
        if last and start is not None:
            self.compute_s = now - start - self.slept_s
        if self.first and session.env.slowdown > 1.0 and start is not None:
            compute = self.compute_s if self.compute_s is not None else now - start
            pause = (session.env.slowdown - 1.0) * compute
            time.sleep(pause)
            self.slept_s += pause
        self.first = False


def _hook(state: _HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    buf = bucket.buffer()
    state.stretch(bucket.is_last())
    if state.world == 1:
        index = bucket.index()
        prev = state.prev.get(index)
        if prev is not None and prev.shape == buf.shape:
            state.prev_sqr.append(_sqr(prev))
            state.dots.append(torch.dot(prev.reshape(-1).double(), buf.reshape(-1).double()))
            prev.copy_(buf)
        else:
            state.pair_valid = False
            state.prev[index] = buf.detach().clone()
        state.cur_sqr.append(_sqr(buf))
        state.ready_t = state.done_t = time.monotonic()
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(buf)
        return fut
    state.local.append(_sqr(buf))
    buf.mul_(state.weight())
    state.ready_t = time.monotonic()
    work = dist.all_reduce(buf, async_op=True)
    assert work is not None

    def reduced(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        out = f.value()[0]
        norm = _sqr(out)
        with state.lock:
            state.reduced.append(norm)
            state.done_t = time.monotonic()
        return out

    return work.get_future().then(reduced)


# DDP checks the hook's annotations as objects; this module's annotations are strings (postponed evaluation)
_hook.__annotations__ = {"state": _HookState, "bucket": dist.GradBucket,
                         "return": torch.futures.Future[torch.Tensor]}


def _total(parts: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    return torch.stack(parts).sum() if parts else torch.zeros((), dtype=torch.float64, device=device)


class DataParallel(DistributedDataParallel):
    """Data-parallel training of ``module`` with ``optimizer`` over the session's ranks.

    Moves ``module`` to the session's device, wraps it in DDP (the loss each rank computes must be the mean
    over its own batch), and steers ``optimizer``'s learning rate: ``DLSCHED_LR`` when the job gives one,
    else each group's own rate times AdaScale's gain for the current batch. ``smoothing`` weights the
    history of the gradient statistics per step.
    """

    def __init__(self, module: nn.Module, optimizer: torch.optim.Optimizer, *, smoothing: float = SMOOTHING,
                 **ddp_kwargs: Any) -> None:
        session = current_session()
        module = module.to(session.device)
        saved = session.part("parallel")
        if saved is not None:
            module.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
        if session.device.type == "cuda":
            ddp_kwargs.setdefault("device_ids", [session.device.index])
        super().__init__(module, **ddp_kwargs)
        self.optimizer = optimizer
        self.session = session
        self._hook_state = _HookState(session)
        self.register_comm_hook(self._hook_state, _hook)
        self._saved_lrs: list[float] = []
        optimizer.register_step_pre_hook(self._before_step)
        optimizer.register_step_post_hook(self._after_step)
        session.attach_parallel(self, smoothing)

    def _before_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._saved_lrs = [group["lr"] for group in optimizer.param_groups]
        fixed = self.session.env.lr
        gain = self.session.gain()
        for group in optimizer.param_groups:
            group["lr"] = fixed if fixed is not None else group["lr"] * gain
        self.session.lr = optimizer.param_groups[0]["lr"]

    def _after_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for group, lr in zip(optimizer.param_groups, self._saved_lrs, strict=True):
            group["lr"] = lr
        self.session.optimizer_steps += 1

    def begin_step(self) -> None:
        self._hook_state.reset()

    def step_stats(self) -> StepStats:
        """The step's measurements, read from the device in one transfer."""
        st = self._hook_state
        measured = bool(st.local or st.cur_sqr)
        if not measured:
            return StepStats()
        with st.lock:
            dev = self.session.device
            values = torch.stack([_total(st.local, dev), _total(st.reduced, dev), _total(st.prev_sqr, dev),
                                  _total(st.cur_sqr, dev), _total(st.dots, dev)]).tolist()
            ready, done = st.ready_t, st.done_t
        sync = max(0.0, done - ready) if ready is not None and done is not None else 0.0
        return StepStats(local_sqr=values[0], global_sqr=values[1], prev_sqr=values[2], cur_sqr=values[3],
                         dot=values[4], pair_valid=st.pair_valid and bool(st.dots), sync_s=sync, measured=True)

    def checkpoint_state(self) -> dict[str, Any]:
        """The checkpoint part: the wrapped module's and the optimiser's state (no ``module.`` prefix)."""
        return {"model": self.module.state_dict(), "optimizer": self.optimizer.state_dict()}

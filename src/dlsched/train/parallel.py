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

Gradient accumulation (``dt.accumulate(k)``): the loader hands out a step's batch as ``k`` micro-batches; for
all but the last DDP skips its exchange (``no_sync``), and the script's ordinary ``zero_grad``/``step`` calls
(and a ``GradScaler``'s ``step``/``update``) do nothing until the last, so the loop needs no change. A hook on
each parameter's gradient weights micro-batch ``j`` by its share of the rank's samples (the loss stays the
mean over the micro-batch, as without accumulation) and takes its squared norm: ``k`` micro-batches on ``n``
ranks are ``n * k`` local gradients for the noise scale, against the one exchanged gradient.

Mixed precision: with ``scaler=`` (a ``torch.amp.GradScaler``) the measured norms are divided by the loss
scale of the step, and a step whose gradients overflowed (the scaler skips it) adds nothing to the statistics.
Adaptive optimisers (``optim``): the norms are of the preconditioned gradient, and the learning rate follows
the square root of AdaScale's gain.

FSDP is refused: sharded parameters leave no whole local gradient to measure, and the loader's batch split
assumes replicas. A module already wrapped in DDP is refused too (it would synchronise twice).
"""

from __future__ import annotations

import threading
import time
import types
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dlsched.train.gns import SMOOTHING
from dlsched.train.optim import Preconditioner, lr_factor
from dlsched.train.session import Session, StepStats
from dlsched.train.state import current_session, fail

#: Largest last bucket (elements) the step's five exchanged values are appended to; a larger one would cost
#: more to copy than the separate small all-reduce that follows it instead.
PIGGYBACK_MAX = 1 << 20


def _sqr(t: torch.Tensor) -> torch.Tensor:
    """Squared norm as a float64 scalar: a dot product in the tensor's own precision (half types widened to
    float32), without a float64 copy of the whole bucket, which cost more than the rest of the hook."""
    v = t.reshape(-1)
    if v.dtype in (torch.float16, torch.bfloat16):
        v = v.float()
    return torch.dot(v, v).double()


class _HookState:
    """What the communication and gradient hooks accumulate over one step's buckets and micro-batches."""

    def __init__(self, session: Session, precond: Preconditioner) -> None:
        self.session = session
        self.precond = precond
        self.world = session.env.world_size
        self.rank = session.env.rank
        self.prev: dict[int, torch.Tensor] = {}
        self.compute_s: float | None = None
        self.lock = threading.Lock()
        self.scale_inv = 1.0
        #: a micro-batch's backward ran since the last optimiser step (``zero_grad`` must keep the sum)
        self.pending = False
        self.reset()

    def reset(self) -> None:
        self.local: list[torch.Tensor] = []
        self.reduced: list[torch.Tensor] = []
        self.prev_sqr: list[torch.Tensor] = []
        self.cur_sqr: list[torch.Tensor] = []
        self.dots: list[torch.Tensor] = []
        self.micro_sqr: list[torch.Tensor] = []
        self.pair_valid = True
        self.precond_ok = True
        self.slept_s = 0.0
        self.first = True
        self.ready_t: float | None = None
        self.done_t: float | None = None
        self.precond.reset()

    def weight(self) -> float:
        counts = self.session.step_counts
        return counts[self.rank] / sum(counts) if counts else 1.0 / self.world

    def view(self, t: torch.Tensor, pinv: torch.Tensor | None) -> torch.Tensor:
        """``t`` unscaled (loss scale) and preconditioned, as the statistics take it."""
        if self.scale_inv != 1.0:
            t = t * self.scale_inv
        if pinv is not None:
            t = t / pinv
        return t

    def bucket_precond(self, bucket: dist.GradBucket, numel: int) -> torch.Tensor | None:
        if not self.precond.active:
            return None
        pinv = self.precond.flat(bucket.parameters(), numel)
        if pinv is None:
            self.precond_ok = False
        return pinv

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
    pinv = state.bucket_precond(bucket, buf.numel())
    if state.world == 1:
        cur = state.view(buf, pinv)
        if len(state.session.micro_counts) <= 1:  # accumulation needs no pairing with the previous step
            index = bucket.index()
            prev = state.prev.get(index)
            if prev is not None and prev.shape == cur.shape:
                state.prev_sqr.append(_sqr(prev))
                state.dots.append(torch.dot(prev.reshape(-1).double(), cur.reshape(-1).double()))
                prev.copy_(cur)
            else:
                state.pair_valid = False
                state.prev[index] = cur.detach().clone()
        state.cur_sqr.append(_sqr(cur))
        state.ready_t = state.done_t = time.monotonic()
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(buf)
        return fut
    weight = state.weight()
    if weight == 0.0:
        buf.zero_()  # a rank without samples this step (its loss over nothing may be NaN) adds nothing
    elif len(state.session.micro_counts) <= 1:  # else the parameter hooks measured each micro-batch
        state.local.append(_sqr(state.view(buf, pinv)))
    buf.mul_(weight)
    state.ready_t = time.monotonic()
    n = buf.numel()
    extra = None
    if bucket.is_last():  # every local norm is known: the step's small exchange goes with the gradients
        local = _total(state.micro_sqr if len(state.session.micro_counts) > 1 else state.local, buf.device)
        if buf.dtype in (torch.float32, torch.float64) and n <= PIGGYBACK_MAX:
            extra = state.session.exchange_values(local, buf.dtype, buf.device)
        else:  # a half-precision or very large bucket: the exchange follows it as a collective of its own
            state.session.launch_exchange(local)
    if extra is None:  # the bucket's own buffer, which DDP's reducer keeps referenced
        work = dist.all_reduce(buf, async_op=True)
    else:  # a tensor of this hook's: kept until gloo's workers let go of it (see collectives.py)
        packed = torch.cat([buf.reshape(-1), extra])  # the future hands the reduced values back
        work = state.session.sent.all_reduce(packed, async_op=True)
    assert work is not None

    def reduced(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        out = f.value()[0]
        if extra is not None:
            state.session.exchange_reduced(out[n:])
            out = out[:n].view_as(buf)
        norm = _sqr(state.view(out, pinv))
        with state.lock:
            state.reduced.append(norm)
            state.done_t = time.monotonic()
        return out

    return work.get_future().then(reduced)


# DDP checks the hook's annotations as objects; this module's annotations are strings (postponed evaluation)
_hook.__annotations__ = {"state": _HookState, "bucket": dist.GradBucket,
                         "return": torch.futures.Future[torch.Tensor]}


def _param_hook(state: _HookState, param: torch.Tensor, grad: torch.Tensor) -> torch.Tensor | None:
    """Under accumulation: weight this micro-batch's gradient by its share of the rank's samples and take
    its squared norm (one local gradient of the noise scale)."""
    session = state.session
    micro = session.micro_counts
    if len(micro) <= 1:
        return None
    state.pending = True
    m = micro[session.micro_index]
    if m == 0:
        return torch.zeros_like(grad)
    pinv = state.precond.of(param) if state.precond.active else None
    if state.precond.active and pinv is None:
        state.precond_ok = False
    with torch.no_grad():
        state.micro_sqr.append(_sqr(state.view(grad, pinv)))
    return grad * (m / session.step_counts[state.rank])


def _total(parts: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    return torch.stack(parts).sum() if parts else torch.zeros((), dtype=torch.float64, device=device)


def _refuse_sharded(module: nn.Module) -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel

    fsdp2 = getattr(torch.distributed.fsdp, "FSDPModule", None)
    if isinstance(module, FullyShardedDataParallel) or (fsdp2 is not None and any(
            isinstance(m, fsdp2) for m in module.modules())):
        fail("dlsched.train.DataParallel does not support FSDP (sharded parameters leave no whole local "
             "gradient for the noise scale); pass the unwrapped module, or run the script without dlsched.train")
    if isinstance(module, (DistributedDataParallel, nn.DataParallel)):
        fail("the module given to dlsched.train.DataParallel is already wrapped in DataParallel/DDP; "
             "pass the unwrapped module")


class DataParallel(DistributedDataParallel):
    """Data-parallel training of ``module`` with ``optimizer`` over the session's ranks.

    Moves ``module`` to the session's device, wraps it in DDP (the loss each rank computes must be the mean
    over its own batch, or micro-batch under ``dt.accumulate``), and steers ``optimizer``'s learning rate:
    ``DLSCHED_LR`` when the job gives one, else each group's own rate times AdaScale's gain for the current
    batch (its square root for Adam-family optimisers). ``smoothing`` weights the history of the gradient
    statistics per unit of scale (``smoothing ** (B / B0)`` per step); ``scaler`` is the script's
    ``torch.amp.GradScaler``, if it uses one.
    """

    def __init__(self, module: nn.Module, optimizer: torch.optim.Optimizer, *, smoothing: float = SMOOTHING,
                 scaler: torch.amp.GradScaler | None = None, **ddp_kwargs: Any) -> None:
        _refuse_sharded(module)
        if not 0.0 <= smoothing < 1.0:
            fail(f"field 'smoothing': must be in [0, 1), got {smoothing}")
        session = current_session()
        module = module.to(session.device)
        saved = session.part("parallel")
        if saved is not None:
            module.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            if scaler is not None and saved.get("scaler") is not None:
                scaler.load_state_dict(saved["scaler"])
        if session.device.type == "cuda":
            ddp_kwargs.setdefault("device_ids", [session.device.index])
        super().__init__(module, **ddp_kwargs)
        self.optimizer = optimizer
        self.scaler = scaler
        self.session = session
        self._hook_state = _HookState(session, Preconditioner(optimizer))
        self.register_comm_hook(self._hook_state, _hook)
        self._param_hooks: list[Any] = []
        self._saved_lrs: list[float] = []
        optimizer.register_step_pre_hook(self._before_step)
        optimizer.register_step_post_hook(self._after_step)
        self._wrap_for_accumulation(optimizer, scaler)
        session.attach_parallel(self, smoothing)

    # ----- accumulation -------------------------------------------------------------------------------
    def _wrap_for_accumulation(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
        """Make the script's per-micro-batch ``step``/``zero_grad`` calls do nothing until the step's last."""
        state, session = self._hook_state, self.session
        step, zero_grad = optimizer.step, optimizer.zero_grad

        def opt_step(opt: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
            if session.accumulating:
                return None
            state.pending = False
            return step(*args, **kwargs)

        def opt_zero_grad(opt: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
            if state.pending:
                return None
            return zero_grad(*args, **kwargs)

        optimizer.step = types.MethodType(opt_step, optimizer)  # type: ignore[method-assign]
        optimizer.zero_grad = types.MethodType(opt_zero_grad, optimizer)  # type: ignore[method-assign]
        if scaler is None:
            return
        scaler_step, scaler_update = scaler.step, scaler.update

        def sc_step(sc: torch.amp.GradScaler, *args: Any, **kwargs: Any) -> Any:
            if session.accumulating:
                return None
            out = scaler_step(*args, **kwargs)
            state.pending = False  # also when the scaler skipped an overflowed step
            return out

        def sc_update(sc: torch.amp.GradScaler, *args: Any, **kwargs: Any) -> Any:
            return None if session.accumulating else scaler_update(*args, **kwargs)

        scaler.step = types.MethodType(sc_step, scaler)  # type: ignore[method-assign]
        scaler.update = types.MethodType(sc_update, scaler)  # type: ignore[method-assign]

    def zero_grad(self, set_to_none: bool = True) -> None:
        if not self._hook_state.pending:
            super().zero_grad(set_to_none)

    def ensure_param_hooks(self) -> None:
        """Install the per-parameter gradient hooks accumulation needs (once, when first asked for)."""
        if self._param_hooks:
            return
        state = self._hook_state
        for param in self.module.parameters():
            if param.requires_grad:
                self._param_hooks.append(param.register_hook(
                    lambda g, p=param: _param_hook(state, p, g)))

    def begin_micro(self, last: bool) -> None:
        """Exchange gradients after this micro-batch's backward only if it is the step's last."""
        self.require_backward_grad_sync = last

    # ----- learning rate ------------------------------------------------------------------------------
    def _before_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._saved_lrs = [group["lr"] for group in optimizer.param_groups]
        fixed = self.session.env.lr
        factor = lr_factor(optimizer, self.session.gain())
        for group in optimizer.param_groups:
            group["lr"] = fixed if fixed is not None else group["lr"] * factor
        self.session.lr = optimizer.param_groups[0]["lr"]

    def _after_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for group, lr in zip(optimizer.param_groups, self._saved_lrs, strict=True):
            group["lr"] = lr
        self.session.optimizer_steps += 1

    # ----- statistics ---------------------------------------------------------------------------------
    def begin_step(self) -> None:
        st = self._hook_state
        st.reset()
        st.scale_inv = 1.0
        if self.scaler is not None and self.scaler.is_enabled():
            st.scale_inv = 1.0 / self.scaler.get_scale()

    def exchanged(self) -> bool:
        """Whether the step in flight has exchanged its gradients (its last backward pass ran)."""
        return self._hook_state.ready_t is not None

    def step_stats(self) -> StepStats:
        """The step's measurements, read from the device in one transfer."""
        st = self._hook_state
        measured = bool(st.local or st.cur_sqr or st.reduced)
        if not measured:
            return StepStats()
        with st.lock:
            dev = self.session.device
            pieces = len(self.session.micro_counts) > 1
            local = st.micro_sqr if pieces else st.local
            values = torch.stack([_total(local, dev), _total(st.reduced, dev), _total(st.prev_sqr, dev),
                                  _total(st.cur_sqr, dev), _total(st.dots, dev)]).tolist()
            ready, done = st.ready_t, st.done_t
        sync = max(0.0, done - ready) if ready is not None and done is not None else 0.0
        return StepStats(local_sqr=values[0], global_sqr=values[1], prev_sqr=values[2], cur_sqr=values[3],
                         dot=values[4], pair_valid=st.pair_valid and bool(st.dots), sync_s=sync, measured=True,
                         pieces=pieces, valid=st.precond_ok)

    def checkpoint_state(self) -> dict[str, Any]:
        """The checkpoint part: the wrapped module's, the optimiser's and the scaler's state (no ``module.``
        prefix)."""
        return {"model": self.module.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scaler": None if self.scaler is None else self.scaler.state_dict()}

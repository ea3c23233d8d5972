"""The training session of one rank: the step boundary where every rank agrees on what happens next.

One session per process holds what the protocol and the user registered (the model and optimiser through
``DataParallel``, the data through ``DataLoader``, named user states) and runs the step boundary, which the
loader calls before it hands out the next batch:

1. rank 0 reads ``control.json`` if it changed; every rank looks at its SIGTERM flag;
2. one small all-reduce carries the stop flag, rank 0's requested batch size, this rank's squared local
   gradient norm (from the communication hook) and its loss, so all ranks take the same decision; with
   several ranks the last gradient bucket launches it behind its own exchange (so it costs no round trip
   of its own), reading the flags then, and a step's loss travels with the next step's exchange;
3. the gradient noise scale is updated, a new batch size applies from the next step on, and on a stop all
   ranks leave together after rank 0 has checkpointed and written ``stopped``;
4. rank 0 writes ``progress`` at most every ``DLSCHED_REPORT_S`` seconds and a checkpoint every
   ``DLSCHED_CHECKPOINT_S`` seconds (and every ``checkpoint_steps`` steps when asked).

A step is one optimiser step: its batch, or under ``accumulate(k)`` its ``k`` micro-batches, which the loader
hands out one by one (``begin_micro``). A rank may get no samples in a step (the world grew past the samples
left in an epoch): it still joins the exchange, with weight 0 and no loss.

Objects that are registered after a resume get their part of the checkpoint as they register, so user code
needs no restore call of its own.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

import torch
import torch.distributed as dist

from dlsched.train import checkpoints as ckpt
from dlsched.train.collectives import SentTensors
from dlsched.train.control import ControlReader, StopSignal, superseded
from dlsched.train.env import TrainEnv
from dlsched.train.gns import GradientNoiseScale, estimate_from_pieces, estimate_from_steps
from dlsched.train.reports import ReportWriter

#: Weight of the history in the smoothed loss ``smoothed_loss()`` (per step).
LOSS_SMOOTHING = 0.9


class Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any], /) -> Any: ...


class GradientSource(Protocol):
    """What the session needs of ``DataParallel``: its checkpoint part and the step's gradient statistics."""

    def checkpoint_state(self) -> dict[str, Any]: ...

    def step_stats(self) -> StepStats: ...

    def begin_step(self) -> None: ...

    def begin_micro(self, last: bool) -> None: ...

    def ensure_param_hooks(self) -> None: ...

    def exchanged(self) -> bool: ...


class BatchSource(Protocol):
    """What the session needs of ``DataLoader``."""

    dataset_size: int
    batch_size: int

    @property
    def epoch(self) -> int: ...

    def state_dict(self) -> dict[str, Any]: ...

    def set_batch_size(self, batch: int) -> None: ...

    def advance(self, take: int) -> None: ...


@dataclass
class StepStats:
    """One step's gradient measurements from the communication hook (floats on the host)."""

    #: Squared norm of this rank's local (pre-all-reduce) gradient.
    local_sqr: float = 0.0
    #: Squared norm of the all-reduced gradient (world size >= 2).
    global_sqr: float = 0.0
    #: One replica: squared norms of the previous and this step's gradient and their dot product.
    prev_sqr: float = 0.0
    cur_sqr: float = 0.0
    dot: float = 0.0
    #: One replica: whether every bucket had its previous gradient (same layout as the step before).
    pair_valid: bool = False
    #: Time the exchange added to the step: from the last bucket ready to the last reduction done.
    sync_s: float = 0.0
    measured: bool = False
    #: Accumulation: ``local_sqr`` sums the squared norms of this rank's micro-batch gradients.
    pieces: bool = False
    #: False when a step cannot be measured as the optimiser sees it (Adam not warmed up yet).
    valid: bool = True


@dataclass
class _Window:
    """Steps covered by the next ``progress`` report."""

    first_step: int | None = None
    step_times: list[float] = field(default_factory=list)
    sync_times: list[float] = field(default_factory=list)
    local_bsz: int = 0
    #: The global batch of the covered steps (the last one's, should it change within).
    batch_size: int | None = None

    def add(self, step: int, step_s: float, sync_s: float, local_bsz: int, batch_size: int | None) -> None:
        if self.first_step is None:
            self.first_step = step
        self.batch_size = batch_size
        self.step_times.append(step_s)
        self.sync_times.append(sync_s)
        self.local_bsz = max(self.local_bsz, local_bsz)


def micro_split(count: int, k: int) -> list[int]:
    """``count`` samples in ``k`` micro-batches as equal as they go (the first ones get the leftovers)."""
    base, extra = divmod(count, k)
    return [base + (1 if j < extra else 0) for j in range(k)]


def micro_steps(counts: list[int], accumulation: int) -> int:
    """Micro-batches of a step with per-rank ``counts``: the same on every rank, at most the largest count."""
    return max(1, min(accumulation, max(counts, default=1)))


def split_counts(total: int, shares: tuple[float, ...]) -> list[int]:
    """``total`` samples split by ``shares`` (largest remainders get the leftovers, ties to lower ranks), with
    at least one sample per rank when ``total`` allows, so no replica runs an empty batch."""
    raw = [total * s for s in shares]
    counts = [math.floor(r) for r in raw]
    order = sorted(range(len(shares)), key=lambda i: (-(raw[i] - counts[i]), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    for i, c in enumerate(counts):
        if c == 0 and total >= len(counts):
            donor = max(range(len(counts)), key=lambda j: (counts[j], -j))
            counts[donor] -= 1
            counts[i] = 1
    return counts


class Session:
    """One rank's view of the job: protocol, registered objects, step counter and the step boundary."""

    def __init__(self, env: TrainEnv, device: torch.device, comm_device: torch.device,
                 checkpoint_dir: Path | None, checkpoint_steps: int | None,
                 resumed: dict[str, Any] | None) -> None:
        self.env = env
        self.device = device
        self.comm_device = comm_device
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_steps = checkpoint_steps
        self.resumed = resumed
        self.reports = ReportWriter(env.job_dir if env.rank == 0 else None, env.incarnation)
        self.control = ControlReader(env.job_dir if env.rank == 0 else None, env.incarnation)
        self.signal = StopSignal()
        self.step = 0 if resumed is None else int(resumed["step"])
        self.samples_seen = 0 if resumed is None else int(resumed["samples_seen"])
        self.loss_ema: float | None = None if resumed is None else resumed.get("loss_ema")
        self.last_loss: float | None = None
        self.parallel: GradientSource | None = None
        self.loader: BatchSource | None = None
        self.states: dict[str, Stateful] = {}
        self.gns: GradientNoiseScale | None = None
        self.gns_smoothing: float | None = None
        self.total_epochs: float | None = None
        self.optimizer_steps = 0
        self.lr: float | None = None
        self.started = False
        self.finished = False
        # the step in flight: its start, global batch and per-rank counts
        self.step_start: float | None = None
        self.step_take = 0
        self.step_counts: list[int] = []
        #: this rank's micro-batch sizes in the step in flight, and the one being handed out
        self.micro_counts: list[int] = []
        self.micro_index = 0
        #: micro-batches per step asked for with ``accumulate(k)``
        self.accumulation = 1
        self._step_opt = 0
        self._loss: torch.Tensor | None = None
        self._losses: dict[int, torch.Tensor] = {}
        #: the all-reduce launched by the last gradient bucket, and the loss (sum, samples) it could not carry
        self._exchange: tuple[Any, torch.Tensor] | None = None
        #: what gloo's workers may still hold at exit (see collectives.py)
        self.sent = SentTensors(gloo=dist.is_initialized() and dist.get_backend() == "gloo")
        self._carry: tuple[float, float] = (0.0, 0.0)
        self._prev_take: int | None = None
        self._window = _Window()
        self._last_report = time.monotonic()
        self._last_checkpoint = time.monotonic()
        self._last_saved_step = self.step if resumed is not None else -1
        self._stopping = False
        # registered now, so it runs after the exit handlers the user registers later and before those of
        # the libraries imported earlier (see _exit_after_stop)
        atexit.register(self._exit_after_stop)

    # ----- registration -------------------------------------------------------------------------------
    def part(self, key: str) -> Any:
        """The resumed checkpoint's ``key`` part (None when starting fresh)."""
        return None if self.resumed is None else self.resumed.get(key)

    def attach_parallel(self, parallel: GradientSource, smoothing: float) -> None:
        if self.parallel is not None:
            raise RuntimeError("dlsched.train supports one DataParallel model per process")
        self.parallel = parallel
        self.gns_smoothing = smoothing
        if self.gns is not None:
            self.gns.smoothing = smoothing

    def attach_loader(self, loader: BatchSource, init_batch: int) -> None:
        if self.loader is not None and self.loader is not loader:
            raise RuntimeError("dlsched.train supports one elastic DataLoader per process (the training data)")
        self.loader = loader
        if self.gns is None:
            self.gns = GradientNoiseScale(init_batch=init_batch)
            if self.gns_smoothing is not None:
                self.gns.smoothing = self.gns_smoothing
            saved = self.part("gns")
            if saved is not None:
                self.gns.load_state_dict(saved)

    def register_state(self, name: str, obj: Stateful) -> None:
        if name in self.states:
            raise ValueError(f"a state named '{name}' is already registered")
        self.states[name] = obj
        saved = self.part("user")
        if saved is not None and name in saved:
            obj.load_state_dict(saved[name])

    # ----- the step -----------------------------------------------------------------------------------
    def shares(self) -> tuple[float, ...]:
        w = self.env.world_size
        return self.env.batch_shares or tuple(1.0 / w for _ in range(w))

    def set_accumulation(self, k: int) -> None:
        """Hand out each step's batch in ``k`` micro-batches from the next step on."""
        self.accumulation = k
        if k > 1 and self.parallel is not None:
            self.parallel.ensure_param_hooks()

    @property
    def accumulating(self) -> bool:
        """Whether the micro-batch being handed out is not the step's last (its optimiser step is due later)."""
        return self.micro_index < len(self.micro_counts) - 1

    def begin_micro(self, index: int) -> None:
        """Called by the loader as it hands out micro-batch ``index`` of the step."""
        self.micro_index = index
        if self.parallel is not None:
            self.parallel.begin_micro(index == len(self.micro_counts) - 1)

    def begin_step(self, take: int, counts: list[int], micro: list[int] | None = None) -> None:
        """Called by the loader as it hands out a step's batch (``micro``: this rank's micro-batch sizes)."""
        if not self.started:
            self.started = True
            self.reports.write("start", resumed_step=self.step, world_size=self.env.world_size,
                               batch_size=take if self.loader is None else self.loader.batch_size)
        self.step_take, self.step_counts = take, counts
        self.micro_counts = micro if micro is not None else [counts[self.env.rank] if counts else take]
        self.micro_index = 0
        if len(self.micro_counts) > 1 and self.parallel is not None:
            self.parallel.ensure_param_hooks()
        self._step_opt = self.optimizer_steps
        if self.parallel is not None:
            self.parallel.begin_step()
        self.step_start = time.monotonic()

    def gain(self) -> float:
        return 1.0 if self.gns is None else self.gns.gain(self.step_take or self.gns.init_batch)

    def record_loss(self, loss: torch.Tensor) -> None:
        """This micro-batch's (or step's) loss; a step's is the mean of its micro-batches' by their sizes."""
        self._losses[self.micro_index] = loss.detach()
        self._loss = self._step_loss()

    def _step_loss(self) -> torch.Tensor | None:
        if not self._losses:
            return None
        if len(self._losses) == 1:
            return next(iter(self._losses.values()))
        sizes = {j: float(self.micro_counts[j]) if j < len(self.micro_counts) else 1.0 for j in self._losses}
        total = sum(sizes.values())
        if total <= 0:
            return next(iter(self._losses.values()))
        out: torch.Tensor | None = None
        for j, value in self._losses.items():
            term = value.double() * (sizes[j] / total)
            out = term if out is None else out + term
        return out

    def smoothed_loss(self) -> float | None:
        if self.loss_ema is not None:
            return self.loss_ema
        return None if self._loss is None else float(self._loss)

    def current_batch_size(self) -> int:
        if self.step_start is not None:
            return self.step_take
        if self.loader is None:
            raise RuntimeError("dt.batch_size() needs a dlsched.train.DataLoader")
        return self.loader.batch_size

    def current_local_batch_size(self) -> int:
        if self.step_start is not None and self.step_counts:
            return self.step_counts[self.env.rank]
        if self.loader is None:
            raise RuntimeError("dt.local_batch_size() needs a dlsched.train.DataLoader")
        return split_counts(self.loader.batch_size, self.shares())[self.env.rank]

    def end_step(self) -> None:
        """The step boundary (see the module's docstring); may end the process on a stop request."""
        if self.step_start is None:
            return
        step_s = time.monotonic() - self.step_start
        self.step_start = None
        if self.loader is not None:
            self.loader.advance(self.step_take)
        self.step += 1
        self.samples_seen += self.step_take
        stats = self.parallel.step_stats() if self.parallel is not None else StepStats()
        mine = self.step_counts[self.env.rank] if self.step_counts else 0
        loss = None if self._loss is None or mine == 0 else float(self._loss)  # no samples: no loss (NaN)
        self._loss = None
        self._losses = {}
        if loss is None or not math.isfinite(loss):
            loss, mine = 0.0, 0
        t_sync = time.monotonic()
        exchange, self._exchange = self._exchange, None
        if exchange is not None:  # launched by the last gradient bucket: this step's loss goes with the next
            work, packed = exchange
            if work is not None:
                work.wait()
            vec = [float(v) for v in packed.tolist()]
            self._carry = (loss * mine, float(mine))
        else:
            stop, batch = self._flags()
            vec = [1.0 if stop else 0.0, float(batch), stats.local_sqr,
                   self._carry[0] + loss * mine, self._carry[1] + mine]
            self._carry = (0.0, 0.0)
            if self.env.world_size > 1:
                packed = torch.tensor(vec, dtype=torch.float64, device=self.comm_device)
                self.sent.all_reduce(packed)
                vec = packed.tolist()
        sync_s = stats.sync_s + time.monotonic() - t_sync
        self._update_gns(stats, vec[2])
        self._fold_loss(vec[3], vec[4])
        self._prev_take = self.step_take
        self.micro_counts, self.micro_index = [], 0
        self._window.add(self.step, step_s, sync_s, max(self.step_counts, default=0),
                         None if self.loader is None else self.loader.batch_size)
        if vec[1] > 0 and self.loader is not None:
            self.loader.set_batch_size(int(round(vec[1])))
        if vec[0] > 0:
            self._stop()
        now = time.monotonic()
        if now - self._last_report >= self.env.report_s:
            self.flush_progress()
        if self.checkpoint_dir is not None and self.env.rank == 0 and (
                now - self._last_checkpoint >= self.env.checkpoint_s
                or (self.checkpoint_steps is not None and self.step % self.checkpoint_steps == 0)):
            self.save_checkpoint()

    def _flags(self) -> tuple[bool, int]:
        """This rank's stop flag (SIGTERM, or ``control.json`` on rank 0) and rank 0's requested batch."""
        stop, batch = self.signal.raised, 0
        ctl = self.control.poll()
        if ctl is not None:
            stop = stop or ctl.stop
            batch = ctl.batch_size or 0
        return stop, batch

    def launch_exchange(self, local_sqr: torch.Tensor) -> None:
        """Start the step's small all-reduce as the last gradient bucket starts its own (several ranks).

        Launched here rather than at the step boundary, it travels behind the gradients instead of adding a
        round trip of its own to every step. The loss is not known yet, so each step's loss goes with the
        next step's exchange (``_carry``); the stop flag and batch request are those seen by now.
        """
        if self.env.world_size <= 1 or self._exchange is not None:
            return
        stop, batch = self._flags()
        packed = torch.tensor([1.0 if stop else 0.0, float(batch), 0.0, self._carry[0], self._carry[1]],
                              dtype=torch.float64, device=self.comm_device)
        packed[2] = local_sqr.to(self.comm_device)
        work = self.sent.all_reduce(packed, async_op=True)
        assert work is not None
        self._exchange = (work, packed)

    def exchange_values(self, local_sqr: torch.Tensor, dtype: torch.dtype,
                        device: torch.device) -> torch.Tensor | None:
        """The step's small exchange as values to append to the last gradient bucket (several ranks; None
        if it already went), so it costs not even a collective of its own; ``exchange_reduced`` takes the
        reduced values back."""
        if self.env.world_size <= 1 or self._exchange is not None:
            return None
        stop, batch = self._flags()
        values = torch.tensor([1.0 if stop else 0.0, float(batch), 0.0, self._carry[0], self._carry[1]],
                              dtype=dtype, device=device)
        values[2] = local_sqr.to(device=device, dtype=dtype)
        self._exchange = (None, values)
        return values

    def exchange_reduced(self, values: torch.Tensor) -> None:
        self._exchange = (None, values)

    def _fold_loss(self, loss_sum: float, samples: float) -> None:
        if samples > 0:
            self.last_loss = loss_sum / samples
            self.loss_ema = self.last_loss if self.loss_ema is None else (
                LOSS_SMOOTHING * self.loss_ema + (1 - LOSS_SMOOTHING) * self.last_loss)

    def _flush_carry(self) -> None:
        """Share the last step's loss, which no next step will carry (all ranks, at a stop or the end)."""
        if self.env.world_size > 1 and dist.is_initialized():
            packed = torch.tensor(self._carry, dtype=torch.float64, device=self.comm_device)
            self.sent.all_reduce(packed)
            self._fold_loss(*packed.tolist())
        self._carry = (0.0, 0.0)

    def _update_gns(self, stats: StepStats, local_sqr_sum: float) -> None:
        if self.gns is None or not stats.measured or not stats.valid:
            return
        w = self.env.world_size
        counts = self.step_counts or [self.step_take]
        if stats.pieces:
            k = len(self.micro_counts)
            pieces = [m for c in counts for m in micro_split(c, k)]
            est = estimate_from_pieces(local_sqr_sum, pieces, stats.global_sqr if w > 1 else stats.cur_sqr)
        elif w > 1:
            est = estimate_from_pieces(local_sqr_sum, counts, stats.global_sqr)
        elif stats.pair_valid and self._prev_take is not None:
            est = estimate_from_steps(stats.prev_sqr, stats.cur_sqr, stats.dot, self._prev_take, self.step_take)
        else:
            est = None
        # an overflowed mixed-precision step (skipped by its scaler) has non-finite norms and adds nothing
        if est is not None and all(math.isfinite(v) for v in est):
            self.gns.update(*est, scale=self.step_take / self.gns.init_batch)

    def close_open_step(self) -> None:
        """End a step whose batch was handed out and stepped on but whose loop was left (``break``)."""
        if self.step_start is None:
            return
        # stepped on, or its gradients exchanged (a GradScaler skips the step of an overflow: still a step)
        if self.optimizer_steps > self._step_opt or (self.parallel is not None and self.parallel.exchanged()):
            self.end_step()
        else:
            self.step_start = None

    # ----- reports and checkpoints --------------------------------------------------------------------
    def progress(self) -> float | None:
        if self.total_epochs is None or self.loader is None or self.total_epochs <= 0:
            return None
        return min(1.0, self.samples_seen / (self.total_epochs * self.loader.dataset_size))

    def flush_progress(self) -> None:
        """Write a ``progress`` report for the steps since the last one (rank 0; nothing if none)."""
        window, self._window = self._window, _Window()
        self._last_report = time.monotonic()
        if window.first_step is None or self.env.rank != 0:
            return
        gns = self.gns
        self.reports.write(
            "progress", first_step=window.first_step, last_step=self.step, samples_seen=self.samples_seen,
            epoch=None if self.loader is None else self.loader.epoch,
            batch_size=window.batch_size, local_bsz=window.local_bsz, world_size=self.env.world_size,
            step_time_s=sum(window.step_times) / len(window.step_times),
            sync_time_s=sum(window.sync_times) / len(window.sync_times),
            grad_sqr=None if gns is None else gns.grad_sqr, grad_var=None if gns is None else gns.grad_var,
            progress=self.progress(), loss=self.last_loss, lr=self.lr, gpu_type=self.env.gpu_type)

    def checkpoint_blob(self) -> dict[str, Any]:
        return {
            "step": self.step, "samples_seen": self.samples_seen, "loss_ema": self.loss_ema,
            "world_size": self.env.world_size,
            "parallel": None if self.parallel is None else self.parallel.checkpoint_state(),
            "loader": None if self.loader is None else self.loader.state_dict(),
            "gns": None if self.gns is None else self.gns.state_dict(),
            "user": {name: obj.state_dict() for name, obj in self.states.items()},
        }

    def save_checkpoint(self) -> Path | None:
        """Rank 0 writes the checkpoint of the current step (once per step) and reports it."""
        self._last_checkpoint = time.monotonic()
        if self.checkpoint_dir is None or self.env.rank != 0:
            return None
        if self._last_saved_step == self.step:
            return ckpt.checkpoint_file(self.checkpoint_dir, self.step)
        if superseded(self.env.job_dir, self.env.incarnation):  # a newer incarnation owns the checkpoints
            return None
        t0 = time.monotonic()
        path = ckpt.save(self.checkpoint_dir, self.step, self.checkpoint_blob())
        self._last_saved_step = self.step
        # how long the training loop stood still for it (what a stepping-time account subtracts)
        self.reports.write("checkpoint", step=self.step, path=str(path), seconds=time.monotonic() - t0)
        return path

    def _barrier(self) -> None:
        if self.env.world_size > 1 and dist.is_initialized():
            dist.barrier()

    def _stop(self) -> NoReturn:
        """All ranks agreed to stop: rank 0 checkpoints and reports ``stopped``; everyone exits 0."""
        self._flush_carry()
        self.flush_progress()
        self.save_checkpoint()
        self.reports.write("stopped", step=self.step)
        self._barrier()
        if dist.is_initialized():
            dist.destroy_process_group()
        self._stopping = True
        sys.exit(0)

    def _exit_after_stop(self) -> None:
        """After a stop, leave without the C++ teardown of the communication threads; after the end, leave the
        process group before that teardown.

        The user's ``finally`` blocks and exit handlers have run by now; what is left is the process group's
        static teardown, which at times aborts ("terminate called without an active exception") when a peer
        has already gone, turning a clean stop into a crash in the logs.
        """
        if self._stopping:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        if dist.is_initialized() and (self.finished or dist.get_backend() == "gloo"):
            # the process group is left while Python still runs, once gloo's workers have let go of this
            # library's tensors: a worker's late drop during finalization aborts the process (-6), so that a
            # job that completed (whether or not it called finish()) would read as one that crashed (see
            # collectives.py). Leaving gloo's group sends nothing; NCCL's is left only after finish(), when
            # no collective can be waiting on a dead peer.
            self._exchange = None  # its tensor may be a view of the last bucket's: it would hold that one
            self.sent.leave_group()

    def finish(self) -> None:
        """Training is complete: final progress, checkpoint and ``done`` (once)."""
        if self.finished:
            return
        self.close_open_step()
        self.finished = True
        self._flush_carry()
        self.flush_progress()
        self.save_checkpoint()
        self.reports.write("done", step=self.step)
        self._barrier()

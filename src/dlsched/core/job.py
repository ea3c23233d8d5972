"""Job specifications (what a user submits) and live job state (what the engine tracks).

A :class:`JobSpec` is immutable input. Which kind of work it describes depends on the trace:

* adaptive models from the Sia/Pollux profiles (``bert``, ``cifar10``, ...): the job trains until its model
  reaches its statistical-epoch target; ``duration_s`` and ``iterations`` are unset;
* iteration-count traces (PAL/Blox): ``iterations`` is the total iteration count;
* duration traces (Philly, Gavel, Tiresias): ``duration_s`` is the run time on the requested GPUs of the
  reference GPU type (``reference_gpu``).

The user-visible request (``num_gpus``, ``batch_size``) is a starting point for adaptive jobs and a hard
requirement for rigid ones.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from dlsched.core.placement import Placement


class Adaptivity(enum.StrEnum):
    """How much freedom a job gives the scheduler (Sia, section 3.3.4)."""

    #: GPU type, GPU count and batch size may all change.
    ADAPTIVE = "adaptive"
    #: GPU type and count may change; the global batch size is fixed.
    STRONG_SCALING = "strong-scaling"
    #: Only the GPU type may change; count and batch size are fixed.
    RIGID = "rigid"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One submitted training job."""

    job_id: str
    submit_time_s: float
    model: str
    num_gpus: int
    batch_size: int | None = None
    min_gpus: int = 1
    max_gpus: int | None = None
    adaptivity: Adaptivity = Adaptivity.RIGID
    deadline_s: float | None = None
    user: str = "default"
    duration_s: float | None = None
    iterations: float | None = None
    reference_gpu: str = "v100"
    #: GPU types the user accepts (Hops requirement sets); empty means any.
    gpu_types: tuple[str, ...] = ()
    #: Scale-out unit for hybrid-parallel jobs: GPU counts must be multiples of this.
    gpu_unit: int = 1
    priority: float = 1.0
    #: The GPU counts the user accepts (Hops's user-selectable requirements, ascending); empty: the range
    #: ``min_gpus..max_gpus`` for elastic jobs, ``num_gpus`` for rigid ones.
    gpu_counts: tuple[int, ...] = ()
    #: Fixed per-GPU batch mode: ``batch_size`` is per GPU and the global batch grows with the count.
    per_gpu_batch: bool = False
    #: Learning rates the user gives per GPU count, ``((count, rate), ...)`` ascending by count (Hops: one per
    #: requirement, or one for a single requirement and a scaling rule for the rest); empty: none given.
    learning_rates: tuple[tuple[int, float], ...] = ()
    #: How a count without a rate of its own gets one (:data:`LR_SCALING_RULES`; see :meth:`learning_rate`).
    lr_scaling: str = "linear"
    #: Where the job came from (``file:line``), so later errors can name the input line.
    origin: str | None = None

    @property
    def upper_gpus(self) -> int:
        """Largest GPU count the job may be given."""
        if self.adaptivity is Adaptivity.RIGID:
            return self.num_gpus
        if self.gpu_counts:
            return max(self.gpu_counts)
        return self.max_gpus if self.max_gpus is not None else max(self.num_gpus, 64)

    @property
    def lower_gpus(self) -> int:
        """Smallest GPU count the job may be given."""
        if self.adaptivity is Adaptivity.RIGID:
            return self.num_gpus
        if self.gpu_counts:
            return min(self.gpu_counts)
        return self.min_gpus

    def allows_gpu_count(self, k: int) -> bool:
        if self.gpu_counts and self.adaptivity is not Adaptivity.RIGID:
            return k in self.gpu_counts
        return self.lower_gpus <= k <= self.upper_gpus and k % self.gpu_unit == 0

    def requirement_set(self) -> tuple[int, ...]:
        """Every GPU count the job accepts, ascending (Hops's requirement set ``R``)."""
        if self.adaptivity is Adaptivity.RIGID:
            return (self.num_gpus,)
        if self.gpu_counts:
            return self.gpu_counts
        return tuple(k for k in range(self.lower_gpus, self.upper_gpus + 1) if k % self.gpu_unit == 0)

    def allows_gpu_type(self, gtype: str) -> bool:
        return not self.gpu_types or gtype in self.gpu_types

    def learning_rate(self, k: int) -> float | None:
        """The learning rate to train at on ``k`` GPUs (None: the job gives none, its trainer decides).

        A count the user gave a rate for trains at it; another takes the rate of the nearest given count
        below it (else the smallest given) scaled by ``lr_scaling``: ``k / k0`` or ``sqrt(k / k0)``. With
        a fixed per-GPU batch the global batch grows with the count, which is what the rules scale for.
        """
        if not self.learning_rates:
            return None
        given = dict(self.learning_rates)
        if k in given:
            return given[k]
        below = [c for c in given if c <= k]
        k0 = max(below) if below else min(given)
        ratio = k / k0
        return given[k0] * (ratio if self.lr_scaling == "linear" else math.sqrt(ratio))


#: Rules that give a GPU count without a rate of its own one from a rate the user gave (Hops section 2.2):
#: ``linear`` scales the rate with the count (Goyal et al.), ``sqrt`` with its square root (Krizhevsky).
LR_SCALING_RULES = ("linear", "sqrt")


class JobStatus(enum.StrEnum):
    PENDING = "pending"      # submitted, not yet admitted (arrival lies in the future)
    QUEUED = "queued"        # active, holding no GPUs
    PROFILING = "profiling"  # being profiled on one small configuration per GPU type
    RESTARTING = "restarting"  # holding GPUs, paying checkpoint-restore delay
    RUNNING = "running"
    COMPLETED = "completed"


@dataclass(slots=True)
class Job:
    """Live state of one job as the engine tracks it. Policies never see this object, only a JobView."""

    spec: JobSpec
    status: JobStatus = JobStatus.PENDING
    placement: Placement = field(default_factory=Placement.empty)
    batch_size: int | None = None
    gpu_share: float = 1.0
    #: Per-worker share restriction (MPS %) and batch split when packed (see core.decision.Allocation).
    mps_pct: tuple[int, ...] = ()
    batch_split: tuple[float, ...] = ()
    start_time_s: float | None = None
    finish_time_s: float | None = None
    #: Statistical progress in the world's work units (hidden from policies; they see ``progress_fraction``).
    progress: float = 0.0
    attained_gpu_s: float = 0.0
    attained_service_s: float = 0.0
    wait_s: float = 0.0
    restarts: int = 0
    #: Of ``restarts``, the moves: a new placement with the same GPU type and per-node GPU counts as the one
    #: before it, on other GPUs. Sia's artifact does not count these as restarts (docs/fidelity.md).
    moves: int = 0
    restart_until_s: float = 0.0
    #: GPU-seconds spent in checkpoint-restore (charged, but no progress).
    restart_gpu_s: float = 0.0
    last_gpu_type: str | None = None
    #: GPU types the job has been profiled on, and when its profiling ends.
    profiled_types: tuple[str, ...] = ()
    profiling_until_s: float = 0.0
    #: The GPUs the job's profile holds until ``profiling_until_s`` (a profile may outlast the round that
    #: started it; no other job may use these GPUs until it ends). Empty when no profile is running.
    profile_placement: Placement = field(default_factory=Placement.empty)
    #: GPU-seconds per GPU type, for the allocation timeline and per-type accounting.
    gpu_s_by_type: dict[str, float] = field(default_factory=dict)

    @property
    def job_id(self) -> str:
        return self.spec.job_id

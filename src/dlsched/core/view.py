"""What a scheduler may see: a snapshot of the cluster and the jobs, never the world's truth.

A real scheduler knows each job's request, how long it has waited and run, where it runs, and what the job
itself reports (throughput of its current placement, gradient statistics, the fraction of its training done).
It does not know a job's true speed on placements it has not tried, nor per-GPU speeds beyond what offline
profiling measured; the simulator hands those measurements over as ``gpu_scores``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dlsched.core.cluster import Cluster
from dlsched.core.job import JobSpec, JobStatus
from dlsched.core.placement import Placement
from dlsched.core.quota import Quotas


def waiting_queue_wait_s(t: float, entry_s: float | None, service_s: float,
                         service_at_entry_s: float) -> float | None:
    """Seconds waited in the waiting queue by time ``t``: from the job's entry into it (the end of its first
    profile, Hops section 3.1) less the service it attained since (running, restoring, further profiles).

    None before the job entered it. The simulator, ``dlsched run`` and the service all count it here, so
    that a latency ratio means the same thing in each."""
    if entry_s is None or t < entry_s:
        return None
    return max(0.0, t - entry_s - (service_s - service_at_entry_s))


@dataclass(frozen=True, slots=True)
class ThroughputObservation:
    """A job's report of how fast it ran on its placement (the inputs of a throughput model)."""

    time_s: float
    gpu_type: str
    num_nodes: int
    num_gpus: int
    local_bsz: int
    accum_steps: int
    step_time_s: float
    sync_time_s: float
    #: Where the job ran: (node id, GPUs) per server, node ids ascending; empty if the job does not say.
    servers: tuple[tuple[int, int], ...] = ()
    #: Time components of one iteration its profiler plugin measured (seconds; Hops section 3.2), as (name,
    #: value) pairs: ``T_f``, ``T_b``, ``T_u``, ``T_c`` and the model's parameter count ``params``.
    components: tuple[tuple[str, float], ...] = ()
    #: Data-loading times per iteration the plugin recorded (seconds; any number of samples, from any server).
    data_load_s: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class GradientObservation:
    """Gradient statistics a job reports (squared norm of the mean gradient, noise variance)."""

    time_s: float
    batch_size: int
    grad_sqr: float
    grad_var: float


@dataclass(slots=True)
class JobView:
    """Read-only facts about one active job."""

    spec: JobSpec
    status: JobStatus
    placement: Placement
    batch_size: int | None
    age_s: float
    #: Seconds not served since submission (waiting for a profile included).
    wait_s: float
    attained_gpu_s: float
    attained_service_s: float
    restarts: int
    #: Fraction of its training the job reports as done (epochs or iterations done over the target).
    progress_fraction: float
    start_time_s: float | None
    #: The user's estimate of the job's run time on its request (what SJF/SRTF rank by); None if unknown.
    estimated_duration_s: float | None = None
    throughput_obs: list[ThroughputObservation] = field(default_factory=list)
    gradient_obs: list[GradientObservation] = field(default_factory=list)
    #: GPU types the job was profiled on (empty until profiled), and whether profiling is still running.
    profiled_types: tuple[str, ...] = ()
    profiling: bool = False
    #: The GPUs an unfinished profile holds (a profile may outlast the round that started it): no job may
    #: be placed on them, as a real cluster's scheduler sees them taken. Empty when no profile is running.
    profile_placement: Placement = field(default_factory=Placement.empty)
    #: Batch-size range the user declared for an adaptive job: (initial batch size, maximum batch size).
    #: Statistical efficiency is reported relative to the initial batch size. None for other jobs.
    batch_limits: tuple[int, int] | None = None
    #: Seconds waited in the waiting queue, which a job enters when its first profile ends (Hops section 3.1);
    #: None when it has not entered it or the scheduler does not tell the queues apart (then ``wait_s``).
    queue_wait_s: float | None = None
    #: The start-up (process start to first step) the runtime measured for this job's last incarnation: what
    #: a restart costs it. None where nothing measured it (the simulator's jobs report no start-up; the
    #: policies then use their own assumption).
    measured_startup_s: float | None = None

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def is_running(self) -> bool:
        return bool(self.placement)

    def remaining_estimate_s(self) -> float | None:
        """The duration estimate scaled by the progress the job reports (SRTF's view of the job)."""
        if self.estimated_duration_s is None:
            return None
        return self.estimated_duration_s * max(0.0, 1.0 - self.progress_fraction)


@dataclass(slots=True)
class ClusterView:
    """The snapshot handed to a scheduler at the start of a round."""

    time_s: float
    round_s: float
    cluster: Cluster
    jobs: list[JobView]
    #: Measured per-GPU slowdown (PM-score) by application class, from offline profiling; None if unknown.
    gpu_scores: Mapping[str, np.ndarray] | None = None
    #: Application class of each model, as the profiling service labels it.
    model_class: Mapping[str, str] = field(default_factory=dict)
    #: Per-user and per-team GPU quotas the ``quota`` admission stage enforces; None: no quotas.
    quotas: Quotas | None = None

    def job(self, job_id: str) -> JobView:
        for j in self.jobs:
            if j.job_id == job_id:
                return j
        raise KeyError(job_id)

    def busy_gpus(self) -> np.ndarray:
        """Boolean mask of GPUs held by some job at the start of the round (running or being profiled)."""
        mask = np.zeros(self.cluster.num_gpus, dtype=bool)
        for j in self.jobs:
            if j.placement:
                mask[list(j.placement.gpus)] = True
            if j.profile_placement:
                mask[list(j.profile_placement.gpus)] = True
        return mask

    def profiling_gpus(self) -> np.ndarray | None:
        """Boolean mask of GPUs held by profiles still running at the start of the round; None if none are.

        Those GPUs are out of every policy's reach this round: the pipeline reserves them for placement,
        and allocation stages that count capacity subtract :meth:`profiling_gpus_by_type`."""
        held = [g for j in self.jobs if j.profile_placement for g in j.profile_placement.gpus]
        if not held:
            return None
        mask = np.zeros(self.cluster.num_gpus, dtype=bool)
        mask[held] = True
        return mask

    def profiling_gpus_by_type(self) -> dict[str, int]:
        """GPU type -> GPUs held by profiles still running (types without any are left out)."""
        out: dict[str, int] = {}
        type_of = self.cluster.gpu_type_of
        for j in self.jobs:
            for g in j.profile_placement.gpus:
                out[type_of[g]] = out.get(type_of[g], 0) + 1
        return out

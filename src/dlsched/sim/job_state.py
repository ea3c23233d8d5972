"""What the engine keeps about each job beside the live :class:`~dlsched.core.Job`: its physics, its current
rate and configuration, the observations not yet handed to the scheduler, and a few accounts.

Its own module so that the parts of the engine that read it (the job records, :mod:`dlsched.sim.job_records`)
need not import the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.core import Configuration, GradientObservation, Job, ThroughputObservation
from dlsched.core.view import waiting_queue_wait_s
from dlsched.world.base import JobPhysics, Rate


@dataclass
class JobState:
    """Engine-side bookkeeping next to the live :class:`Job`."""

    job: Job
    phys: JobPhysics
    rate: Rate | None = None
    rate_key: tuple | None = None
    segment_start_s: float = 0.0
    new_tput: list[ThroughputObservation] = field(default_factory=list)
    new_grad: list[GradientObservation] = field(default_factory=list)
    batch_limits: tuple[int, int] | None = None
    config: Configuration | None = None
    config_key: tuple[int, ...] | None = None
    #: Consecutive rounds the job held GPUs at a rate of zero (or not finite): see :meth:`dlsched.sim.engine.Engine._check_progress`.
    stuck_rounds: int = 0
    #: Seconds the job spent being profiled (finish-time fairness's ``started`` isolated time charges them).
    profile_s: float = 0.0
    #: GPU-seconds on GPUs another job held too (packing): utilisation counts a shared GPU once.
    shared_gpu_s: float = 0.0
    #: Place in submission order (the order the active set iterates in).
    order: int = 0
    #: When the job entered the waiting queue: the end of its first profile (Hops section 3.1); None for a
    #: job never profiled, which waits from its submission.
    queue_entry_s: float | None = None
    #: The job's attained service at that moment (its profile included): service after it is not waiting.
    service_at_entry_s: float = 0.0

    def queue_wait_at(self, t: float) -> float | None:
        """Seconds waited in the waiting queue by time ``t``: from the entry, less the service attained since
        (running, restoring, further profiles). None before the job entered it."""
        return waiting_queue_wait_s(t, self.queue_entry_s, self.job.attained_service_s, self.service_at_entry_s)

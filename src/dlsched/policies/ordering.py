"""Ordering stages: the priority order of active jobs.

All orderings break ties by submit time and then job id, so a run is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dlsched.core import ClusterView, JobView
from dlsched.core.ranges import fmt_value, ranged


def _fifo_key(j: JobView) -> tuple[float, str]:
    return (j.spec.submit_time_s, j.job_id)


def _estimated_total_s(j: JobView) -> float:
    """A job's expected run time as a scheduler can know it: the user's estimate, else extrapolation."""
    if j.estimated_duration_s is not None:
        return j.estimated_duration_s
    if j.progress_fraction > 0 and j.attained_service_s > 0:
        return j.attained_service_s / j.progress_fraction
    return math.inf


@dataclass
class Fifo:
    """First in, first out by submit time."""

    name: str = "fifo"

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
        return sorted(jobs, key=_fifo_key)


@dataclass
class Sjf:
    """Shortest job first, by the job's expected total run time (unknown ones last, FIFO among them)."""

    name: str = "sjf"

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
        return sorted(jobs, key=lambda j: (_estimated_total_s(j), *_fifo_key(j)))


@dataclass
class Srtf:
    """Shortest remaining time first: expected run time times the fraction of work the job has left."""

    name: str = "srtf"

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
        def remaining(j: JobView) -> float:
            total = _estimated_total_s(j)
            return total * max(0.0, 1.0 - j.progress_fraction) if math.isfinite(total) else math.inf

        return sorted(jobs, key=lambda j: (remaining(j), *_fifo_key(j)))


@dataclass
class Las:
    """Least attained service: fewest GPU-seconds received so far first (Tiresias without queues)."""

    name: str = "las"

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
        return sorted(jobs, key=lambda j: (j.attained_gpu_s, *_fifo_key(j)))


@dataclass
class Tiresias2DLas:
    """Tiresias's discretised two-dimensional LAS.

    Jobs sit in priority queues by attained GPU-seconds (the two dimensions: GPUs x time); queue 0 holds
    jobs below the first limit. Within a queue jobs run FIFO, so a job is not preempted by every newcomer
    the way plain LAS preempts. A job that has waited longer than ``starvation_factor`` times its last
    run time is promoted back to queue 0 (Tiresias's starvation guard); 0 disables promotion.
    """

    #: Attained GPU-seconds at which a job moves down a queue; strictly increasing (empty: one queue).
    queue_limits_gpu_s: tuple[float, ...] = ranged((3600.0, 36000.0), 0.0, 1e12, lo_open=True)
    #: Waiting longer than this many times the last run time promotes a job to queue 0 (0: never).
    starvation_factor: float = ranged(0.0, 0.0, 1e6)
    name: str = "tiresias-2dlas"

    def __post_init__(self) -> None:
        limits = self.queue_limits_gpu_s
        if any(b <= a for a, b in zip(limits, limits[1:], strict=False)):
            raise ValueError(f"queue_limits_gpu_s must be strictly increasing (each queue starts past the "
                             f"last), got {fmt_value(limits)}")

    def queue_of(self, j: JobView) -> int:
        q = sum(1 for limit in self.queue_limits_gpu_s if j.attained_gpu_s >= limit)
        if self.starvation_factor > 0 and not j.is_running and j.attained_service_s > 0 \
                and j.wait_s > self.starvation_factor * j.attained_service_s:
            return 0
        return q

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
        return sorted(jobs, key=lambda j: (self.queue_of(j), *_fifo_key(j)))

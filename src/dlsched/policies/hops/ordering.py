"""Hops's priority queues: the latency ratio (section 3.6, equations 8 and 9) and finish-time fairness
(section 4.4).

A job's priority is its waiting time over its expected running time without waiting, ``wait / age``:
short jobs tolerate less waiting than long ones, so a 10-minute wait lifts a 10-minute job far above a
10-hour one. The expected running time is equation 9, an expectation over GPU types rather than the best
type's time, because a job may land on any type:

    age = sum_j P(type j) * total_samples / (throughput_j * R_avg)

with ``P(type j)`` the type's share of the cluster's GPUs (among the types the job accepts), ``R_avg`` the
mean of the job's requirement set and ``throughput_j`` its per-GPU throughput on type ``j``. What a
scheduler knows of these: the user's run-time estimate on the request (``estimated_duration_s``, on the
trace's reference type), and per-type throughputs from the job's own reports (profiling, runs). A type
the job has not reported on is taken at the mean of those it has (no reports at all: every type alike),
so ``total_samples / throughput_j`` is the estimate scaled by the reference type's speed over type j's.

Finish-time fairness (section 4.4, Themis's rho) is the alternative priority the paper names: ``rho =
T_sh / T_id``, the job's time in the shared cluster over its time alone on ``1/N`` of the cluster, ``N``
the jobs in the cluster. As a priority it is projected from what the scheduler knows: ``T_sh`` = time since
submission plus the expected remaining running time (eq. 9's time times the work left), ``T_id`` = eq. 9's
time, stretched by ``R_avg / (G / N)`` when the job's mean requirement exceeds its ``1/N`` share of the
``G`` GPUs. A job treated unfairly rises, one favoured sinks.

Priorities are refreshed every ``refresh_s`` (30 s in the paper); between refreshes a job keeps the
priority it had, and a job seen for the first time gets one at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from dlsched.core import ClusterView, JobView
from dlsched.core.ranges import ranged


def _per_gpu_rates(job: JobView) -> dict[str, float]:
    """Work per second per GPU on each type the job reported on (its latest report there)."""
    out: dict[str, float] = {}
    for ob in job.throughput_obs:
        if ob.step_time_s > 0 and ob.num_gpus > 0:
            per_step = float(ob.local_bsz * ob.accum_steps) if ob.local_bsz > 0 else 1.0
            out[ob.gpu_type] = per_step / ob.step_time_s / (ob.num_gpus if ob.local_bsz <= 0 else 1)
    return out


def expected_runtime_s(view: ClusterView, job: JobView) -> float:
    """Equation 9: the job's expected running time without waiting, over the types it may get."""
    spec = job.spec
    duration = job.estimated_duration_s
    if duration is None:
        if job.progress_fraction > 0 and job.attained_service_s > 0:
            duration = job.attained_service_s / job.progress_fraction
        else:
            return math.inf
    types = [t for t in view.cluster.type_names if spec.allows_gpu_type(t)]
    if not types:
        return math.inf
    rates = _per_gpu_rates(job)
    known = [rates[t] for t in types if t in rates]
    fallback = sum(known) / len(known) if known else 1.0
    ref = rates.get(spec.reference_gpu, fallback)
    counts = spec.requirement_set()
    r_avg = sum(counts) / len(counts)
    total = sum(view.cluster.gpus_per_type[t] for t in types)
    age = 0.0
    for t in types:
        p = view.cluster.gpus_per_type[t] / total
        age += p * duration * (ref / rates.get(t, fallback)) * spec.num_gpus / r_avg
    return age


def latency_ratio(view: ClusterView, job: JobView) -> float:
    """Equation 8: waiting time over expected running time (0 for a job with no estimate). The wait is the one
    in the waiting queue (section 3.1) where the view has it, else the wait since submission."""
    age = expected_runtime_s(view, job)
    if not math.isfinite(age) or age <= 0:
        return 0.0
    return (job.wait_s if job.queue_wait_s is None else job.queue_wait_s) / age


def projected_ftf(view: ClusterView, job: JobView) -> float:
    """Section 4.4's rho, projected: (time since submission + expected remaining time) over the time alone on
    ``1/N`` of the cluster (0 for a job with no estimate)."""
    age = expected_runtime_s(view, job)
    if not math.isfinite(age) or age <= 0:
        return 0.0
    counts = job.spec.requirement_set()
    r_avg = sum(counts) / len(counts)
    share = view.cluster.num_gpus / max(1, len(view.jobs))
    isolated = age * max(1.0, r_avg / share)
    shared = max(0.0, view.time_s - job.spec.submit_time_s) + age * max(0.0, 1.0 - job.progress_fraction)
    return shared / isolated


#: The priorities Hops's queue can rank by, by ordering name (the planner weighs its ILP with the same).
PRIORITIES: dict[str, Callable[[ClusterView, JobView], float]] = {
    "latency-ratio": latency_ratio, "finish-time-fairness": projected_ftf}


@dataclass
class RefreshedPriority:
    """Highest priority first, priorities refreshed every ``refresh_s``; the priority is the ordering's
    entry in :data:`PRIORITIES`."""

    #: Seconds between priority refreshes (the paper: 30 s).
    refresh_s: float = ranged(30.0, 0.0, 86400.0)
    name: str = "latency-ratio"
    #: job id -> (time of the last refresh, priority then)
    _priority: dict[str, tuple[float, float]] = field(default_factory=dict, init=False, repr=False)

    def priority(self, view: ClusterView, job: JobView) -> float:
        """The job's priority at ``view.time_s``, recomputed when the last one is ``refresh_s`` old."""
        last = self._priority.get(job.job_id)
        if last is None or view.time_s - last[0] >= self.refresh_s:
            last = (view.time_s, PRIORITIES[self.name](view, job))
            self._priority[job.job_id] = last
        return last[1]

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
        active = {j.job_id for j in view.jobs}
        for k in [k for k in self._priority if k not in active]:
            del self._priority[k]
        return sorted(jobs, key=lambda j: (-self.priority(view, j), j.spec.submit_time_s, j.job_id))


@dataclass
class LatencyRatio(RefreshedPriority):
    """Highest latency ratio first (Hops eq. 8)."""

    name: str = "latency-ratio"


@dataclass
class FinishTimeFairness(RefreshedPriority):
    """Highest projected finish-time fairness ratio first (Hops section 4.4)."""

    name: str = "finish-time-fairness"

"""Round-based leases for rigid jobs, and the finish-time fairness a scheduler can estimate from observations.

Themis and Shockwave both decide once per round (360 s in the Sia thesis) which jobs hold their whole gang
for the round. :class:`LeaseAllocation` is that mechanism: at a lease's start it asks the subclass for the
jobs that run (:meth:`LeaseAllocation.decide`); inside a lease (an engine round shorter than the lease) the
holders keep their GPUs and a newcomer waits, as with Gavel's leases. Jobs are rigid: their requested GPU
count and batch size. Neither scheduler knows GPU types (both were built for homogeneous clusters), so
demands leave the type to placement.

Estimates. A job's remaining run time on its gang is the user's duration estimate scaled by the progress it
reports (extrapolated from its service so far when it has no estimate), as Gavel's stage takes it; its
service so far is what the engine reports. From these, :func:`job_estimates` gives finish-time fairness as
Themis defines it: ``rho = T_shared / T_id``, the time to finish in the shared cluster (age plus remaining
time) over the time in an isolated ``1/N`` share of the cluster (``N`` contending jobs): a gang larger than
``G / N`` GPUs runs ``g N / G`` times slower there.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dlsched.core import ClusterView, JobView
from dlsched.policies.gavel.allocation import GavelAllocation, rigid_batch
from dlsched.policies.stages import AllocationStage, AllocationTraits, Demand, Plan


@dataclass(frozen=True)
class JobEstimates:
    """Per job (arrays in the order of ``jobs``): gang size, age, remaining and total run time on the gang
    (seconds), and the isolated finish time ``T_id`` of a ``1/N`` share."""

    jobs: list[JobView]
    gpus: np.ndarray
    age_s: np.ndarray
    remaining_s: np.ndarray
    total_s: np.ndarray
    isolated_s: np.ndarray

    def rho(self, extra_wait_s: float = 0.0) -> np.ndarray:
        """Finish-time fairness if each job runs without a break after waiting ``extra_wait_s`` more."""
        return (self.age_s + extra_wait_s + self.remaining_s) / self.isolated_s


def job_estimates(jobs: list[JobView], capacity: int) -> JobEstimates:
    """What the scheduler knows of each job (observations and the user's estimate only)."""
    n = max(len(jobs), 1)
    gpus = np.array([j.spec.num_gpus for j in jobs], dtype=float)
    remaining = np.array([GavelAllocation._remaining_s(j) for j in jobs], dtype=float)
    served = np.array([max(0.0, j.attained_service_s) for j in jobs], dtype=float)
    total = served + remaining
    share = capacity / n
    isolated = total * np.maximum(1.0, gpus / max(share, 1e-9))
    age = np.array([max(0.0, j.age_s) for j in jobs], dtype=float)
    return JobEstimates(jobs, gpus, age, remaining, total, isolated)


@dataclass
class LeaseAllocation(AllocationStage):
    """Leases of ``lease_s`` seconds over rigid gangs; subclasses choose the holders at a lease's start.

    State: the current lease's start (``_lease_start``) and its holders in placement order (``_leases``).
    """

    lease_s: float = 360.0
    traits: ClassVar[AllocationTraits] = AllocationTraits(rigid=True, uses_order=False)

    def __post_init__(self) -> None:
        self._lease_start = -math.inf
        self._leases: list[str] = []

    @abstractmethod
    def decide(self, view: ClusterView, jobs: list[JobView], capacity: int, plan: Plan) -> list[str]:
        """The jobs that hold a lease this round, whose gangs together fit ``capacity`` GPUs."""

    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        active = {j.job_id: j for j in view.jobs}
        new_round = view.round_s >= self.lease_s - 1e-9 or view.time_s >= self._lease_start + self.lease_s - 1e-6
        plan = Plan()
        capacity = view.cluster.num_gpus
        if new_round:
            self._lease_start = view.time_s
            jobs = sorted((j for j in view.jobs if j.spec.num_gpus <= capacity),
                          key=lambda j: (j.spec.submit_time_s, j.job_id))
            chosen = self.decide(view, jobs, capacity, plan) if jobs else []
            # biggest gangs first, so the placement packs them before smaller ones fragment the nodes
            self._leases = sorted(chosen, key=lambda k: (-active[k].spec.num_gpus, active[k].spec.submit_time_s, k))
        else:
            self._leases = [k for k in self._leases if k in active]
        plan.demands = [Demand(job=active[k], num_gpus=active[k].spec.num_gpus, batch_size=rigid_batch(active[k]),
                               pinned=not new_round) for k in self._leases]
        return plan


def window_terms(est: JobEstimates, round_s: float, window_rounds: int
                 ) -> tuple[int, int, float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What a plan over a window of rounds reads from the estimates: jobs ``n``, rounds ``R``, horizon ``H``
    (seconds), each job's total run time, its progress so far, the progress one round adds, and the rounds it
    still needs."""
    n, R = len(est.jobs), window_rounds
    total = np.maximum(est.total_s, 1e-9)
    progress = np.clip(1.0 - est.remaining_s / total, 0.0, 1.0)
    rounds_needed = np.ceil(np.maximum(est.remaining_s, 0.0) / round_s - 1e-9)
    return n, R, R * round_s, total, progress, round_s / total, rounds_needed

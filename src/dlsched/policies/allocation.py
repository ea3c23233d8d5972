"""Allocation stages that decide how many GPUs each job gets (the baselines: rigid gangs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from dlsched.core import ClusterView, JobView
from dlsched.policies.stages import AllocationStage, AllocationTraits, Demand, Plan


@dataclass
class RigidGang(AllocationStage):
    """Every job gets exactly the GPUs it asked for, all at once, or none.

    Jobs are taken in priority order until their summed demand first exceeds the cluster (the "cut queue"
    of Blox and PAL); placement then places them in that order and skips any it cannot fit this round.
    With ``backfill`` the cut skips a job that does not fit and keeps looking for smaller ones behind it.
    """

    backfill: bool = False
    name: str = "gang"
    #: Jobs get exactly their request, so the engine rejects requests that can never fit.
    traits: ClassVar[AllocationTraits] = AllocationTraits(rigid=True)
    #: Where last round's cut fell: (GPUs taken by the jobs ahead of it, the cluster's GPUs), and the id of
    #: the job it fell at; for explanations (:meth:`facts_for`).
    _cut: tuple[int, int, str] | None = field(default=None, init=False, repr=False)
    _allocated: set[str] = field(default_factory=set, init=False, repr=False)

    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        capacity = view.cluster.num_gpus
        demands: list[Demand] = []
        used = 0
        self._cut = None
        for j in ordered:
            k = j.spec.num_gpus
            if used + k > capacity:
                if self._cut is None:
                    self._cut = (used, capacity, j.job_id)
                if self.backfill:
                    continue
                break
            used += k
            demands.append(Demand(job=j, num_gpus=k, batch_size=j.spec.batch_size))
        self._allocated = {d.job.job_id for d in demands}
        return Plan(demands)

    def facts_for(self, job_id: str) -> dict[str, object] | None:
        """Where the gang cut fell, for a job it left out."""
        if self._cut is None or job_id in self._allocated:
            return None
        used, capacity, at = self._cut
        return {"cut_used_gpus": used, "capacity": capacity, "cut_at": at,
                "why": f"behind the gang cut: the jobs ahead take {used} of {capacity} GPUs"
                       + (f" and {at} needs more than the {capacity - used} left" if at == job_id else
                          f", the cut fell at {at}")}

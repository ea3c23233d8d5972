"""Allocation stages that decide how many GPUs each job gets (the baselines: rigid gangs)."""

from __future__ import annotations

from dataclasses import dataclass
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

    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        capacity = view.cluster.num_gpus
        demands: list[Demand] = []
        used = 0
        for j in ordered:
            k = j.spec.num_gpus
            if used + k > capacity:
                if self.backfill:
                    continue
                break
            used += k
            demands.append(Demand(job=j, num_gpus=k, batch_size=j.spec.batch_size))
        return Plan(demands)

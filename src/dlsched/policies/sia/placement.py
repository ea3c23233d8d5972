"""Sia's placement stage: the Sia placer (:mod:`~dlsched.policies.sia.placer`) behind the stage contract.

Demands must name their GPU type (Sia's configurations do). Profiling requests are placed with the same
rules as jobs. A gang the placer cannot fit (pinned jobs fragmenting a type) gets the best of its demand's
fallback shapes that fits in the GPUs left over, moving nobody; otherwise it waits this round.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dlsched.core import ClusterView, Decision, Placement
from dlsched.policies.sia.placer import PlacementOutcome, PlacementRequest, SiaPlacer
from dlsched.policies.stages import Demand, PlacementStage, PlacementTraits, Plan

_PROFILE = "__profile__"


@dataclass
class SiaPlacement(PlacementStage):
    """Partial-node gangs on one node, whole-node gangs on whole nodes, unchanged jobs kept in place."""

    name: str = "sia"
    traits: ClassVar[PlacementTraits] = PlacementTraits(needs_gpu_type=True)

    def __post_init__(self) -> None:
        self.placer = SiaPlacer()

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        t0 = time.perf_counter()
        cluster = view.cluster
        requests = [PlacementRequest(key=d.job.job_id, gpu_type=str(d.gpu_type), num_gpus=d.num_gpus,
                                     current=d.job.placement, pinned=d.pinned) for d in plan.demands]
        for req in plan.profiles:
            for gtype, k in req.shapes:
                requests.append(PlacementRequest(key=(_PROFILE, req.job.job_id, gtype), gpu_type=gtype, num_gpus=k))
        outcome = self.placer.place(cluster, requests, plan.reserved)
        if outcome.unplaced:
            self._fall_back(view, plan, outcome)
        decision = Decision()
        for d in plan.demands:
            pl = outcome.placements.get(d.job.job_id)
            if pl is not None:
                decision.place(d.job.job_id, pl, d.batch_size)
        prof_gpus: dict[str, list[int]] = {}
        for key, pl in outcome.placements.items():
            if isinstance(key, tuple) and key[0] == _PROFILE:
                prof_gpus.setdefault(key[1], []).extend(pl.gpus)
        for jid, gpus in prof_gpus.items():
            decision.profiles[jid] = Placement.of(gpus)
        decision.info.update({"sia.evictions": float(len(outcome.evicted)),
                              "sia.unplaced": float(len(outcome.unplaced)),
                              "sia.place_s": time.perf_counter() - t0})
        return decision

    def _fall_back(self, view: ClusterView, plan: Plan, outcome: PlacementOutcome) -> None:
        cluster = view.cluster
        taken = np.zeros(cluster.num_gpus, dtype=bool) if plan.reserved is None else plan.reserved.copy()
        for pl in outcome.placements.values():
            taken[list(pl.gpus)] = True
        by_id: dict[Hashable, Demand] = {d.job.job_id: d for d in plan.demands}
        for key in list(outcome.unplaced):
            d = by_id.get(key)
            if d is None:
                continue
            for shape in d.fallbacks:
                fitted = self.placer.fit_free(cluster, str(shape.gpu_type), shape.num_gpus, taken)
                if fitted is not None:
                    taken[list(fitted.gpus)] = True
                    outcome.placements[key] = fitted
                    outcome.unplaced.remove(key)
                    break

"""A policy for tests that moves or resizes every job on every round: the worst a policy can do to a job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlsched.core import ClusterView, Decision, Placement
from dlsched.policies.stages import SchedulerTraits


class CyclingPolicy:
    """Each job steps through its cycle of placements (global GPU ids), one step a round."""

    traits = SchedulerTraits()

    def __init__(self, name: str, cycles: dict[str, Sequence[tuple[int, ...]]] | Sequence[tuple[int, ...]]) -> None:
        self.name = name
        self._cycles = cycles

    def schedule(self, view: ClusterView) -> Decision:
        decision = Decision()
        for jv in view.jobs:
            raw = self._cycles[jv.job_id] if isinstance(self._cycles, dict) else self._cycles
            cycle = [Placement.of(p) for p in raw]
            at = cycle.index(jv.placement) if jv.placement in cycle else -1
            decision.place(jv.job_id, cycle[(at + 1) % len(cycle)])
        return decision

    def attach_oracle(self, estimator: Any) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name}: moves or resizes every job every round"

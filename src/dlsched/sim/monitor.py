"""The runtime monitor a coordinator such as Gimbal measures trial plans with, answered from the world.

On a real cluster Gimbal applies a plan (share limits per worker) and reads each worker's speed from the
running jobs (section 5.2). In the simulator the world knows those speeds; this adapter answers from it, the
way the oracle estimator answers Sia's profiling (:mod:`dlsched.sim.oracle`). The adapter lives in ``sim``
so policies never import the world, and the coordinator pays for every measurement it asks for (its
stage charges pauses and records the search time).
"""

from __future__ import annotations

from collections.abc import Mapping

from dlsched.core import Placement
from dlsched.world.base import World
from dlsched.world.sharing import WorkerShare


class WorldMonitor:
    """Speeds of a packing set's workers under trial share limits, relative to running alone."""

    def __init__(self, world: World) -> None:
        self.sharing = world.sharing

    def worker_speeds(self, members: Mapping[str, tuple[str, Placement, tuple[int, ...]]]) -> dict[str, list[float]]:
        on_gpu: dict[int, list[tuple[str, str, int]]] = {}
        for job, (model, placement, pct) in members.items():
            for g, p in zip(placement.gpus, pct, strict=True):
                on_gpu.setdefault(g, []).append((job, model, p))
        out: dict[str, list[float]] = {}
        for job, (model, placement, pct) in members.items():
            speeds = []
            for g, p in zip(placement.gpus, pct, strict=True):
                other = next(((m, q) for o, m, q in on_gpu[g] if o != job), None)
                worker = WorkerShare(p) if other is None else WorkerShare(p, other[0], other[1])
                speeds.append(self.sharing.worker_speed(model, worker))
            out[job] = speeds
        return out

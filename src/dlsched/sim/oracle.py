"""Sia's "oracle" profiling mode: a goodput estimator that answers from the world's truth.

Only for comparison runs (seed 003, section 3.5.8: Oracle knows every job's throughput on any set of
resources; it bounds what better profiling could buy). It lives in ``sim`` because it reads the world, which
policies and estimators may not import; the run function hands it to a scheduler whose traits say ``needs_oracle``.

It implements :class:`dlsched.estimators.base.GoodputEstimator`. A job's true progress is hidden from the
view, so it is rebuilt from what the job reports: ``progress_fraction * total_work`` of the job's physics.
The answer is the world's goodput of the shape at the batch size the job would pick there (the world's
goodput-maximising batch for adaptive jobs, the fixed batch otherwise), with the shape's GPUs spread as
evenly as possible over its nodes. Per-GPU speed variability and server speed factors depend on the exact
GPUs, which a shape does not name, so the oracle leaves them out (as Sia's configurations do); the locality
penalty of jobs that span nodes is included.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dlsched.core import Adaptivity, ClusterView, JobView
from dlsched.estimators.base import GoodputEstimate
from dlsched.estimators.goodput import GoodputTable
from dlsched.world.base import AdaptiveJobPhysics, JobPhysics, Rate, World


def spread_counts(num_nodes: int, num_gpus: int) -> tuple[int, ...]:
    """GPUs per node for ``num_gpus`` GPUs over ``num_nodes`` nodes, as even as possible, largest first."""
    base, rest = divmod(int(num_gpus), int(num_nodes))
    return tuple([base + 1] * rest + [base] * (int(num_nodes) - rest))


class OracleGoodput:
    """The world's goodput for any job and shape (see the module docstring)."""

    mode = "oracle"

    def __init__(self, world: World, physics_of: Callable[[str], JobPhysics]) -> None:
        self.world = world
        self.physics_of = physics_of
        self._progress: dict[str, float] = {}
        #: job id -> (progress bucket, {(gpu_type, num_nodes, num_gpus): Rate})
        self._cache: dict[str, tuple[int, dict[tuple[str, int, int, Adaptivity, int | None], Rate]]] = {}

    def update(self, view: ClusterView) -> None:
        """Record each job's reported progress; forget jobs no longer active."""
        active = {j.job_id for j in view.jobs}
        for j in view.jobs:
            self._progress[j.job_id] = self._progress_of(j)
        for job_id in [k for k in self._progress if k not in active]:
            del self._progress[job_id]
            self._cache.pop(job_id, None)

    def _progress_of(self, job: JobView) -> float:
        return float(job.progress_fraction) * float(self.physics_of(job.job_id).total_work)

    def _rate(self, job: JobView, gpu_type: str, num_nodes: int, num_gpus: int) -> Rate | None:
        spec = job.spec
        if (num_nodes < 1 or num_gpus < num_nodes or not spec.allows_gpu_count(num_gpus)
                or not spec.allows_gpu_type(gpu_type)):
            return None
        phys = self.physics_of(job.job_id)
        progress = self._progress.get(job.job_id)
        if progress is None:
            progress = self._progress_of(job)
        bucket = 0
        if isinstance(phys, AdaptiveJobPhysics):
            bucket = self.world.efficiency.progress_bucket(spec.model, progress)
        cached = self._cache.get(job.job_id)
        if cached is None or cached[0] != bucket:
            cached = (bucket, {})
            self._cache[job.job_id] = cached
        key = (gpu_type, int(num_nodes), int(num_gpus), spec.adaptivity, spec.batch_size)
        rate = cached[1].get(key)
        if rate is None:
            counts = spread_counts(num_nodes, num_gpus)
            rate = self._base_rate(phys, job, progress, gpu_type, counts)
            if num_nodes > 1:
                penalty = phys.spans_nodes_penalty(num_gpus)
                if penalty != 1.0:
                    rate = Rate(work_per_s=rate.work_per_s / penalty, batch_size=rate.batch_size,
                                local_bsz=rate.local_bsz, accum_steps=rate.accum_steps,
                                step_time_s=rate.step_time_s * penalty, sync_time_s=rate.sync_time_s,
                                throughput_sps=rate.throughput_sps / penalty, efficiency=rate.efficiency)
            cached[1][key] = rate
        return rate if rate.work_per_s > 0 else None

    def _base_rate(self, phys: JobPhysics, job: JobView, progress: float, gpu_type: str,
                   counts: tuple[int, ...]) -> Rate:
        """The physics' rate, but for the request in the view (a policy may ask about the job as rigid)."""
        spec = job.spec
        if not isinstance(phys, AdaptiveJobPhysics) or (spec.adaptivity is phys.spec.adaptivity
                                                        and spec.batch_size == phys.spec.batch_size):
            return phys.base_rate(progress, gpu_type, counts, None)
        tm, eff = self.world.throughput, self.world.efficiency
        if spec.adaptivity is Adaptivity.ADAPTIVE:
            choice = tm.best_batch(spec.model, gpu_type, counts, progress, eff,
                                   max_batch=eff.max_batch_size(spec.model))
        else:
            bsz = spec.batch_size or eff.init_batch_size(spec.model)
            choice = tm.batch_choice(spec.model, gpu_type, counts, bsz, progress, eff)
        if choice is None:
            return Rate(0.0)
        return Rate(work_per_s=choice.goodput, batch_size=choice.batch_size, local_bsz=choice.local_bsz,
                    accum_steps=choice.accum_steps, step_time_s=choice.step_time_s,
                    sync_time_s=choice.sync_time_s, throughput_sps=choice.throughput_sps,
                    efficiency=choice.efficiency)

    def estimate(self, job: JobView, gpu_type: str, num_nodes: int, num_gpus: int) -> GoodputEstimate | None:
        """The world's goodput and batch size on the shape; None where the job cannot run."""
        rate = self._rate(job, gpu_type, int(num_nodes), int(num_gpus))
        if rate is None:
            return None
        throughput = rate.throughput_sps if rate.throughput_sps > 0 else rate.work_per_s
        return GoodputEstimate(goodput=float(rate.work_per_s), batch_size=int(rate.batch_size or 0),
                               throughput_sps=float(throughput), efficiency=float(rate.efficiency))

    def goodput_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> np.ndarray:
        """Goodput for each ``(num_nodes, num_gpus)`` row of ``shapes``; 0 where the job cannot run."""
        rows = np.asarray(shapes).reshape(-1, 2)
        out = np.zeros(len(rows))
        for i, (n, k) in enumerate(rows):
            rate = self._rate(job, gpu_type, int(n), int(k))
            if rate is not None:
                out[i] = rate.work_per_s
        return out

    def evaluate_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> GoodputTable:
        """The world's goodput, batch size, throughput and efficiency for each shape (0 where it cannot run)."""
        rows = np.asarray(shapes).reshape(-1, 2)
        n = len(rows)
        good, bsz, tput, eff = np.zeros(n), np.zeros(n, dtype=int), np.zeros(n), np.zeros(n)
        local, accum = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
        for i, (nodes, k) in enumerate(rows):
            rate = self._rate(job, gpu_type, int(nodes), int(k))
            if rate is None or not rate.work_per_s > 0:
                continue
            good[i] = rate.work_per_s
            bsz[i] = int(rate.batch_size or 0)
            tput[i] = rate.throughput_sps if rate.throughput_sps > 0 else rate.work_per_s
            eff[i] = rate.efficiency
            local[i] = int(rate.local_bsz or 0)
            accum[i] = int(rate.accum_steps)
        return GoodputTable(goodput=good, batch_size=bsz, throughput_sps=tput, efficiency=eff, local_bsz=local,
                            accum_steps=accum)

    def unusable_types(self, job: JobView) -> tuple[str, ...]:
        """The oracle never needs to try a type to learn that a job cannot run there."""
        return ()

    def restart_delay_s(self, job: JobView) -> float | None:
        """The world's true checkpoint-restore delay of the job."""
        return float(self.physics_of(job.job_id).restart_delay_s)

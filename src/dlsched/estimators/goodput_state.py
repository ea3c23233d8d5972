"""What the goodput estimator has learned about one job: its observations, fitted models and limits.

The cluster view hands each observation over once, so every job's history lives here until the job leaves.
A job's throughput models refit only when an observation brings structurally new data, misses the model by
more than the refit tolerance, or moves a fitted configuration's mean by half of it; version counters tell
the estimator's caches when what they were computed from has changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dlsched.core import JobView, ThroughputObservation
from dlsched.estimators.goodput_batches import GoodputTable
from dlsched.estimators.step_predictor import Predictor
from dlsched.estimators.throughput_model import (
    FitMemo,
    ObservationSet,
    ThroughputParams,
    fit_params,
    prediction_error,
)

#: Key of the single pooled model when the estimator is not heterogeneity-aware (Pollux).
POOLED = "*"


@dataclass
class FittedModel:
    """One throughput model (per GPU type, or pooled) and the observations it is fitted to."""

    obs: ObservationSet
    params: ThroughputParams | None = None
    dirty: bool = False
    #: Mean log step time per configuration when last fitted: a configuration the model cannot match
    #: (model-form error) triggers a refit only when its mean has moved since, not every round.
    fitted: dict[tuple[int, int, int, int], float] = field(default_factory=dict)


@dataclass(slots=True)
class CacheEntry:
    """Cached evaluation of one (GPU type, shapes) query: the throughput part and the goodput on top."""

    model_version: int
    batches: np.ndarray
    throughput: np.ndarray
    local: np.ndarray
    accum: np.ndarray
    valid: np.ndarray
    grad_version: int = -1
    #: Per shape: the best goodput (0 where the job cannot run), and its flat index into the candidate grid.
    goodput: np.ndarray | None = None
    flat: np.ndarray | None = None
    eff: np.ndarray | None = None
    table: GoodputTable | None = None


@dataclass
class JobState:
    """Everything learned about one job, and the caches derived from it."""

    job_id: str
    stages: int
    models: dict[str, FittedModel] = field(default_factory=dict)
    #: Largest local batch observed per GPU type (the learned memory limit).
    max_local: dict[str, int] = field(default_factory=dict)
    #: Types the job reported it cannot run on (a zero step time).
    unusable: set[str] = field(default_factory=set)
    #: Opaque jobs: per type [sum of rates, count].
    rates: dict[str, list[float]] = field(default_factory=dict)
    grad: tuple[float, float] | None = None
    #: Bumped when anything behind throughput changes (a refit, a memory limit, a type found unusable).
    model_version: int = 0
    #: Bumped when the gradient statistics change (efficiency only; throughput arrays stay valid).
    grad_version: int = 0
    cache: dict[tuple, CacheEntry] = field(default_factory=dict)
    predictors: dict[str, Predictor | None] = field(default_factory=dict)
    predictors_version: int = -1

    def bump(self) -> None:
        self.model_version += 1

    # -- learning --------------------------------------------------------------------------------------
    def ingest(self, job: JobView, *, hetero_aware: bool, refit_tol: float, zero_grad: str = "keep",
               memo: FitMemo | None = None) -> int:
        """Take in the job's new observations and refit what they invalidated; returns the number of fits.

        ``zero_grad`` says what a gradient report with both statistics zero means: ``keep`` (it carries no
        information, 0/0, and the last informative report stays in force) or ``no-gain`` (take it as is:
        Pollux's formula then gives a larger batch no gain, efficiency ``B0 / B``). ``memo`` answers fits
        another job already did on the same observations (the same result; :class:`FitMemo`).
        """
        opaque = job.batch_limits is None
        for o in job.throughput_obs:
            if opaque:
                self._ingest_rate(o)
            else:
                self._ingest_step(o, hetero_aware, refit_tol)
        usable = [(g.time_s, (float(g.grad_sqr), float(g.grad_var))) for g in job.gradient_obs
                  if math.isfinite(g.grad_sqr) and math.isfinite(g.grad_var) and g.grad_sqr >= 0 and g.grad_var >= 0
                  and (zero_grad != "keep" or g.grad_sqr > 0 or g.grad_var > 0)]
        if usable:
            grad = max(usable, key=lambda u: u[0])[1]
            if grad != self.grad:
                self.grad = grad
                self.grad_version += 1
        fits = 0
        for m in self.models.values():
            if m.dirty:
                m.params = fit_params(m.obs, m.params) if memo is None else memo.fit(m.obs, m.params)
                m.fitted = m.obs.means()
                m.dirty = False
                fits += 1
        if fits:
            self.bump()
        return fits

    def _ingest_rate(self, o: ThroughputObservation) -> None:
        if o.step_time_s <= 0 or not math.isfinite(o.step_time_s):
            return  # duration jobs report no step time while running
        acc = self.rates.setdefault(o.gpu_type, [0.0, 0.0])
        before = acc[0] / acc[1] if acc[1] else 0.0
        acc[0] += 1.0 / o.step_time_s
        acc[1] += 1.0
        if abs(acc[0] / acc[1] - before) > 1e-3 * max(before, 1e-12):
            self.bump()

    def _ingest_step(self, o: ThroughputObservation, hetero_aware: bool, refit_tol: float) -> None:
        mixed = "+" in o.gpu_type
        if mixed and hetero_aware:
            return  # a placement over several types says nothing clean about any one of them
        if o.step_time_s <= 0 or o.local_bsz <= 0 or not math.isfinite(o.step_time_s):
            if not mixed and o.gpu_type not in self.unusable:
                self.unusable.add(o.gpu_type)  # the job could not run there (no profile / no memory)
                self.bump()
            return
        if not mixed:
            if o.gpu_type in self.unusable:
                self.unusable.discard(o.gpu_type)
                self.bump()
            if o.local_bsz > self.max_local.get(o.gpu_type, 0):
                self.max_local[o.gpu_type] = int(o.local_bsz)
                self.bump()
        model_key = o.gpu_type if hetero_aware else POOLED
        m = self.models.get(model_key)
        if m is None:
            m = self.models[model_key] = FittedModel(ObservationSet(stages=self.stages))
        before = m.obs.structure()
        config = m.obs.add(o.num_nodes, o.num_gpus, o.local_bsz, o.accum_steps, o.step_time_s, o.sync_time_s)
        if m.dirty:
            return
        if m.params is None or m.obs.structure() != before:
            m.dirty = True
        elif config in m.fitted:
            # a configuration already fitted: refit only if what it measures has moved materially
            mean = m.obs.mean_log_step(config)
            assert mean is not None  # the observation just added is of this configuration
            m.dirty = abs(mean - m.fitted[config]) > 0.5 * refit_tol
        else:
            m.dirty = prediction_error(m.params, o.num_nodes, o.num_gpus, o.local_bsz, max(1, o.accum_steps),
                                       o.step_time_s, self.stages) > refit_tol

    # -- what is known ---------------------------------------------------------------------------------
    def memory_limit(self, gpu_type: str) -> float:
        """Largest local batch seen on the type; else the largest seen anywhere; inf when nothing is known."""
        if gpu_type in self.max_local:
            return float(self.max_local[gpu_type])
        return float(max(self.max_local.values())) if self.max_local else math.inf

    def own_params(self, gpu_type: str) -> ThroughputParams | None:
        """The fitted parameters of the model kept under ``gpu_type`` (or :data:`POOLED`), if any."""
        m = self.models.get(gpu_type)
        return None if m is None else m.params

    def scaling_source(self, gpu_type: str) -> ThroughputParams | None:
        """The type whose multi-GPU model eq. 3.1 borrows: the one with the most multi-GPU configurations."""
        best, best_n = None, 0
        for t in sorted(self.models):
            m = self.models[t]
            if t == gpu_type or m.params is None or t in self.unusable:
                continue
            n = m.obs.multi_gpu
            if n > best_n:
                best, best_n = m.params, n
        return best

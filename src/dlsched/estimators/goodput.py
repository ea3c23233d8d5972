"""Sia's goodput estimator: bootstrapped per-(job, GPU type) throughput models times Pollux's efficiency.

What it believes comes only from what jobs report in the :class:`~dlsched.core.ClusterView`: profiling and
running step times (:class:`~dlsched.core.ThroughputObservation`) and gradient statistics
(:class:`~dlsched.core.GradientObservation`). The view hands each observation over once, so the estimator
keeps every job's history itself, and forgets a job when it leaves the view.

Throughput (seed 003, section 3.3.2)
    One :mod:`Pollux-style model <dlsched.estimators.throughput_model>` per (job, GPU type), fitted to that
    type's observations.

    * ``mode="bootstrap"`` (Sia's default): the model of a type starts from the job's one-GPU profile there
      (several local batch sizes, up to the memory limit). With no multi-GPU data on any type the sync terms
      are pinned to zero: Sia's one-time assumption that two replicas run twice as fast as one. Once some
      type A has multi-GPU observations, a type B without any is estimated by eq. 3.1,
      ``est-xput_B(N) = xput_B(1) / xput_A(1) * xput_A(N)``, evaluated per configuration: the step time of
      A's full model times the ratio of B's to A's one-micro-batch compute time at the same local batch, so
      B inherits A's compute:communication scaling. When B itself runs multi-GPU, its own refit model
      replaces the bootstrap. A type with no observation at all is unknown: goodput 0 (the policy should
      profile the job first).
    * ``mode="none"`` (no profiling, "learn as you go"): the same models and the same eq. 3.1 transfer, but
      nothing is known before the job runs. A job with no observation gets a generic prior of perfect
      linear scaling at an arbitrary unit speed (``1 / GENERIC_BETA_C`` samples/s per GPU), equal on every
      type; a type the job has not run on is assumed as fast as the fastest type it has run on (optimism
      under uncertainty, so the policy explores it; one round there replaces the guess with a fit).
    * ``mode="oracle"`` is not this class: the simulator hands Sia ``dlsched.sim.oracle.OracleGoodput``.
    * ``hetero_aware=False`` (Pollux): one model per job, observations of every GPU type pooled, used for
      every type.

    Models refit (``scipy.optimize.least_squares``) only when an observation brings structurally new data
    (first multi-GPU, multi-node or ``K > 2`` point, a second local batch size), when the current model
    misses a new configuration by more than ``refit_tol`` in log step time, or when the mean of a fitted
    configuration moves by half that; so steady-state rounds cost no fitting, even where the model form
    cannot match a configuration exactly.

Memory limit
    The largest local batch observed on a type (profiling goes up to the memory limit) is that type's
    per-GPU limit; larger per-replica shares use gradient accumulation. An unobserved type borrows the
    largest limit known on any type; a job with no observation at all has no limit.

Statistical efficiency (Pollux)
    From the latest reported ``(grad_sqr, grad_var)``, taken as statistics at the initial batch size ``B0``
    (``job.batch_limits[0]``), as adaptdl reports them: ``scale = B / B0``, ``gain = (var + sqr) /
    (var / scale + sqr)``, ``efficiency = gain / scale``. The latest report is used rather than a smoothed
    one because the noise scale drifts steadily upwards in training and a lagging average would keep
    batches too small. Before any report the job has not trained yet, and the estimator assumes a moderate
    noise scale equal to the initial batch (``var / sqr = prior_noise_ratio = 1``): doubling the batch then
    keeps 2/3 of the per-sample efficiency, so adaptive jobs are not assumed to scale batch-free, nor stuck
    at ``B0``. (The early-training ratios in the Sia profiles lie between 0.1 and 5 for five of six models.)

Batch size
    Adaptive jobs use the goodput-maximising global batch in ``[max(B0, replicas), Bmax]`` (a geometric
    grid plus the batches that fill memory exactly for 1-4 accumulation steps); strong-scaling and rigid jobs
    keep ``spec.batch_size`` (``B0`` if unset). Hybrid-parallel jobs (``spec.gpu_unit = P > 1``) run
    ``num_gpus // P`` data-parallel pipelines of ``P`` stages; ``local_bsz`` is then the micro-batch of one
    pipeline and the step model adds the ``P - 1`` micro-batch pipeline bubble.

Opaque jobs
    Jobs without ``batch_limits`` (trace jobs known only by a duration or an iteration count) report no
    batch structure; their goodput on a type is the mean work rate ``1 / step_time_s`` they reported there
    (profiling measures it), the same for every allowed GPU count, efficiency 1.

Speed
    ``goodput_many`` is called for every job x configuration each round. Results are cached per job and
    (GPU type, shapes) and dropped only when the job's models, memory limits or gradient statistics change;
    a cache miss evaluates every shape and candidate batch in one numpy pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dlsched.core import Adaptivity, ClusterView, JobView, ThroughputObservation
from dlsched.estimators.base import GoodputEstimate
from dlsched.estimators.throughput_model import (
    ObservationSet,
    ThroughputParams,
    compute_time,
    fit_params,
    prediction_error,
    step_time,
)

#: Key of the single pooled model when the estimator is not heterogeneity-aware (Pollux).
POOLED = "*"
#: Generic prior for a job nothing is known about: seconds per sample on one GPU, no fixed cost, no sync.
GENERIC_BETA_C = 1e-3
#: Candidate global batches per shape on the geometric grid (plus up to 4 memory-filling batches).
BATCH_GRID = 32
_MEMORY_FILL = np.arange(1, 5, dtype=float)[None, :]
_GRID_U = np.linspace(0.0, 1.0, BATCH_GRID)[None, :]
_CACHE_LIMIT = 64
MODES = ("bootstrap", "none")


def statistical_efficiency(batch_size: np.ndarray | float, init_batch: float, grad_sqr: float,
                           grad_var: float) -> np.ndarray:
    """Pollux's efficiency of global batch ``batch_size`` relative to ``init_batch`` (1 there).

    ``grad_sqr`` and ``grad_var`` are the squared norm of the mean gradient and the gradient-noise variance
    at the initial batch size. Zero statistics give a gain of 1 (no benefit from a larger batch).
    """
    scale = np.asarray(batch_size, dtype=float) / float(init_batch)
    if grad_var <= 0 and grad_sqr <= 0:
        return 1.0 / scale
    # gain / scale with gain = (var + sqr) / (var / scale + sqr), in one division
    return (grad_var + grad_sqr) / (grad_var + grad_sqr * scale)


@dataclass(frozen=True, slots=True)
class GoodputTable:
    """Per-shape goodput and how it is reached (arrays aligned with the queried shapes)."""

    goodput: np.ndarray
    batch_size: np.ndarray
    throughput_sps: np.ndarray
    efficiency: np.ndarray
    local_bsz: np.ndarray
    accum_steps: np.ndarray


@dataclass(frozen=True, slots=True)
class _Predictor:
    """How step time is predicted on one type: ``base``'s model, compute rescaled to ``compute``'s (eq. 3.1)."""

    base: ThroughputParams
    compute: ThroughputParams | None
    max_local: float

    def step(self, nodes: np.ndarray, gpus: np.ndarray, local: np.ndarray, accum: np.ndarray,
             stages: int) -> np.ndarray:
        out = step_time(self.base, nodes, gpus, local, accum, stages)
        if self.compute is not None:
            out = out * (compute_time(self.compute, local) / np.maximum(compute_time(self.base, local), 1e-12))
        return out

    def per_sample_s(self, local: float) -> float:
        """One-GPU seconds per sample at a local batch (to rank types by speed)."""
        p = self.compute if self.compute is not None else self.base
        return float(compute_time(p, local)) / max(local, 1e-9)


@dataclass
class _Model:
    obs: ObservationSet
    params: ThroughputParams | None = None
    dirty: bool = False
    #: Mean log step time per configuration when last fitted: a configuration the model cannot match
    #: (model-form error) triggers a refit only when its mean has moved since, not every round.
    fitted: dict[tuple[int, int, int, int], float] = field(default_factory=dict)


@dataclass
class _JobState:
    job_id: str
    stages: int
    models: dict[str, _Model] = field(default_factory=dict)
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
    cache: dict[tuple, _Entry] = field(default_factory=dict)
    predictors: dict[str, _Predictor | None] = field(default_factory=dict)
    predictors_version: int = -1

    def bump(self) -> None:
        self.model_version += 1


@dataclass(slots=True)
class _Entry:
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


class SiaGoodputEstimator:
    """Learned goodput estimator (Sia bootstrap, no-profiling, or Pollux's pooled model); module docstring."""

    def __init__(self, mode: str = "bootstrap", hetero_aware: bool = True, *, prior_noise_ratio: float = 1.0,
                 refit_tol: float = 0.05) -> None:
        if mode not in MODES:
            hint = " (the simulator supplies dlsched.sim.oracle.OracleGoodput for oracle runs)" \
                if mode == "oracle" else ""
            raise ValueError(f"SiaGoodputEstimator mode must be one of {MODES}, got '{mode}'{hint}")
        if prior_noise_ratio < 0:
            raise ValueError(f"prior_noise_ratio must be >= 0, got {prior_noise_ratio}")
        self.mode = mode
        self.hetero_aware = hetero_aware
        self.prior_noise_ratio = float(prior_noise_ratio)
        self.refit_tol = float(refit_tol)
        self._jobs: dict[str, _JobState] = {}
        self._last_view: ClusterView | None = None
        #: Number of model fits done so far (for tests and reports).
        self.fits = 0

    # -- learning --------------------------------------------------------------------------------------
    def update(self, view: ClusterView) -> None:
        """Ingest the view's new observations and forget jobs no longer in it.

        The engine hands every observation over once; ingesting the same view object twice is a no-op.
        """
        if view is self._last_view:
            return
        self._last_view = view
        active = set()
        for jv in view.jobs:
            active.add(jv.job_id)
            st = self._state(jv)
            self._ingest(st, jv)
        for job_id in [k for k in self._jobs if k not in active]:
            del self._jobs[job_id]

    def forget(self, job_id: str) -> None:
        """Drop everything learned about a job."""
        self._jobs.pop(job_id, None)

    def _state(self, job: JobView) -> _JobState:
        st = self._jobs.get(job.job_id)
        if st is None:
            st = _JobState(job.job_id, stages=max(1, int(job.spec.gpu_unit)))
            self._jobs[job.job_id] = st
        return st

    def _ingest(self, st: _JobState, job: JobView) -> None:
        opaque = job.batch_limits is None
        for o in job.throughput_obs:
            if opaque:
                self._ingest_rate(st, o)
            else:
                self._ingest_step(st, o)
        if job.gradient_obs:
            latest = max(job.gradient_obs, key=lambda g: g.time_s)
            grad = (float(latest.grad_sqr), float(latest.grad_var))
            if grad != st.grad and all(math.isfinite(v) and v >= 0 for v in grad):
                st.grad = grad
                st.grad_version += 1
        refit = False
        for m in st.models.values():
            if m.dirty:
                m.params = fit_params(m.obs, m.params)
                m.fitted = m.obs.means()
                m.dirty = False
                self.fits += 1
                refit = True
        if refit:
            st.bump()

    def _ingest_rate(self, st: _JobState, o: ThroughputObservation) -> None:
        if o.step_time_s <= 0 or not math.isfinite(o.step_time_s):
            return  # duration jobs report no step time while running
        acc = st.rates.setdefault(o.gpu_type, [0.0, 0.0])
        before = acc[0] / acc[1] if acc[1] else 0.0
        acc[0] += 1.0 / o.step_time_s
        acc[1] += 1.0
        if abs(acc[0] / acc[1] - before) > 1e-3 * max(before, 1e-12):
            st.bump()

    def _ingest_step(self, st: _JobState, o: ThroughputObservation) -> None:
        mixed = "+" in o.gpu_type
        if mixed and self.hetero_aware:
            return  # a placement over several types says nothing clean about any one of them
        if o.step_time_s <= 0 or o.local_bsz <= 0 or not math.isfinite(o.step_time_s):
            if not mixed and o.gpu_type not in st.unusable:
                st.unusable.add(o.gpu_type)  # the job could not run there (no profile / no memory)
                st.bump()
            return
        if not mixed:
            if o.gpu_type in st.unusable:
                st.unusable.discard(o.gpu_type)
                st.bump()
            if o.local_bsz > st.max_local.get(o.gpu_type, 0):
                st.max_local[o.gpu_type] = int(o.local_bsz)
                st.bump()
        key = o.gpu_type if self.hetero_aware else POOLED
        m = st.models.get(key)
        if m is None:
            m = st.models[key] = _Model(ObservationSet(stages=st.stages))
        before = m.obs.structure()
        key = m.obs.add(o.num_nodes, o.num_gpus, o.local_bsz, o.accum_steps, o.step_time_s, o.sync_time_s)
        if m.dirty:
            return
        if m.params is None or m.obs.structure() != before:
            m.dirty = True
        elif key in m.fitted:
            # a configuration already fitted: refit only if what it measures has moved materially
            m.dirty = abs(m.obs.mean_log_step(key) - m.fitted[key]) > 0.5 * self.refit_tol
        else:
            m.dirty = prediction_error(m.params, o.num_nodes, o.num_gpus, o.local_bsz, max(1, o.accum_steps),
                                       o.step_time_s, st.stages) > self.refit_tol

    # -- what is known ---------------------------------------------------------------------------------
    def known_types(self, job: JobView) -> tuple[str, ...]:
        """GPU types on which the job has a model of its own (observed there), sorted."""
        st = self._jobs.get(job.job_id)
        if st is None:
            return ()
        if job.batch_limits is None:
            return tuple(sorted(st.rates))
        if not self.hetero_aware:
            return tuple(sorted(st.max_local))
        return tuple(sorted(k for k, m in st.models.items() if m.params is not None))

    def unusable_types(self, job: JobView) -> tuple[str, ...]:
        """GPU types where the job reported it could not run (no model for the type, or out of memory)."""
        st = self._jobs.get(job.job_id)
        return () if st is None else tuple(sorted(st.unusable))

    def restart_delay_s(self, job: JobView) -> float | None:
        """Jobs do not report their checkpoint-restore time, so a learned estimator does not know it."""
        return None

    def params(self, job: JobView, gpu_type: str) -> ThroughputParams | None:
        """The job's fitted throughput parameters on a type (the pooled model if not hetero-aware)."""
        st = self._jobs.get(job.job_id)
        if st is None:
            return None
        m = st.models.get(gpu_type if self.hetero_aware else POOLED)
        return None if m is None else m.params

    def predict_step_time(self, job: JobView, gpu_type: str, num_nodes, num_gpus, local_bsz,
                          accum_steps=1) -> np.ndarray | None:
        """Believed seconds per optimizer step, vectorised; None if nothing is known on the type."""
        st = self._state(job)
        pred = self._predictor(st, job, gpu_type) if job.spec.allows_gpu_type(gpu_type) else None
        if pred is None:
            return None
        return pred.step(np.asarray(num_nodes, dtype=float), np.asarray(num_gpus, dtype=float),
                         np.asarray(local_bsz, dtype=float), np.asarray(accum_steps, dtype=float), st.stages)

    def max_local_bsz(self, job: JobView, gpu_type: str) -> float:
        """Believed per-GPU (per-pipeline) memory limit on a type; inf when nothing is known."""
        return self._max_local(self._state(job), gpu_type)

    # -- the protocol ----------------------------------------------------------------------------------
    def estimate(self, job: JobView, gpu_type: str, num_nodes: int, num_gpus: int) -> GoodputEstimate | None:
        """Goodput of ``job`` on one shape at its goodput-maximising batch size; None if it cannot run/unknown."""
        t = self.evaluate_many(job, gpu_type, np.array([[num_nodes, num_gpus]]))
        if not t.goodput[0] > 0:
            return None
        return GoodputEstimate(goodput=float(t.goodput[0]), batch_size=int(t.batch_size[0]),
                               throughput_sps=float(t.throughput_sps[0]), efficiency=float(t.efficiency[0]))

    def goodput_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> np.ndarray:
        """Goodput for each ``(num_nodes, num_gpus)`` row of ``shapes``; 0 where the job cannot run."""
        return self._entry(job, gpu_type, shapes).goodput.copy()

    def evaluate_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> GoodputTable:
        """Like :meth:`goodput_many`, with the batch size, throughput and efficiency behind each goodput.

        The returned arrays are shared with the cache: treat them as read-only.
        """
        e = self._entry(job, gpu_type, shapes)
        if e.table is None:
            ok = e.goodput > 0

            def sel(a: np.ndarray) -> np.ndarray:
                return np.where(ok, a.ravel()[e.flat], 0.0)

            e.table = GoodputTable(goodput=e.goodput, batch_size=sel(e.batches).astype(int),
                                   throughput_sps=sel(e.throughput), efficiency=sel(e.eff),
                                   local_bsz=sel(e.local).astype(int), accum_steps=sel(e.accum).astype(int))
        return e.table

    def _entry(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> _Entry:
        """The cached evaluation of a query, recomputing only the part whose inputs changed."""
        shapes = np.asarray(shapes)
        st = self._state(job)
        spec = job.spec
        # what of the request shapes the answer: policies may ask about a modified view of the same job
        # (Gavel asks about the job as a rigid gang), which must not share cache entries with the original
        key = (gpu_type, shapes.shape, shapes.tobytes(), spec.adaptivity, spec.batch_size, spec.lower_gpus,
               spec.upper_gpus, spec.gpu_unit, spec.gpu_types, job.batch_limits)
        e = st.cache.get(key)
        if e is None or e.model_version != st.model_version:
            if len(st.cache) >= _CACHE_LIMIT:
                st.cache.clear()
            e = st.cache[key] = self._throughput_part(st, job, gpu_type, shapes.reshape(-1, 2).astype(float))
        if e.goodput is None or e.grad_version != st.grad_version:
            self._select(st, job, e)
        return e

    # -- evaluation ------------------------------------------------------------------------------------
    def _max_local(self, st: _JobState, gpu_type: str) -> float:
        if gpu_type in st.max_local:
            return float(st.max_local[gpu_type])
        return float(max(st.max_local.values())) if st.max_local else math.inf

    def _own(self, st: _JobState, gpu_type: str) -> ThroughputParams | None:
        m = st.models.get(gpu_type)
        return None if m is None else m.params

    def _predictor(self, st: _JobState, job: JobView, gpu_type: str) -> _Predictor | None:
        if st.predictors_version != st.model_version:
            st.predictors.clear()
            st.predictors_version = st.model_version
        if gpu_type in st.predictors:
            return st.predictors[gpu_type]
        pred = self._resolve(st, job, gpu_type)
        st.predictors[gpu_type] = pred
        return pred

    def _resolve(self, st: _JobState, job: JobView, gpu_type: str) -> _Predictor | None:
        if gpu_type in st.unusable:
            return None
        limit = self._max_local(st, gpu_type)
        if not self.hetero_aware:
            p = self._own(st, POOLED)
            if p is not None:
                return _Predictor(p, None, limit)
            return _Predictor(ThroughputParams(0.0, GENERIC_BETA_C), None, limit) if self.mode == "none" else None
        own = self._own(st, gpu_type)
        if own is not None:
            if st.models[gpu_type].obs.has_multi_gpu:
                return _Predictor(own, None, limit)
            src = self._scaling_source(st, gpu_type)
            if src is None:
                return _Predictor(own, None, limit)  # no type ran multi-GPU: perfect scaling (sync pinned to 0)
            return _Predictor(src, own, limit)  # eq. 3.1
        if self.mode != "none":
            return None
        # no profiling: be optimistic about a type never tried, as fast as the fastest type tried
        known = [t for t, m in st.models.items() if m.params is not None and t != gpu_type
                 and t not in st.unusable]
        if not known:
            return _Predictor(ThroughputParams(0.0, GENERIC_BETA_C), None, limit)
        ref_local = float(job.batch_limits[0]) if job.batch_limits else 1.0
        preds = [self._resolve(st, job, t) for t in known]
        best = min((p for p in preds if p is not None), key=lambda p: p.per_sample_s(min(ref_local, p.max_local)),
                   default=None)
        if best is None:
            return None
        return _Predictor(best.base, best.compute, limit)

    @staticmethod
    def _scaling_source(st: _JobState, gpu_type: str) -> ThroughputParams | None:
        """The type whose multi-GPU model eq. 3.1 borrows: the one with the most multi-GPU configurations."""
        best, best_n = None, 0
        for t in sorted(st.models):
            m = st.models[t]
            if t == gpu_type or m.params is None or t in st.unusable:
                continue
            n = m.obs.multi_gpu
            if n > best_n:
                best, best_n = m.params, n
        return best

    def _throughput_part(self, st: _JobState, job: JobView, gpu_type: str, shapes: np.ndarray) -> _Entry:
        """Candidate batches per shape and their believed throughput (independent of gradient statistics)."""
        m = len(shapes)
        nodes, gpus = shapes[:, 0], shapes[:, 1]
        spec = job.spec
        valid = ((nodes >= 1) & (gpus >= nodes) & (gpus >= spec.lower_gpus) & (gpus <= spec.upper_gpus)
                 & (np.mod(gpus, spec.gpu_unit) == 0))
        empty = np.zeros((m, 1))
        if job.batch_limits is None:
            return self._opaque_part(st, job, gpu_type, valid)
        pred = self._predictor(st, job, gpu_type) if spec.allows_gpu_type(gpu_type) else None
        if pred is None or not valid.any():
            return _Entry(st.model_version, np.ones((m, 1)), empty, empty, empty, np.zeros(m, dtype=bool))
        b0, bmax = float(job.batch_limits[0]), float(max(job.batch_limits[1], job.batch_limits[0]))
        replicas = np.floor(gpus / st.stages)
        valid &= replicas >= 1
        replicas = np.maximum(replicas, 1.0)[:, None]
        limit = pred.max_local
        if spec.adaptivity is Adaptivity.ADAPTIVE:
            lo = np.minimum(np.maximum(b0, replicas), bmax)
            batches = np.round(lo * (bmax / lo) ** _GRID_U)
            if math.isfinite(limit):
                fill = replicas * (limit * _MEMORY_FILL)
                fill = np.where((fill >= lo) & (fill <= bmax), fill, lo)
                batches = np.concatenate([batches, fill], axis=1)
        else:
            batches = np.full((m, 1), float(spec.batch_size or b0))
        share = np.maximum(1.0, np.ceil(batches / replicas - 1e-9))
        if math.isfinite(limit):
            accum = np.maximum(1.0, np.ceil(share / limit - 1e-9))
            local = np.ceil(share / accum - 1e-9)
        else:
            accum, local = np.ones_like(share), share
        step = pred.step(nodes[:, None], gpus[:, None], local, accum, st.stages)
        throughput = batches / np.maximum(step, 1e-12)
        return _Entry(st.model_version, batches, throughput, local, accum, valid)

    def _select(self, st: _JobState, job: JobView, e: _Entry) -> None:
        """Efficiency of every candidate batch, and the goodput-maximising one per shape."""
        if job.batch_limits is None:
            e.eff = np.ones_like(e.batches)
        else:
            sqr, var = st.grad if st.grad is not None else (1.0, self.prior_noise_ratio)
            e.eff = statistical_efficiency(e.batches, float(job.batch_limits[0]), sqr, var)
        goodput = e.throughput * e.eff
        m, cols = goodput.shape
        e.flat = np.argmax(goodput, axis=1) + np.arange(m) * cols  # index of each row's best batch
        good = goodput.ravel()[e.flat]
        e.goodput = np.where(e.valid & np.isfinite(good) & (good > 0), good, 0.0)
        e.grad_version = st.grad_version
        e.table = None

    def _opaque_part(self, st: _JobState, job: JobView, gpu_type: str, valid: np.ndarray) -> _Entry:
        """Jobs without batch structure: the work rate they reported on the type, for every allowed count."""
        m = len(valid)
        rate = 0.0
        if job.spec.allows_gpu_type(gpu_type):
            if gpu_type in st.rates:
                total, n = st.rates[gpu_type]
                rate = total / n
            elif self.mode == "none":
                rate = max((total / n for total, n in st.rates.values()), default=1.0)
        col = np.full((m, 1), rate)
        batch = np.full((m, 1), float(job.spec.batch_size or 0))
        return _Entry(st.model_version, batch, col, np.zeros((m, 1)), np.ones((m, 1)), valid & (rate > 0))

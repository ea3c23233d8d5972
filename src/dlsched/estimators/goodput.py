"""The goodput estimator that Sia, Pollux and Gavel learn with: bootstrapped per-(job, GPU type)
throughput models times Pollux's statistical efficiency.

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

    A report with both statistics zero is 0/0: it says nothing about the noise scale. Real jobs never send
    one (adaptdl reports running averages), but the measured profiles hold statistics that underflowed to
    zero late in training, and a simulated job reporting them would, taken literally, make every batch
    larger than ``B0`` look worthless (Pollux's guard: no gain, efficiency ``B0 / B``) until the next
    non-zero report, so a scheduler would shrink the job and grow it back a few rounds later. By default
    (``zero_grad="keep"``) such a report is skipped and the last informative one stays in force;
    ``zero_grad="no-gain"`` takes it literally, as adaptdl's ``GoodputFunction`` would.

Batch size
    Adaptive jobs use the goodput-maximising global batch in ``[max(B0, replicas), Bmax]``. How candidates
    are searched is ``batch_search``: ``"dense"`` (the default) tries a rounded geometric grid of 32 plus the
    batches that fill memory exactly for 1-4 accumulation steps and credits the nominal batch, as the world
    accounts for it; ``"adaptdl"`` (what Pollux's jobs do) tries AdaptDL's 50 unrounded geometric batches,
    forces accumulation on a single replica above ``B0`` and credits the batch that actually runs (see
    :func:`~dlsched.estimators.goodput_batches.adaptdl_batches`). Strong-scaling and rigid jobs
    keep ``spec.batch_size`` (``B0`` if unset) as their global batch, unless they run in fixed per-GPU batch
    mode (``spec.per_gpu_batch``, Hops's jobs): then ``spec.batch_size`` is each replica's and the global
    batch grows with the count, at efficiency 1 (the user scales the learning rate; the work is samples).
    Hybrid-parallel jobs (``spec.gpu_unit = P > 1``) run ``num_gpus // P`` data-parallel pipelines of ``P``
    stages; ``local_bsz`` is then the micro-batch of one pipeline and the step model adds the ``P - 1``
    micro-batch pipeline bubble.

Opaque jobs
    Jobs without ``batch_limits`` (trace jobs known only by a duration or an iteration count) report no
    batch structure; their goodput on a type is the mean work rate ``1 / step_time_s`` they reported there
    (profiling measures it), the same for every allowed GPU count, efficiency 1.

Speed
    ``goodput_many`` is called for every job x configuration each round. Results are cached per job and
    (GPU type, shapes) and dropped only when the job's models, memory limits or gradient statistics change;
    a cache miss evaluates every shape and candidate batch in one numpy pass.

Layout
    The arithmetic of batches and efficiency is :mod:`dlsched.estimators.goodput_batches`; what is learned
    per job (observations, fits, limits) is :mod:`dlsched.estimators.goodput_state`; which model predicts a
    type is :mod:`dlsched.estimators.goodput_predictors`. This module ties them together behind the
    estimator protocol and caches the answers.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from dlsched.core import Adaptivity, ClusterView, JobView
from dlsched.estimators.base import GoodputEstimate
from dlsched.estimators.goodput_batches import (
    BATCH_GRID,
    BATCH_SEARCHES,
    GoodputTable,
    adaptdl_batches,
    best_per_row,
    candidate_batches,
    split_batches,
    statistical_efficiency,
)
from dlsched.estimators.goodput_predictors import GENERIC_BETA_C, predictor
from dlsched.estimators.goodput_state import POOLED, CacheEntry, JobState
from dlsched.estimators.step_predictor import Predictor
from dlsched.estimators.throughput_model import FitMemo, ThroughputParams

# Names defined in the goodput_* modules are still importable from here, where they used to live.
__all__ = ["BATCH_GRID", "GENERIC_BETA_C", "MODES", "POOLED", "ZERO_GRAD_MODES", "GoodputTable",
           "LearnedGoodputEstimator", "statistical_efficiency"]

_CACHE_LIMIT = 64
#: Throughput parts remembered across jobs (least recently used dropped beyond this).
_PART_LIMIT = 2048
#: A throughput part: candidate batches, their throughput, micro-batch, accumulation steps, valid shapes.
_Part = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
MODES = ("bootstrap", "none")
#: What a gradient report with both statistics zero means (see "Statistical efficiency" above).
ZERO_GRAD_MODES = ("keep", "no-gain")


class LearnedGoodputEstimator:
    """Learned goodput estimator (Sia bootstrap, no-profiling, or Pollux's pooled model); module docstring."""

    def __init__(self, mode: str = "bootstrap", hetero_aware: bool = True, *, prior_noise_ratio: float = 1.0,
                 refit_tol: float = 0.05, batch_search: str = "dense", zero_grad: str = "keep") -> None:
        if mode not in MODES:
            hint = " (the simulator supplies dlsched.sim.oracle.OracleGoodput for oracle runs)" \
                if mode == "oracle" else ""
            raise ValueError(f"LearnedGoodputEstimator mode must be one of {MODES}, got '{mode}'{hint}")
        if zero_grad not in ZERO_GRAD_MODES:
            raise ValueError(f"zero_grad must be one of {ZERO_GRAD_MODES}, got '{zero_grad}'")
        if prior_noise_ratio < 0:
            raise ValueError(f"prior_noise_ratio must be >= 0, got {prior_noise_ratio}")
        if batch_search not in BATCH_SEARCHES:
            raise ValueError(f"batch_search must be one of {', '.join(BATCH_SEARCHES)}, got '{batch_search}'")
        self.batch_search = batch_search
        self.mode = mode
        self.hetero_aware = hetero_aware
        self.prior_noise_ratio = float(prior_noise_ratio)
        self.refit_tol = float(refit_tol)
        self.zero_grad = zero_grad
        self._jobs: dict[str, JobState] = {}
        self._last_view: ClusterView | None = None
        #: Number of model fits done so far (for tests and reports; fits answered by the memo count).
        self.fits = 0
        #: Fits are shared between jobs with identical observations (:class:`FitMemo`: the same result).
        self.fit_memo = FitMemo()
        #: Throughput parts by everything they depend on, shared between jobs (see _throughput_part).
        self._parts: OrderedDict[tuple, _Part] = OrderedDict()
        self.part_hits = 0

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

    def _state(self, job: JobView) -> JobState:
        st = self._jobs.get(job.job_id)
        if st is None:
            st = JobState(job.job_id, stages=max(1, int(job.spec.gpu_unit)))
            self._jobs[job.job_id] = st
        return st

    def _ingest(self, st: JobState, job: JobView) -> None:
        self.fits += st.ingest(job, hetero_aware=self.hetero_aware, refit_tol=self.refit_tol,
                               zero_grad=self.zero_grad, memo=self.fit_memo)

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
        """What the runtime measured of the job's start-up (launch to first step), if anything: jobs do not
        report their checkpoint-restore time, but a real cluster sees how long a restart took."""
        return job.measured_startup_s

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
        return self._state(job).memory_limit(gpu_type)

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
        goodput = self._entry(job, gpu_type, shapes).goodput
        assert goodput is not None  # _entry computes the goodput part
        return goodput.copy()

    def evaluate_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> GoodputTable:
        """Like :meth:`goodput_many`, with the batch size, throughput and efficiency behind each goodput.

        The returned arrays are shared with the cache: treat them as read-only.
        """
        e = self._entry(job, gpu_type, shapes)
        if e.table is None:
            goodput, flat, eff = e.goodput, e.flat, e.eff
            assert goodput is not None and flat is not None and eff is not None  # _entry computes them
            ok = goodput > 0

            def sel(a: np.ndarray) -> np.ndarray:
                return np.where(ok, a.ravel()[flat], 0.0)

            e.table = GoodputTable(goodput=goodput, batch_size=sel(e.batches).astype(int),
                                   throughput_sps=sel(e.throughput), efficiency=sel(eff),
                                   local_bsz=sel(e.local).astype(int), accum_steps=sel(e.accum).astype(int))
        return e.table

    def _entry(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> CacheEntry:
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
    def _predictor(self, st: JobState, job: JobView, gpu_type: str) -> Predictor | None:
        return predictor(st, job, gpu_type, mode=self.mode, hetero_aware=self.hetero_aware)

    def _throughput_part(self, st: JobState, job: JobView, gpu_type: str, shapes: np.ndarray) -> CacheEntry:
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
            return CacheEntry(st.model_version, np.ones((m, 1)), empty, empty, empty, np.zeros(m, dtype=bool))
        # everything the arrays below depend on: jobs of one model with the same fitted models (FitMemo) and
        # the same request ask the same question, answered once (arrays shared read-only between entries)
        key = (pred, shapes.shape, shapes.tobytes(), spec.lower_gpus, spec.upper_gpus, spec.gpu_unit,
               spec.adaptivity, spec.batch_size, spec.per_gpu_batch, job.batch_limits, st.stages)
        got = self._parts.get(key)
        if got is not None:
            self._parts.move_to_end(key)
            self.part_hits += 1
            return CacheEntry(st.model_version, *got)
        b0, bmax = float(job.batch_limits[0]), float(max(job.batch_limits[1], job.batch_limits[0]))
        replicas = np.floor(gpus / st.stages)
        valid &= replicas >= 1
        replicas = np.maximum(replicas, 1.0)[:, None]
        limit = pred.max_local
        adaptive = spec.adaptivity is Adaptivity.ADAPTIVE
        if adaptive and self.batch_search == "adaptdl":
            batches, local, accum, ok = adaptdl_batches(replicas, b0, bmax, limit)
        else:
            batches = candidate_batches(replicas, b0, bmax, limit, adaptive=adaptive,
                                        fixed_batch=float(spec.batch_size or b0))
            if spec.per_gpu_batch and not adaptive:
                batches = batches * replicas  # the batch is per replica: the global batch grows with the count
            local, accum = split_batches(batches, replicas, limit)
            ok = None
        step = pred.step(nodes[:, None], gpus[:, None], local, accum, st.stages)
        throughput = batches / np.maximum(step, 1e-12)
        if ok is not None:
            throughput = np.where(ok, throughput, 0.0)
        part: _Part = (batches, throughput, local, accum, valid)
        for a in part:
            a.flags.writeable = False  # shared by every entry the key answers
        self._parts[key] = part
        if len(self._parts) > _PART_LIMIT:
            self._parts.popitem(last=False)
        return CacheEntry(st.model_version, *part)

    def _select(self, st: JobState, job: JobView, e: CacheEntry) -> None:
        """Efficiency of every candidate batch, and the goodput-maximising one per shape."""
        if job.batch_limits is None or job.spec.per_gpu_batch:
            # a job in fixed per-GPU batch mode scales its learning rate with the count and is measured in
            # samples: every sample counts the same whatever the global batch
            e.eff = np.ones_like(e.batches)
        else:
            sqr, var = st.grad if st.grad is not None else (1.0, self.prior_noise_ratio)
            e.eff = statistical_efficiency(e.batches, float(job.batch_limits[0]), sqr, var)
        e.flat, e.goodput = best_per_row(e.throughput * e.eff, e.valid)
        e.grad_version = st.grad_version
        e.table = None

    def _opaque_part(self, st: JobState, job: JobView, gpu_type: str, valid: np.ndarray) -> CacheEntry:
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
        return CacheEntry(st.model_version, batch, col, np.zeros((m, 1)), np.ones((m, 1)), valid & (rate > 0))

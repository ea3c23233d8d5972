"""Which model predicts a job's step time on a GPU type: its own, a borrowed one (eq. 3.1), or a prior.

Sia's bootstrap (seed 003, section 3.3.2) uses a type's own model once the job ran multi-GPU there; before
that, it rescales the multi-GPU model of another type by the ratio of one-GPU compute times
(``est-xput_B(N) = xput_B(1) / xput_A(1) * xput_A(N)``). Without profiling, a type never tried is assumed as
fast as the fastest tried one, so the policy explores it. The choice depends only on what
:class:`~dlsched.estimators.goodput_state.JobState` holds, and is cached there until its models change.
"""

from __future__ import annotations

from dlsched.core import JobView
from dlsched.estimators.goodput_state import POOLED, JobState
from dlsched.estimators.step_predictor import Predictor
from dlsched.estimators.throughput_model import ThroughputParams

#: Generic prior for a job nothing is known about: seconds per sample on one GPU, no fixed cost, no sync.
GENERIC_BETA_C = 1e-3


def predictor(st: JobState, job: JobView, gpu_type: str, *, mode: str, hetero_aware: bool) -> Predictor | None:
    """The job's predictor on a type (None: unknown or unusable), cached until the job's models change."""
    if st.predictors_version != st.model_version:
        st.predictors.clear()
        st.predictors_version = st.model_version
    if gpu_type in st.predictors:
        return st.predictors[gpu_type]
    pred = resolve_predictor(st, job, gpu_type, mode=mode, hetero_aware=hetero_aware)
    st.predictors[gpu_type] = pred
    return pred


def resolve_predictor(st: JobState, job: JobView, gpu_type: str, *, mode: str,
                      hetero_aware: bool) -> Predictor | None:
    """Work out the predictor on a type from scratch (see the module docstring for the rules)."""
    if gpu_type in st.unusable:
        return None
    limit = st.memory_limit(gpu_type)
    if not hetero_aware:
        p = st.own_params(POOLED)
        if p is not None:
            return Predictor(p, None, limit)
        return Predictor(ThroughputParams(0.0, GENERIC_BETA_C), None, limit) if mode == "none" else None
    own = st.own_params(gpu_type)
    if own is not None:
        if st.models[gpu_type].obs.has_multi_gpu:
            return Predictor(own, None, limit)
        src = st.scaling_source(gpu_type)
        if src is None:
            return Predictor(own, None, limit)  # no type ran multi-GPU: perfect scaling (sync pinned to 0)
        return Predictor(src, own, limit)  # eq. 3.1
    if mode != "none":
        return None
    # no profiling: be optimistic about a type never tried, as fast as the fastest type tried
    known = [t for t, m in st.models.items() if m.params is not None and t != gpu_type
             and t not in st.unusable]
    if not known:
        return Predictor(ThroughputParams(0.0, GENERIC_BETA_C), None, limit)
    ref_local = float(job.batch_limits[0]) if job.batch_limits else 1.0
    preds = [resolve_predictor(st, job, t, mode=mode, hetero_aware=hetero_aware) for t in known]
    best = min((p for p in preds if p is not None), key=lambda p: p.per_sample_s(min(ref_local, p.max_local)),
               default=None)
    if best is None:
        return None
    return Predictor(best.base, best.compute, limit)

"""A job's step-time predictor on one GPU type: a fitted model, optionally rescaled to another's compute.

A value on its own (it depends only on fitted parameters), so both the estimator's per-job state
(:mod:`dlsched.estimators.goodput_state`, which caches one per type) and the rules that choose it
(:mod:`dlsched.estimators.goodput_predictors`) can name it without depending on each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlsched.estimators.throughput_model import ThroughputParams, compute_time, step_time


@dataclass(frozen=True, slots=True)
class Predictor:
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
